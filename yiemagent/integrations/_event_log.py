"""Events as JSON lines: an event sink that writes one JSON object per event.

Each line is the event's ``to_dict()`` with ``"turn"`` added after ``"type"``: the number of the
run's latest ``turn_start`` (0 before the first turn: ``agent_start`` and the user's message).
The shapes are listed in the README ("Events as JSON"); ``yiemagent run --events jsonl`` uses
this writer.
"""

from __future__ import annotations

import json
import threading
from typing import Any, TextIO

from yiemagent.core._events import AgentEvent, AgentStartEvent, TurnStartEvent
from yiemagent.core._json_safety import json_ready

__all__ = ["JsonlEventWriter", "event_line"]


def event_line(event: AgentEvent, turn: int) -> str:
    """Return ``event`` as one line of JSON (no newline): ``{"type", "turn", ...fields}``.

    The text is ASCII (non-ASCII characters are escaped), so it survives any output encoding,
    and always valid JSON: values that are not JSON (``NaN``, objects) are converted as tool
    details are (see ``json_safety``).
    """
    data = event.to_dict()
    line: dict[str, Any] = {"type": data.pop("type"), "turn": turn, **data}
    return json.dumps(json_ready(line), allow_nan=False)


class JsonlEventWriter:
    """An event sink (``agent_event_sink=`` or ``agent.subscribe``) that writes every event to
    ``stream`` as one JSON line and flushes it, so a reader sees each event as it happens.

    It counts turns itself (the turn of an event is not part of every event), so give each
    writer the events of one agent. When the stream breaks (a closed pipe: ``yiemagent run ...
    | head -1``), it stops writing and sets ``broken`` instead of raising on every later event.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.turn = 0
        self.broken: OSError | None = None
        # The agent's emitter already serialises its listeners; the lock keeps a writer shared
        # by hand between agents from interleaving half lines.
        self._lock = threading.Lock()

    def __call__(self, event: AgentEvent) -> None:
        """Write ``event`` as one line (see ``event_line``) and flush."""
        with self._lock:
            if isinstance(event, AgentStartEvent):
                self.turn = 0
            elif isinstance(event, TurnStartEvent):
                self.turn = event.turn
            if self.broken is not None:
                return
            try:
                self.stream.write(event_line(event, self.turn) + "\n")
                self.stream.flush()
            except OSError as exc:
                self.broken = exc

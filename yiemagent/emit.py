"""A serialised, failure-proof wrapper around an event sink (DESIGN point 7)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from yiemagent.errors import reraise_interrupt

__all__ = ["Emit", "SafeEmitter", "safe_emitter"]

Emit = Callable[[Any], Any]
logger = logging.getLogger("yiemagent")


class SafeEmitter:
    """Calls a sink under a lock so it is never entered by two threads at once.

    An exception raised by the sink is logged and swallowed: a broken UI or logger must not turn
    into a failed tool call. With no sink, ``active`` is false and events are dropped cheaply.
    """

    __slots__ = ("_lock", "_sink", "active")

    def __init__(self, sink: Emit | None) -> None:
        self._sink = sink
        self._lock = threading.RLock()
        self.active = sink is not None

    def __call__(self, event: Any) -> None:
        sink = self._sink
        if sink is None:
            return
        with self._lock:
            try:
                sink(event)
            except BaseException as exc:
                reraise_interrupt(exc)
                logger.exception("event sink raised on %s; the event was dropped", type(event).__name__)


def safe_emitter(emit: Emit | None) -> SafeEmitter:
    """Return ``emit`` if it is already a ``SafeEmitter``, else wrap it in one."""
    return emit if isinstance(emit, SafeEmitter) else SafeEmitter(emit)

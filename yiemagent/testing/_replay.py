"""``replay(path)``: an ``llm_call`` that answers from a cassette, with no network, key or model.

``match="strict"`` (the default) puts each request into the cassette's form and checks it against
the request recorded at that point: on a difference it raises ``ReplayMismatchError`` naming the
call and the first field that differs, in the conformance comparer's words (``system_prompt:
expected "…", actual "…"``, ``tools[1]: expected {…}, actual (absent)``). ``match="sequence"``
answers in order whatever the request says. Either way the recorded streamed pieces go to
``on_update`` before the reply is returned, and a recorded error is raised again.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from typing import Any, Literal

import attrs

from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage, now_ms
from yiemagent.core._tools import AbortSignal
from yiemagent.errors import LlmAbortedError, LlmError, LlmStreamError, LlmTimeoutError, ReplayMismatchError
from yiemagent.testing._cassette import Cassette, Interaction, read_cassette, shared_prefix
from yiemagent.testing._cassette_form import CassetteForm
from yiemagent.testing.parity._compare import field_differences
from yiemagent.testing.parity._files import printable

__all__ = ["MATCH_MODES", "ReplayLlmCall", "replay"]

MATCH_MODES = ("strict", "sequence")
Match = Literal["strict", "sequence"]
_ERRORS: dict[str, type[LlmError]] = {
    "LlmAbortedError": LlmAbortedError,
    "LlmTimeoutError": LlmTimeoutError,
    "LlmStreamError": LlmStreamError,
}


def _delta(data: dict[str, Any]) -> MessageUpdateEvent:
    return MessageUpdateEvent(
        data["kind"], data["delta"], data["content_index"], data.get("tool_call_id"), data.get("tool_name")
    )


@attrs.frozen
class _Answer:
    """One interaction made ready to give: its reply (or ``None``), deltas and error."""

    interaction: Interaction
    reply: AssistantMessage | None
    deltas: tuple[MessageUpdateEvent, ...]


class ReplayLlmCall:
    """The ``llm_call`` ``replay`` returns. ``calls`` counts the calls answered so far;
    ``remaining`` the interactions not yet given. Thread-safe: concurrent calls take distinct
    interactions, in the order they arrive (a strict replay reads them as one run's calls, which
    an agent makes one at a time)."""

    def __init__(self, cassette: Cassette, match: Match = "strict") -> None:
        if match not in MATCH_MODES:
            raise ValueError(f"match must be 'strict' or 'sequence', got {match!r}")
        self.cassette = cassette
        self.match = match
        self._answers = [
            _Answer(i, None if i.reply is None else i.message(0), tuple(_delta(d) for d in i.deltas))
            for i in cassette.interactions
        ]
        self._form = CassetteForm()
        self._next = 0
        self._lock = threading.Lock()
        # How many leading messages each recorded request shares with the one before: with the
        # previous call checked, only the rest of a request needs comparing (a turn then costs
        # what it added, not the whole history).
        requests = [i.request["messages"] for i in cassette.interactions]
        self._shared = [0] + [shared_prefix(a, b) for a, b in itertools.pairwise(requests)]
        self._checked = -1  # the latest call whose request matched

    @property
    def calls(self) -> int:
        """How many calls have been answered (or refused) so far."""
        return self._next

    @property
    def remaining(self) -> int:
        """How many recorded interactions no call has taken yet."""
        return max(0, len(self._answers) - self._next)

    def __call__(
        self,
        request: Any,
        on_update: Callable[[MessageUpdateEvent], None] | None = None,
        signal: AbortSignal | None = None,
    ) -> AssistantMessage:
        """Answer the next call from the cassette; see the module docstring."""
        with self._lock:
            index = self._next
            self._next += 1
            actual = self._form.request(request) if self.match == "strict" else None
            checked = self._checked == index - 1 and index < len(self._shared)
            known = min(self._form.reused, self._shared[index]) if checked else 0
            answer = self._answers[index] if index < len(self._answers) else None
            if actual is not None and answer is not None and answer.reply is not None:
                self._form.note_reply(answer.interaction.reply or {}, answer.interaction.deltas)
        if answer is None:
            raise ReplayMismatchError(
                f"the cassette {printable(self.cassette.source)} holds {len(self._answers)} calls and "
                f"this is call {index + 1}: the run asks the model more often than the recorded one "
                "did; record the cassette again"
            )
        if actual is not None:
            self._check(index, answer.interaction.request, actual, known)
            with self._lock:
                self._checked = max(self._checked, index)
        if signal is not None and signal.aborted:
            raise LlmAbortedError("the call was aborted")
        error = answer.interaction.error
        if error is not None:
            kind = _ERRORS.get(str(error.get("type")), LlmError)
            raise kind(str(error.get("message", "")), status=error.get("status"))
        if on_update is not None:
            for piece in answer.deltas:
                on_update(piece)
        reply = answer.reply
        if reply is None:  # the schema makes every interaction hold a reply or an error
            raise LlmError(f"call {index + 1} of the cassette holds neither a reply nor an error")
        return attrs.evolve(reply, timestamp=now_ms())

    def _check(self, index: int, expected: dict[str, Any], actual: dict[str, Any], known: int) -> None:
        """``ReplayMismatchError`` unless ``actual`` is the request recorded as call ``index``;
        its first ``known`` messages are known to be the recorded ones already."""
        want, got = expected["messages"], actual["messages"]
        if (
            len(want) == len(got)
            and want[known:] == got[known:]
            and all(expected[k] == actual[k] for k in ("system_prompt", "tools", "session_id"))
            and expected.get("output") == actual.get("output")
        ):
            return
        notes = field_differences(expected, actual)
        first = notes[0] if notes else "the request differs"
        more = f" (and {len(notes) - 1} more differences)" if len(notes) > 1 else ""
        raise ReplayMismatchError(
            f"call {index + 1} does not match the cassette {printable(self.cassette.source)}: "
            f"request.{first}{more}; record the cassette again, or replay with match='sequence'"
        )

    def __repr__(self) -> str:
        return f"ReplayLlmCall({self.cassette.source!r}, match={self.match!r}, calls={self.calls})"


def replay(path: str | os.PathLike[str], match: Match = "strict") -> ReplayLlmCall:
    """An ``llm_call`` answering from the cassette at ``path`` (written by ``record``):
    ``match="strict"`` checks each request against the recorded one, ``"sequence"`` answers in
    order. Raises ``CassetteError`` naming the file and field when the cassette cannot be used,
    ``ValueError`` for another ``match``."""
    if match not in MATCH_MODES:
        raise ValueError(f"match must be 'strict' or 'sequence', got {match!r}")
    return ReplayLlmCall(read_cassette(path), match)

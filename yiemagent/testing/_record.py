"""``record(llm_call, path)``: an ``llm_call`` that passes every call through and writes a cassette.

Each call's request (in the cassette's stable form), its reply with the streamed pieces, or the
error it raised, is added to the cassette, and the file is rewritten after every call, atomically:
a run that crashes leaves a cassette of the calls made until then. Secrets never reach the file:
every text in it is scrubbed of the wrapped client's api key, of the keys the provider presets
read from the environment, and of any ``secrets`` given (each also as JSON writes it inside a
string), with the clients' own redaction rules; and a reply's streamed pieces are masked so
that no way of joining them spells a key (``_mask_streams``), however few characters each held.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._llm_keywords import accepted_keywords
from yiemagent.core._messages import AssistantMessage
from yiemagent.errors import reraise_interrupt
from yiemagent.llm._factory import PROVIDERS
from yiemagent.llm.http._redact import Secret
from yiemagent.testing._cassette import (
    Interaction,
    cassette_text,
    interaction_text,
    shared_with,
    stored_interaction,
    write_cassette,
)
from yiemagent.testing._cassette_form import CassetteForm
from yiemagent.testing._mask_streams import key_forms, mask_deltas

__all__ = ["RecordingLlmCall", "record"]

LlmCall = Callable[..., AssistantMessage]


def _secrets(llm_call: Any, extra: Iterable[str]) -> list[Secret]:
    """The keys to keep out of the cassette: the client's own, every provider key set in the
    environment, and ``extra``."""
    found: list[Secret] = []
    own = getattr(llm_call, "_api_key", None)
    if isinstance(own, Secret) and own:
        found.append(own)
    names = {p.api_key_env for p in PROVIDERS.values() if p.api_key_env}
    found += [Secret(os.environ[n]) for n in sorted(names) if os.environ.get(n)]
    found += [Secret(s) for s in extra if isinstance(s, str) and s]
    return [Secret(form) for form in key_forms(found)]


def _scrubbed(value: Any, secrets: list[Secret]) -> Any:
    """``value`` (JSON data) with every secret masked in each string, keys included."""
    if isinstance(value, str):
        for secret in secrets:
            value = secret.scrub(value)
        return value
    if isinstance(value, dict):
        return {_scrubbed(k, secrets): _scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, secrets) for v in value]
    return value


class RecordingLlmCall:
    """The ``llm_call`` ``record`` returns: calls ``llm_call`` with the keywords it declares
    (``on_update``, ``signal``, ``max_retry_delay_ms``, ``session_id``), returns its reply or
    raises its error unchanged, and writes the cassette to ``path`` after every call.
    ``interactions`` is the number of calls recorded. Calls are recorded in the order they
    start; concurrent calls are allowed (the cassette's order is then theirs)."""

    def __init__(self, llm_call: LlmCall, path: str | os.PathLike[str], secrets: Iterable[str] = ()) -> None:
        if not callable(llm_call):
            raise TypeError(f"record needs a callable llm_call, got {type(llm_call).__name__}")
        self.llm_call = llm_call
        self.path = Path(path)
        self._keywords = accepted_keywords(llm_call)
        self._secrets = _secrets(llm_call, secrets)
        self._forms = [s.reveal() or "" for s in self._secrets]
        self._form = CassetteForm()
        # Each ended call, scrubbed; None while a call is in flight (it is not written yet).
        self._records: list[_Record | None] = []
        # The last request started, to store the next one as what it adds (see _cassette).
        self._previous: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._save()  # an unwritable path is an error now, not after the first call

    @property
    def interactions(self) -> int:
        """How many calls have been recorded (calls still in flight are not)."""
        with self._lock:
            return sum(1 for r in self._records if r is not None)

    def __call__(self, request: Any, **kwargs: Any) -> AssistantMessage:
        """Call the wrapped ``llm_call`` and record the call; see the class docstring."""
        passed = {k: v for k, v in kwargs.items() if k in self._keywords}
        pieces: list[MessageUpdateEvent] = []
        if "on_update" in self._keywords:
            outer = kwargs.get("on_update")

            def on_update(event: MessageUpdateEvent) -> None:
                pieces.append(event)
                if outer is not None:
                    outer(event)

            passed["on_update"] = on_update
        with self._lock:
            slot = len(self._records)
            form = self._form.request(request)
            shared = shared_with(self._previous, form)
            self._previous = form
            self._records.append(None)
        try:
            reply = self.llm_call(request, **passed)
        except BaseException as exc:
            reraise_interrupt(exc)
            self._settle(slot, Interaction(form, error=_error_of(exc)), shared)
            raise
        if isinstance(reply, AssistantMessage):  # anything else the loop refuses, unrecorded
            with self._lock:
                deltas = [self._form.delta(p) for p in pieces]
                reply_form = self._form.reply(reply)
            self._settle(slot, Interaction(form, reply_form, deltas), shared)
        return reply

    def _settle(self, slot: int, interaction: Interaction, shared: tuple[int, bool]) -> None:
        """Put the ended call in its place, scrubbed (``shared``: how its request compares with
        the one started just before it), and write the cassette."""
        data = interaction.to_dict()
        if "deltas" in data:
            data["deltas"] = mask_deltas(data["deltas"], self._forms)
        clean = Interaction(**_scrubbed(data, self._secrets))
        with self._lock:
            self._records[slot] = _Record(clean, shared)
        self._save()

    def _save(self) -> None:
        """Write every ended call, each request stored as what it adds to the one written
        before it: a call still in flight (or one that never ended) is not in the file, so the
        call after it is stored against the last one that is, and the file always reads."""
        with self._lock:
            texts: list[str] = []
            before: int | None = None
            for slot, record in enumerate(self._records):
                if record is None:
                    continue
                texts.append(record.text(before, self._records[before] if before is not None else None, slot))
                before = slot
            write_cassette(self.path, cassette_text(texts))

    def close(self) -> None:
        """Close the wrapped ``llm_call`` when it has a ``close`` (the clients do); the cassette
        is already written."""
        close = getattr(self.llm_call, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        return f"RecordingLlmCall({self.llm_call!r}, path={str(self.path)!r})"


class _Record:
    """An ended call, scrubbed, and its text as stored after a given earlier call (kept, since
    the text is the same at every save until a call before it ends)."""

    __slots__ = ("_text", "_written_after", "interaction", "shared")

    def __init__(self, interaction: Interaction, shared: tuple[int, bool]) -> None:
        self.interaction = interaction
        self.shared = shared  # against the call started just before it
        self._written_after: int | None = None
        self._text: str | None = None

    def text(self, before: int | None, previous: _Record | None, slot: int) -> str:
        """This call's text stored after the call in slot ``before`` (``previous``; ``None``
        when it is the first in the file)."""
        if self._text is None or before != self._written_after:
            if previous is None:
                shared = (0, False)
            elif before == slot - 1:
                shared = self.shared
            else:
                shared = shared_with(previous.interaction.request, self.interaction.request)
            self._text = interaction_text(stored_interaction(self.interaction, *shared))
            self._written_after = before
        return self._text


def _error_of(exc: BaseException) -> dict[str, Any]:
    """What a cassette keeps of an error: its class name, its text and its HTTP status."""
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    status = getattr(exc, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        error["status"] = status
    return error


def record(
    llm_call: LlmCall, path: str | os.PathLike[str], *, secrets: Iterable[str] = ()
) -> RecordingLlmCall:
    """Wrap ``llm_call`` (a provider client, the embedded model, any function of the
    ``llm_call`` protocol) so that every call it makes is written to the cassette at ``path``;
    ``replay(path)`` answers the same requests offline. ``secrets`` are further texts to mask
    (the client's key and the provider keys in the environment are masked anyway). Raises
    ``CassetteError`` when ``path`` cannot be written."""
    return RecordingLlmCall(llm_call, path, secrets)

"""``ScriptedModel``: an ``llm_call`` that answers from a list of replies, not from a model.

For tests, runnable examples and replaying a conversation offline: each call returns the next
reply of the script, whatever the request says. ``yiemagent run --model scripted:FILE.json``
reads the script from a file (see ``ScriptedModel.from_file`` for its forms; a saved session
replays the assistant's side of that conversation).

A reply is an ``AssistantMessage``; a string (a text answer); a dict in ``to_dict()`` form (it
has ``"content"``); a shorthand dict with any of ``"text"``, ``"thinking"``, ``"tool_calls"``
(a list of ``{"name", "arguments", "id"?}``), ``"stop_reason"`` and ``"error_message"``; or,
in Python only, a function of the request returning one of those. Each reply is checked field
by field (``testing._scripted_reply``): a bad one is a ``ScriptError`` naming it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from yiemagent.agent._session import SESSION_FORMAT, session_from_dict
from yiemagent.core._content import TextContent
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._files import UnreadableFileError, read_regular_file
from yiemagent.core._json_safety import reject_constant
from yiemagent.core._messages import AssistantMessage, now_ms
from yiemagent.errors import ScriptExhaustedError, SessionError
from yiemagent.testing._scripted_reply import SHORTHAND_KEYS, ScriptError, reply_message

__all__ = [
    "DEFAULT_KEEP_REQUESTS",
    "MAX_SCRIPT_BYTES",
    "SHORTHAND_KEYS",
    "Reply",
    "ScriptError",
    "ScriptExhaustedError",
    "ScriptedModel",
    "reply_message",
]

Reply = AssistantMessage | str | Mapping[str, Any] | Callable[[Any], Any]
DEFAULT_KEEP_REQUESTS = 100  # requests a ScriptedModel remembers unless told otherwise
MAX_SCRIPT_BYTES = 16 * 1024 * 1024  # the largest script file from_file reads
# Streamed pieces: a word with the spaces after it, so that joined they give the text back.
_PIECE = re.compile(r"\S+\s*|\s+")


def _keep_requests(value: Any) -> int | None:
    """``keep_requests`` checked: a whole number from 0, or ``None`` (keep every request)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ValueError(
        f"keep_requests must be a whole number from 0 (how many of the latest "
        f"requests to keep), or None to keep every request; got {value!r}"
    )


def _integer(text: str) -> int:
    """``parse_int`` for a script: Python's own limit on digits, said in words a script's author
    can act on (not a hint to call ``sys.set_int_max_str_digits``)."""
    limit = sys.get_int_max_str_digits()
    digits = len(text.lstrip("-"))
    if limit and digits > limit:
        raise ValueError(f"an integer of {digits} digits is too long (at most {limit})")
    return int(text)


def _read_script(name: str) -> Any:
    """The JSON value in the script file ``name``, read with the ``MAX_SCRIPT_BYTES`` bound
    (a FIFO or a device is refused, not read); ``ScriptError`` naming the file otherwise."""
    try:
        raw = read_regular_file(name, MAX_SCRIPT_BYTES)
    except UnreadableFileError as exc:
        raise ScriptError(f"cannot read the script {name}: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScriptError(
            f"the script {name} is not UTF-8 text (byte {exc.start} is "
            f"0x{raw[exc.start]:02x}); save it as UTF-8"
        ) from None
    try:
        return json.loads(text, parse_constant=reject_constant, parse_int=_integer)
    except RecursionError:
        raise ScriptError(f"the script {name} is nested too deeply to read") from None
    except ValueError as exc:
        raise ScriptError(f"the script {name} is not valid JSON: {exc}") from None


class ScriptedModel:
    """An ``llm_call`` that returns its replies in order, one per call: a stand-in for a model
    in tests and examples, and a replay of a recorded conversation.

    Text replies are streamed word by word to ``on_update`` when ``stream`` is true, as a
    streaming client would. Each reply gets a fresh timestamp. ``requests`` holds the latest
    ``keep_requests`` requests received (``None``: all of them), so a long replay does not keep
    every conversation it was sent. A call beyond the last reply raises
    ``ScriptExhaustedError`` (the agent turns it into an error response). Thread-safe:
    concurrent calls take distinct replies.
    """

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        name: str = "scripted",
        stream: bool = True,
        source: str | None = None,
        keep_requests: int | None = DEFAULT_KEEP_REQUESTS,
    ) -> None:
        self.replies: list[Reply] = list(replies)
        self.name = name
        self.stream = stream
        self.source = source
        # Kept as given, not copied: the default formatter builds a new request on every turn
        # (its message dicts are shared, read-only, with later requests), so one kept request
        # costs a list of references, and the bound caps how many.
        self._requests: deque[Any] = deque(maxlen=_keep_requests(keep_requests))
        self._next = 0
        self._lock = threading.Lock()
        for index, reply in enumerate(self.replies):  # a bad reply is an error now, not mid-run
            if not callable(reply):
                self.replies[index] = reply_message(reply, index, name)

    @property
    def calls(self) -> int:
        """How many replies have been taken (every call counts, kept or not)."""
        return self._next

    @property
    def keep_requests(self) -> int | None:
        """How many of the latest requests ``requests`` holds (``None``: every one)."""
        return self._requests.maxlen

    @property
    def requests(self) -> list[Any]:
        """The latest ``keep_requests`` requests received, oldest first, as a new list: after
        more calls than that, ``requests[0]`` is call number ``calls - keep_requests + 1``."""
        with self._lock:
            return list(self._requests)

    def __call__(
        self, request: Any, on_update: Callable[[MessageUpdateEvent], None] | None = None
    ) -> AssistantMessage:
        """Return the next reply (built from ``request`` when it is a function)."""
        with self._lock:
            index = self._next
            self._next += 1
            self._requests.append(request)
        if index >= len(self.replies):
            where = f" from {self.source}" if self.source else ""
            raise ScriptExhaustedError(
                f"the scripted model{where} has no reply left: it was called {index + 1} times "
                f"and has {len(self.replies)} replies; add replies to the script"
            )
        reply = self.replies[index]
        message = reply_message(reply(request) if callable(reply) else reply, index, self.name)
        message = attrs.evolve(message, timestamp=now_ms())
        if self.stream and on_update is not None:
            for block_index, block in enumerate(message.content):
                if isinstance(block, TextContent):
                    for piece in _PIECE.findall(block.text):
                        on_update(MessageUpdateEvent("text", piece, block_index))
        return message

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **options: Any) -> ScriptedModel:
        """A ``ScriptedModel`` replaying the replies in the JSON file ``path``.

        The file holds a list of replies, an object ``{"replies": [...]}``, or a session saved
        with ``agent.save`` (its assistant messages, in order: the same questions then get the
        answers of that conversation, while tools run again for real). The file must be a
        regular file of at most ``MAX_SCRIPT_BYTES`` (16 MiB): a FIFO or a device such as
        ``/dev/zero`` is refused, not read. ``options`` are the constructor's keywords. Raises
        ``ScriptError`` saying what is wrong with the file and how it should look.
        """
        name = os.fspath(path)
        data = _read_script(name)
        replies: Any
        if isinstance(data, Mapping) and data.get("format") == SESSION_FORMAT:
            try:
                session = session_from_dict(data, name)
            except SessionError as exc:
                raise ScriptError(str(exc)) from None
            replies = [m for m in session.messages if isinstance(m, AssistantMessage)]
        elif isinstance(data, Mapping) and "replies" in data:
            replies = data["replies"]
        else:
            replies = data
        if not isinstance(replies, Sequence) or isinstance(replies, (str, bytes)):
            raise ScriptError(
                f"the script {name} must be a JSON list of replies, an object "
                '{"replies": [...]} or a saved session; e.g. [{"tool_calls": '
                '[{"name": "getTime", "arguments": {"city": "Tokyo"}}]}, '
                '"It is noon in Tokyo."]'
            )
        try:
            return cls(replies, source=name, **options)
        except ScriptError as exc:
            raise ScriptError(f"the script {name}: {exc}") from None

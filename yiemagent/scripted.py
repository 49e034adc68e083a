"""``ScriptedModel``: an ``llm_call`` that answers from a list of replies, not from a model.

For tests, runnable examples and replaying a conversation offline: each call returns the next
reply of the script, whatever the request says. ``yiemagent run --model scripted:FILE.json``
reads the script from a file (see ``ScriptedModel.from_file`` for its forms; a saved session
replays the assistant's side of that conversation).

A reply is an ``AssistantMessage``; a string (a text answer); a dict in ``to_dict()`` form (it
has ``"content"``); a shorthand dict with any of ``"text"``, ``"thinking"``, ``"tool_calls"``
(a list of ``{"name", "arguments", "id"?}``), ``"stop_reason"`` and ``"error_message"``; or,
in Python only, a function of the request returning one of those.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from yiemagent.content import AgentToolCall, ContentBlock, TextContent, ThinkingContent
from yiemagent.errors import SessionError
from yiemagent.events import MessageUpdateEvent
from yiemagent.json_safety import reject_constant
from yiemagent.messages import AgentMessage, AssistantMessage, now_ms
from yiemagent.session import SESSION_FORMAT, load_session

__all__ = ["Reply", "ScriptError", "ScriptExhaustedError", "ScriptedModel", "reply_message"]

Reply = AssistantMessage | str | Mapping[str, Any] | Callable[[Any], Any]
SHORTHAND_KEYS = ("text", "thinking", "tool_calls", "stop_reason", "error_message")
# Streamed pieces: a word with the spaces after it, so that joined they give the text back.
_PIECE = re.compile(r"\S+\s*|\s+")


class ScriptError(ValueError):
    """A script (or one of its replies) cannot be read; the message says which reply and why."""


class ScriptExhaustedError(RuntimeError):
    """The model was called more often than the script has replies."""


def _tool_call(item: Any, where: str, default_id: str) -> AgentToolCall:
    """An ``AgentToolCall`` from a shorthand ``{"name", "arguments", "id"?}`` entry; a missing
    id becomes ``call_<reply>_<n>``, so replays give the same ids every time."""
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
        raise ScriptError(f"{where}: each tool call must be an object with a \"name\" (and "
                          f"\"arguments\"), e.g. {{\"name\": \"getTime\", \"arguments\": "
                          f"{{\"city\": \"Tokyo\"}}}}; got {item!r:.80}")
    unknown = sorted(set(item) - {"name", "arguments", "id"})
    if unknown:
        raise ScriptError(f"{where}: unknown tool-call key(s) {', '.join(unknown)}; a tool call "
                          "has \"name\", \"arguments\" and optionally \"id\"")
    call_id = item.get("id") or default_id
    return AgentToolCall(str(call_id), item["name"], item.get("arguments", {}))


def _shorthand(data: Mapping[str, Any], where: str, number: int, model: str) -> AssistantMessage:
    """The reply for a shorthand dict (``text``, ``thinking``, ``tool_calls``, ``stop_reason``,
    ``error_message``); ``ScriptError`` for unknown keys or malformed tool calls."""
    unknown = sorted(set(data) - set(SHORTHAND_KEYS))
    if unknown:
        raise ScriptError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; a reply is a "
                          f"string, a message dict with \"content\", or a dict with any of "
                          f"{', '.join(SHORTHAND_KEYS)}")
    content: list[ContentBlock] = []
    if data.get("thinking"):
        content.append(ThinkingContent(str(data["thinking"])))
    if data.get("text"):
        content.append(TextContent(str(data["text"])))
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ScriptError(f"{where}: \"tool_calls\" must be a list, got {type(calls).__name__}")
    content.extend(_tool_call(c, where, f"call_{number}_{n + 1}") for n, c in enumerate(calls))
    error = data.get("error_message")
    stop = data.get("stop_reason") or ("error" if error else "toolUse" if calls else "stop")
    return AssistantMessage(content=content, provider="scripted", model=model,
                            stop_reason=str(stop), error_message=None if error is None else str(error))


def reply_message(reply: Any, index: int, model: str = "scripted") -> AssistantMessage:
    """The ``AssistantMessage`` for reply number ``index`` (from 0) of a script, given in any of
    the module docstring's forms except a function; raise ``ScriptError`` naming the reply."""
    where = f"reply {index + 1}"
    if isinstance(reply, AssistantMessage):
        return reply
    if isinstance(reply, str):
        return AssistantMessage(content=[TextContent(reply)], provider="scripted", model=model)
    if not isinstance(reply, Mapping):
        raise ScriptError(f"{where}: a reply must be a string or an object, got "
                          f"{type(reply).__name__}")
    if "content" not in reply and "role" not in reply:
        return _shorthand(reply, where, index + 1, model)
    if reply.get("role", "assistant") != "assistant":
        raise ScriptError(f"{where}: a reply is the assistant's, got role {reply.get('role')!r}")
    try:
        message = AgentMessage.from_dict({**reply, "role": "assistant"})
    except (TypeError, ValueError, AttributeError) as exc:
        raise ScriptError(f"{where}: not a message dict: {exc}") from None
    assert isinstance(message, AssistantMessage)
    return message


class ScriptedModel:
    """An ``llm_call`` that returns its replies in order, one per call: a stand-in for a model
    in tests and examples, and a replay of a recorded conversation.

    Text replies are streamed word by word to ``on_update`` when ``stream`` is true, as a
    streaming client would. Each reply gets a fresh timestamp. ``requests`` keeps every request
    received. A call beyond the last reply raises ``ScriptExhaustedError`` (the agent turns it
    into an error response). Thread-safe: concurrent calls take distinct replies.
    """

    def __init__(self, replies: Iterable[Reply], *, name: str = "scripted", stream: bool = True,
                 source: str | None = None) -> None:
        self.replies: list[Reply] = list(replies)
        self.name = name
        self.stream = stream
        self.source = source
        self.requests: list[Any] = []
        self._next = 0
        self._lock = threading.Lock()
        for index, reply in enumerate(self.replies):  # a bad reply is an error now, not mid-run
            if not callable(reply):
                self.replies[index] = reply_message(reply, index, name)

    @property
    def calls(self) -> int:
        """How many replies have been taken."""
        return self._next

    def __call__(self, request: Any,
                 on_update: Callable[[MessageUpdateEvent], None] | None = None) -> AssistantMessage:
        """Return the next reply (built from ``request`` when it is a function)."""
        with self._lock:
            index = self._next
            self._next += 1
            self.requests.append(request)
        if index >= len(self.replies):
            where = f" from {self.source}" if self.source else ""
            raise ScriptExhaustedError(
                f"the scripted model{where} has no reply left: it was called {index + 1} times "
                f"and has {len(self.replies)} replies; add replies to the script")
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
        answers of that conversation, while tools run again for real). Raises ``ScriptError``
        saying what is wrong with the file and how it should look.
        """
        name = os.fspath(path)
        try:
            with open(name, encoding="utf-8") as handle:
                data = json.load(handle, parse_constant=reject_constant)
        except OSError as exc:
            raise ScriptError(f"cannot read the script {name}: {exc.strerror or exc}") from None
        except (ValueError, RecursionError) as exc:
            raise ScriptError(f"the script {name} is not valid JSON: {exc}") from None
        replies: Any
        if isinstance(data, Mapping) and data.get("format") == SESSION_FORMAT:
            try:
                session = load_session(name)
            except SessionError as exc:
                raise ScriptError(str(exc)) from None
            replies = [m for m in session.messages if isinstance(m, AssistantMessage)]
        elif isinstance(data, Mapping) and "replies" in data:
            replies = data["replies"]
        else:
            replies = data
        if not isinstance(replies, Sequence) or isinstance(replies, (str, bytes)):
            raise ScriptError(f"the script {name} must be a JSON list of replies, an object "
                              "{\"replies\": [...]} or a saved session; e.g. [{\"tool_calls\": "
                              "[{\"name\": \"getTime\", \"arguments\": {\"city\": \"Tokyo\"}}]}, "
                              "\"It is noon in Tokyo.\"]")
        try:
            return cls(replies, source=name, **options)
        except ScriptError as exc:
            raise ScriptError(f"the script {name}: {exc}") from None

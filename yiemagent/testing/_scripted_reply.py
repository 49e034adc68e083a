"""One reply of a ``ScriptedModel`` script turned into an ``AssistantMessage``, or refused.

A reply is an ``AssistantMessage``; a string (a text answer); a dict in ``to_dict()`` form (it
has ``"content"``); or a shorthand dict with any of ``"text"``, ``"thinking"``, ``"tool_calls"``
(a list of ``{"name", "arguments", "id"?}``), ``"stop_reason"`` and ``"error_message"``.
Scripts are often written by hand or come from a file, so every field is checked: a bad one is a
``ScriptError`` naming the reply and the field (``reply 3: "timestamp" must be ...``), never
a bare ``TypeError``, ``OverflowError`` or ``RecursionError`` from deeper down.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from yiemagent.core._content import AgentToolCall, ContentBlock, TextContent, ThinkingContent
from yiemagent.core._messages import AgentMessage, AssistantMessage, LlmUsage
from yiemagent.errors import ScriptError, describe_error

__all__ = ["MAX_TIMESTAMP_MS", "SHORTHAND_KEYS", "ScriptError", "reply_message"]

SHORTHAND_KEYS = ("text", "thinking", "tool_calls", "stop_reason", "error_message")
MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: what a datetime can show
_MESSAGE_TEXT_FIELDS = ("api", "provider", "model", "stop_reason", "error_message")
_USAGE_FIELDS = tuple(f.name for f in attrs.fields(LlmUsage))  # token counts and cost
_BLOCK_TEXT_FIELDS = {
    "text": ("text",),
    "thinking": ("thinking", "signature"),
    "toolCall": ("id", "name", "call_type"),
    "image": ("data", "mime_type"),
}


def _shown(value: Any) -> str:
    """A short description of a bad value for an error text: its type and the start of it."""
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the error being reported
        text = "?"
    return f"{type(value).__name__} {text[:60]}{'…' if len(text) > 60 else ''}"


def _is_number(value: Any) -> bool:
    """A finite int or float (``bool`` is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)  # an int is finite, however large


def _text_problem(data: Mapping[str, Any], keys: tuple[str, ...], where: str) -> str | None:
    """Why a field of ``keys`` in ``data`` is neither a string nor null, or ``None``."""
    for key in keys:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            return f'{where}"{key}" must be a string, got {_shown(value)}'
    return None


def _timestamp_problem(value: Any) -> str | None:
    if value is None:
        return None
    if not _is_number(value) or not 0 <= value <= MAX_TIMESTAMP_MS:
        return (
            f'"timestamp" must be milliseconds since the epoch, a number from 0 to '
            f"{MAX_TIMESTAMP_MS}; got {_shown(value)}"
        )
    return None


def _usage_problem(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return f'"usage" must be an object of token counts, got {_shown(value)}'
    for key in _USAGE_FIELDS:
        count = value.get(key, 0)
        if not _is_number(count) or count < 0:
            return f'"usage"."{key}" must be a number of at least 0, got {_shown(count)}'
    return None


def _content_problem(content: Any) -> str | None:
    if content is None:
        return None
    if not isinstance(content, list):
        return (
            '"content" must be a list of blocks, e.g. [{"type": "text", "text": '
            f'"hi"}}] (or use the shorthand {{"text": "hi"}}); got {_shown(content)}'
        )
    for index, block in enumerate(content):
        where = f'"content"[{index}]'
        if not isinstance(block, Mapping):
            return f'{where} must be an object with a "type", got {_shown(block)}'
        kind = block.get("type")
        if not isinstance(kind, str):
            return f'{where} must have a "type" string, got {_shown(kind)}'
        problem = _text_problem(block, _BLOCK_TEXT_FIELDS.get(kind, ()), f"{where}.")
        if problem is not None:
            return problem
    return None


def _message_dict(reply: Mapping[str, Any], where: str) -> AssistantMessage:
    """The reply for a dict in ``to_dict()`` form, every field checked first."""
    if reply.get("role", "assistant") != "assistant":
        raise ScriptError(f"{where}: a reply is the assistant's, got role {reply.get('role')!r}")
    problem = (
        _text_problem(reply, _MESSAGE_TEXT_FIELDS, "")
        or _content_problem(reply.get("content"))
        or _timestamp_problem(reply.get("timestamp"))
        or _usage_problem(reply.get("usage"))
    )
    if problem is not None:
        raise ScriptError(f"{where}: {problem}")
    try:
        message = AgentMessage.from_dict({**reply, "role": "assistant"})
    except Exception as exc:  # whatever else is wrong (a block nested too deep to copy, ...)
        raise ScriptError(f"{where}: not a message dict: {describe_error(exc)}") from None
    assert isinstance(message, AssistantMessage)
    return message


def _tool_call(item: Any, where: str, default_id: str) -> AgentToolCall:
    """An ``AgentToolCall`` from a shorthand ``{"name", "arguments", "id"?}`` entry; a missing
    id becomes ``call_<reply>_<n>``, so replays give the same ids every time."""
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
        raise ScriptError(
            f'{where}: each tool call must be an object with a "name" (and '
            f'"arguments"), e.g. {{"name": "getTime", "arguments": '
            f'{{"city": "Tokyo"}}}}; got {item!r:.80}'
        )
    unknown = sorted(set(item) - {"name", "arguments", "id"}, key=str)
    if unknown:
        raise ScriptError(
            f"{where}: unknown tool-call key(s) {', '.join(map(str, unknown))}; a "
            'tool call has "name", "arguments" and optionally "id"'
        )
    call_id = item.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise ScriptError(f'{where}: a tool call\'s "id" must be a string, got {_shown(call_id)}')
    return AgentToolCall(call_id or default_id, item["name"], item.get("arguments", {}))


def _shorthand(data: Mapping[str, Any], where: str, number: int, model: str) -> AssistantMessage:
    """The reply for a shorthand dict (``text``, ``thinking``, ``tool_calls``, ``stop_reason``,
    ``error_message``); ``ScriptError`` for unknown keys, values that are not strings where
    strings belong, or malformed tool calls."""
    unknown = sorted(set(data) - set(SHORTHAND_KEYS), key=str)
    if unknown:
        raise ScriptError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; a reply is a "
            f'string, a message dict with "content", or a dict with any of '
            f"{', '.join(SHORTHAND_KEYS)}"
        )
    problem = _text_problem(data, ("text", "thinking", "stop_reason", "error_message"), "")
    if problem is not None:
        raise ScriptError(f"{where}: {problem}")
    content: list[ContentBlock] = []
    if data.get("thinking"):
        content.append(ThinkingContent(data["thinking"]))
    if data.get("text"):
        content.append(TextContent(data["text"]))
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ScriptError(f'{where}: "tool_calls" must be a list, got {type(calls).__name__}')
    content.extend(_tool_call(c, where, f"call_{number}_{n + 1}") for n, c in enumerate(calls))
    error = data.get("error_message")
    stop = data.get("stop_reason") or ("error" if error else "toolUse" if calls else "stop")
    return AssistantMessage(
        content=content, provider="scripted", model=model, stop_reason=stop, error_message=error
    )


def reply_message(reply: Any, index: int, model: str = "scripted") -> AssistantMessage:
    """The ``AssistantMessage`` for reply number ``index`` (from 0) of a script, given in any of
    the module docstring's forms; raise ``ScriptError`` naming the reply (and the field) for
    anything else."""
    where = f"reply {index + 1}"
    if isinstance(reply, AssistantMessage):
        return reply
    if isinstance(reply, str):
        return AssistantMessage(content=[TextContent(reply)], provider="scripted", model=model)
    if not isinstance(reply, Mapping):
        raise ScriptError(f"{where}: a reply must be a string or an object, got {type(reply).__name__}")
    if "content" not in reply and "role" not in reply:
        return _shorthand(reply, where, index + 1, model)
    return _message_dict(reply, where)

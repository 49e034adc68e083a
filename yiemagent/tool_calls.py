"""Reading tool calls out of an assistant message's content (spec section 7, DESIGN point 2).

Accepted forms: the spec's ``{"type": "tool_calls", "tool_calls": [...]}`` list, its single
``{"type": "tool_call", ...}`` block, the OpenAI wire form ``{"id", "type": "function",
"function": {"name", "arguments"}}`` (alone or inside the list), and typed ``AgentToolCall`` blocks.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from yiemagent.content import AgentToolCall, ContentBlock
from yiemagent.messages import AssistantMessage

__all__ = ["extract_tool_calls", "new_tool_call_id", "normalize_tool_calls", "parse_arguments",
           "tool_call_from_entry"]


def new_tool_call_id() -> str:
    """A fresh id for a tool call that came without one (``call_`` and 24 hex digits)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_arguments(raw: Any) -> Any:
    """Return parsed arguments: a dict stays, a JSON string is decoded, empty means ``{}``.

    A string that is not valid JSON, or whose JSON value is a string, is returned unchanged so that
    the pipeline can tell the model exactly what was wrong (double-encoded JSON objects are
    decoded); never raises.
    """
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(parsed, str):
            # A JSON string: either double-encoded JSON (decode once more) or not an object at
            # all. Keep the raw text then, so the model is told what it really sent.
            try:
                inner = json.loads(parsed)
            except ValueError:
                return raw
            return inner if isinstance(inner, dict) else raw
        return parsed
    return raw


def tool_call_from_entry(entry: Mapping[str, Any]) -> AgentToolCall:
    """An ``AgentToolCall`` from one tool-call dict: the OpenAI wire form ``{"id", "function":
    {"name", "arguments"}}`` or the flat ``{"id", "name", "arguments"}``; arguments are parsed
    with ``parse_arguments`` and a missing id is generated. Never raises."""
    function = entry.get("function")
    if isinstance(function, Mapping):
        name, raw = function.get("name"), function.get("arguments")
    else:
        name, raw = entry.get("name"), entry.get("arguments")
    call_id = entry.get("id") or new_tool_call_id()
    return AgentToolCall(id=str(call_id), name=str(name or ""), arguments=parse_arguments(raw))


def _calls_in_block(block: ContentBlock) -> Iterable[AgentToolCall]:
    if isinstance(block, AgentToolCall):
        yield block
        return
    if not isinstance(block, Mapping):
        return
    kind = block.get("type")
    if kind == "tool_calls":
        for entry in block.get("tool_calls") or []:
            if isinstance(entry, Mapping):
                yield tool_call_from_entry(entry)
    elif kind == "tool_call" or (kind == "function" and isinstance(block.get("function"), Mapping)):
        yield tool_call_from_entry(block)


def extract_tool_calls(content: Iterable[ContentBlock]) -> tuple[bool, list[AgentToolCall]]:
    """Return ``(has_tool_calls, calls)`` for every tool call in ``content``, in order.

    Calls without an id get a generated one; never raises on malformed blocks (they are skipped).
    """
    calls = [call for block in content for call in _calls_in_block(block)]
    return bool(calls), calls


def _typed_blocks(block: ContentBlock) -> list[ContentBlock]:
    """``block`` as typed content: a dict tool-call block becomes its ``AgentToolCall``s (a
    block that holds no usable call stays as it is), a typed call without an id gets one."""
    if isinstance(block, AgentToolCall):
        return [block if block.id else attrs.evolve(block, id=new_tool_call_id())]
    calls: list[ContentBlock] = list(_calls_in_block(block))
    return calls if calls else [block]


def normalize_tool_calls(reply: AssistantMessage) -> AssistantMessage:
    """``reply`` with every tool call as a typed ``AgentToolCall`` block, each with an id.

    The loop applies it when a reply enters the history, so a call the model sent without an
    id gets one id, once, and its result and every later request use that same id. Replies
    whose calls are already typed (what the provider clients return) are returned as they are.
    """
    content = reply.content
    if all(not isinstance(b, Mapping) and (not isinstance(b, AgentToolCall) or b.id)
           for b in content):
        return reply
    return attrs.evolve(reply, content=[t for b in content for t in _typed_blocks(b)])

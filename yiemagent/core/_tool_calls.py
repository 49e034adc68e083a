"""Reading tool calls out of an assistant message's content (spec section 7, decision 2 of
docs/design.md).

Accepted forms: the spec's ``{"type": "tool_calls", "tool_calls": [...]}`` list, its single
``{"type": "tool_call", ...}`` block, the OpenAI wire form ``{"id", "type": "function",
"function": {"name", "arguments"}}`` (alone or inside the list), and typed ``AgentToolCall`` blocks.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

import attrs

from yiemagent.core._content import AgentToolCall, ContentBlock, MessageContent, content_list
from yiemagent.core._json_safety import argument_problem, reject_constant
from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage

__all__ = [
    "UNUSABLE_NOTE",
    "distinct_from",
    "extract_tool_calls",
    "new_tool_call_id",
    "normalize_tool_calls",
    "parse_arguments",
    "tool_call_from_entry",
    "used_tool_call_ids",
]


# What replaces arguments that cannot enter the history (``normalize_tool_calls``); the
# pipeline recognises it to give the call the ``invalid_arguments`` kind, not ``invalid_json``.
UNUSABLE_NOTE = "(unusable arguments: "


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, answered without the ABC machinery for a plain dict
    (what nearly every block and call entry is)."""
    return type(value) is dict or isinstance(value, Mapping)


def new_tool_call_id() -> str:
    """A fresh id for a tool call that came without one (``call_`` and 24 hex digits)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_arguments(raw: Any) -> Any:
    """Return parsed arguments: a dict stays, a JSON string is decoded, empty means ``{}``.

    A string that is not valid JSON, or whose JSON value is a string, is returned unchanged so that
    the pipeline can tell the model exactly what was wrong (double-encoded JSON objects are
    decoded); never raises.
    """
    if type(raw) is dict:  # already parsed: the common case
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw, parse_constant=reject_constant)
        except (ValueError, RecursionError):  # not JSON, NaN, or nested past the parser's limit
            return raw
        if isinstance(parsed, str):
            # A JSON string: either double-encoded JSON (decode once more) or not an object at
            # all. Keep the raw text then, so the model is told what it really sent.
            try:
                inner = json.loads(parsed, parse_constant=reject_constant)
            except (ValueError, RecursionError):
                return raw
            return inner if isinstance(inner, dict) else raw
        return parsed
    return raw


def tool_call_from_entry(
    entry: Mapping[str, Any], new_id: Callable[[], str] = new_tool_call_id
) -> AgentToolCall:
    """An ``AgentToolCall`` from one tool-call dict: the OpenAI wire form ``{"id", "function":
    {"name", "arguments"}}`` or the flat ``{"id", "name", "arguments"}``; arguments are parsed
    with ``parse_arguments`` and a missing id is made by ``new_id``. Never raises."""
    function = entry.get("function")
    if function is not None and _is_mapping(function):
        name, raw = function.get("name"), function.get("arguments")
    else:
        name, raw = entry.get("name"), entry.get("arguments")
    call_id = entry.get("id") or new_id()
    return AgentToolCall(str(call_id), str(name or ""), parse_arguments(raw))


def _calls_in_block(
    block: Mapping[str, Any], new_id: Callable[[], str] = new_tool_call_id
) -> list[AgentToolCall]:
    """The calls a dict block holds (the spec's list or single form, or the OpenAI wire form);
    none for any other dict."""
    kind = block.get("type")
    if kind == "tool_calls":
        calls: list[AgentToolCall] = []
        for entry in block.get("tool_calls") or []:
            if _is_mapping(entry):
                calls.append(tool_call_from_entry(entry, new_id))
        return calls
    if kind == "tool_call" or (kind == "function" and _is_mapping(block.get("function"))):
        return [tool_call_from_entry(block, new_id)]
    return []


def extract_tool_calls(content: Iterable[ContentBlock]) -> tuple[bool, list[AgentToolCall]]:
    """Return ``(has_tool_calls, calls)`` for every tool call in ``content``, in order.

    Calls without an id get a generated one; never raises on malformed blocks (they are skipped).
    """
    calls: list[AgentToolCall] = []
    for block in content:
        if isinstance(block, AgentToolCall):
            calls.append(block)
        elif _is_mapping(block):
            calls.extend(_calls_in_block(block))
    return bool(calls), calls


def _usable(call: AgentToolCall, new_id: Callable[[], str]) -> AgentToolCall:
    """``call`` with an id, and with a short note in place of arguments that are not finite
    JSON of a bounded depth (the pipeline then gives it an error result)."""
    if not call.id:
        call = attrs.evolve(call, id=new_id())
    elif type(call.id) is not str:  # a client that gave a number: the id is text everywhere
        call = attrs.evolve(call, id=str(call.id))
    if type(call.name) is not str:
        call = attrs.evolve(call, name="" if call.name is None else str(call.name))
    if not isinstance(call.arguments, str):
        problem = argument_problem(call.arguments)
        if problem is not None:
            call = attrs.evolve(call, arguments=f"{UNUSABLE_NOTE}{problem})")
    return call


def _is_usable(block: ContentBlock) -> bool:
    if isinstance(block, AgentToolCall):
        return (
            bool(block.id)
            and type(block.id) is str
            and type(block.name) is str
            and (isinstance(block.arguments, str) or argument_problem(block.arguments) is None)
        )
    # Typed blocks first: they are most blocks, and the Mapping check is an ABC check.
    return isinstance(block, MessageContent) or not _is_mapping(block)


def _typed_content(content: list[ContentBlock], new_id: Callable[[], str]) -> list[ContentBlock]:
    """``content`` with each dict tool-call block replaced by its usable ``AgentToolCall``s (a
    dict that holds no call stays as it is) and each typed call made usable."""
    typed: list[ContentBlock] = []
    for block in content:
        if isinstance(block, AgentToolCall):
            typed.append(_usable(block, new_id))
        elif _is_mapping(block) and (calls := _calls_in_block(block, new_id)):
            for call in calls:
                typed.append(_usable(call, new_id))
        else:
            typed.append(block)
    return typed


def _has_repeated_ids(content: list[ContentBlock]) -> bool:
    """Whether two typed tool calls of ``content`` share an id (one pass; a reply with fewer
    than two calls costs a count)."""
    seen: set[str] = set()
    for block in content:
        if isinstance(block, AgentToolCall):
            if block.id in seen:
                return True
            seen.add(block.id)
    return False


def used_tool_call_ids(messages: Iterable[AgentMessage]) -> set[str]:
    """Every tool-call id that ``messages`` use: their replies' calls and their results."""
    used: set[str] = set()
    for message in messages:
        if isinstance(message, ToolResultMessage):
            used.add(message.tool_call_id)
        elif isinstance(message, AssistantMessage):
            used.update(c.id for c in extract_tool_calls(message.content)[1])
    return used


def distinct_from(
    reply: AssistantMessage, taken: set[str], new_id: Callable[[], str] = new_tool_call_id
) -> AssistantMessage:
    """``reply`` (its calls typed, as ``normalize_tool_calls`` makes them) with a fresh id, made
    by ``new_id``, for each call whose id is in ``taken`` or repeats an earlier call of the
    reply; ``reply`` itself when no id needs one. ``taken`` is not changed."""
    used = set(taken)
    content: list[ContentBlock] = []
    changed = False
    for block in reply.content:
        if isinstance(block, AgentToolCall):
            if block.id in used:
                fresh = new_id()
                while fresh in used:
                    fresh = new_id()
                block, changed = attrs.evolve(block, id=fresh), True
            used.add(block.id)
        content.append(block)
    return reply._with_checked_content(content_list(content)) if changed else reply


def normalize_tool_calls(
    reply: AssistantMessage, new_id: Callable[[], str] = new_tool_call_id
) -> AssistantMessage:
    """``reply`` with every tool call as a typed ``AgentToolCall`` block, each with a text id of
    its own and name and with arguments that can be stored and sent again.

    The loop applies it when a reply enters the history, so a call the model sent without an
    id gets one id, once, and its result and every later request use that same id; a call whose
    id repeats an earlier call of the reply (models and servers send duplicate ids) gets a
    fresh one, so each call has one result and one approval decision of its own; arguments
    that are not finite JSON, or are nested deeper than ``MAX_JSON_DEPTH``, are replaced by a
    short note, which the pipeline answers with an error result. Missing and fresh ids are made
    by ``new_id`` (the run config's ``new_tool_call_id``; tests inject a counter). Replies that
    need none of this (what the provider clients return) are returned as they are.
    """
    if not all(map(_is_usable, reply.content)):
        # Every block is a checked block already, or a typed call made here: no need to check
        # the reply's other fields again.
        reply = reply._with_checked_content(content_list(_typed_content(reply.content, new_id)))
    if _has_repeated_ids(reply.content):
        reply = distinct_from(reply, set(), new_id)
    return reply

"""The form in which ``OpenAIChatClient`` sends messages: the one every OpenAI-compatible server takes.

OpenAI accepts the spec's shapes (system and user content as lists of parts, tool results as
lists of text parts), but servers that copy its API often accept less: llama-cpp-python's server
rejects a system, assistant or tool message whose content is not a string, and vLLM and Ollama
differ on an assistant message with tool calls and no text. So the client sends the narrowest
common form: text-only content as one string (parts a line apart), a list of parts only when it
holds an image, and an assistant message with tool calls as ``content: ""`` plus ``tool_calls``
entries of ``type: function`` with JSON-string ``arguments``.

``WireForm`` converts the typed messages of an ``LlmRequest`` straight to that form, in one pass
per message and once per message (a cache keyed by the immutable message objects);
``wire_message`` narrows a request already in the spec's OpenAI-shaped dicts (from a custom
``format_msg_for_llm``), copying only the messages that change.
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from yiemagent.core._chat_turns import (
    arguments_json,
    image_part,
    result_placeholder,
    tool_images_turn,
    with_image_turns_after_results,
)
from yiemagent.core._content import AgentToolCall, ContentBlock, ImageContent, TextContent
from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._tool_calls import extract_tool_calls
from yiemagent.core._tools import AgentTool
from yiemagent.llm._jsonutil import parts_text, to_json

__all__ = ["WireForm", "wire_message", "wire_messages"]

Wire = dict[str, Any]
_CACHED_MESSAGES = 20_000  # per client; several long conversations, far below a memory problem


def _forget(
    cache: collections.OrderedDict[int, tuple[weakref.ref[AgentMessage], list[Wire]]], key: int
) -> Any:
    """A weak reference's callback that drops ``key``'s entry when its message is freed (and
    only that entry: a later message with the same id has a reference of its own). It takes no
    lock, since it may run on the thread that holds one; single dict operations are atomic."""

    def forget(ref: weakref.ref[AgentMessage]) -> None:
        entry = cache.get(key)
        if entry is not None and entry[0] is ref:
            cache.pop(key, None)

    return forget


def _text_only(content: list[Any]) -> bool:
    """Whether every part of ``content`` is a text part (a list with an image must stay parts)."""
    return all(
        isinstance(p, Mapping) and p.get("type", "text") == "text" and isinstance(p.get("text"), str)
        for p in content
    )


def _wire_tool_call(call: Any) -> Any:
    """Return ``call`` as ``{"id", "type": "function", "function": {"name", "arguments": str}}``;
    the same object when it already is, anything unreadable as it is."""
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        return call
    function = call["function"]
    arguments = function.get("arguments")
    if call.get("type") == "function" and isinstance(arguments, str):
        return call
    out = dict(call)
    out["type"] = "function"
    if not isinstance(arguments, str):  # servers parse the string themselves; objects they reject
        out["function"] = {**function, "arguments": to_json(arguments if arguments is not None else {})}
    return out


def wire_message(message: Any) -> Any:
    """Return ``message`` in the form every OpenAI-compatible server accepts (see the module
    docstring); ``message`` itself when it needs no change, never a changed ``message``.

    Text-only content lists become one string; an assistant message with tool calls gets
    ``content: ""`` when it has no text and well-formed ``tool_calls``; anything that is not a
    message dict is returned as it is, for the server to judge.
    """
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    role = message.get("role")
    changed: dict[str, Any] = {}
    if isinstance(content, list) and _text_only(content):
        changed["content"] = parts_text(content, "\n")
    calls = message.get("tool_calls")
    if role == "assistant" and calls:
        if content is None:  # llama-cpp-python takes only a string here; "" means "no text"
            changed["content"] = ""
        if isinstance(calls, list):
            wired = [_wire_tool_call(c) for c in calls]
            if any(w is not c for w, c in zip(wired, calls, strict=True)):
                changed["tool_calls"] = wired
    if not changed:
        return message
    return {**message, **changed}


def wire_messages(messages: Sequence[Any]) -> list[Any]:
    """Return a new list of ``messages`` in wire form (``wire_message`` on each)."""
    return [wire_message(m) for m in messages]


# -- typed messages, straight to the wire ----------------------------------------------------------


def _text_of(block: ContentBlock) -> str | None:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, Mapping) and isinstance(block.get("text"), str):
        return str(block["text"])
    return None


def _content(blocks: Sequence[ContentBlock]) -> str | list[Wire]:
    """Text-only content as one string (its parts a line apart); parts when an image is in it."""
    texts: list[str] = []
    parts: list[Wire] = []
    for block in blocks:
        text = _text_of(block)
        if text is not None:
            texts.append(text)
            parts.append({"type": "text", "text": text})
        elif isinstance(block, ImageContent):
            parts.append(image_part(block))
    return "\n".join(texts) if len(parts) == len(texts) else parts


def _assistant(msg: AssistantMessage) -> Wire:
    texts: list[str] = []
    calls: list[AgentToolCall] = []
    for block in msg.content:  # text and tool calls, in order; images and thinking are dropped
        if isinstance(block, AgentToolCall):
            calls.append(block)
        elif (text := _text_of(block)) is not None:
            texts.append(text)
        if isinstance(block, Mapping):
            calls.extend(extract_tool_calls([block])[1])
    out: Wire = {"role": "assistant", "content": "".join(texts)}
    if calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": arguments_json(c.arguments)},
            }
            for c in calls
        ]
    return out


def _tool_result(msg: ToolResultMessage) -> list[Wire]:
    """The ``tool`` message, then (OpenAI tool messages carry no images) a user message with the
    images the tool returned, which the assembly moves after the whole run of tool messages."""
    texts = [t for t in map(_text_of, msg.content) if t is not None]
    images = [image_part(b) for b in msg.content if isinstance(b, ImageContent)]
    text = "\n".join(texts) if texts else result_placeholder(bool(images))
    out: list[Wire] = [{"role": "tool", "tool_call_id": msg.tool_call_id, "content": text}]
    if images:
        out.append(tool_images_turn(msg.tool_name, images))
    return out


def _convert(msg: AgentMessage) -> list[Wire]:
    if isinstance(msg, UserMessage):
        return [{"role": "user", "content": _content(msg.content)}]
    if isinstance(msg, AssistantMessage):
        return [_assistant(msg)]
    if isinstance(msg, ToolResultMessage):
        return _tool_result(msg)
    return []


class WireForm:
    """One client's conversion of typed requests to the servers' form, with its cache: each
    message (immutable) is converted once, the first time it is sent, and its dicts are reused
    on later turns. Thread-safe: one client may serve many agents at once."""

    def __init__(self, limit: int = _CACHED_MESSAGES) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        # id -> (a weak reference to the message, its wire form), least recently sent first
        self._cache: collections.OrderedDict[int, tuple[weakref.ref[AgentMessage], list[Wire]]] = (
            collections.OrderedDict()
        )
        self._tools: tuple[tuple[str, AgentTool], ...] = ()
        self._tool_list: list[Wire] = []

    def messages(self, system_prompt: str, history: Sequence[AgentMessage]) -> list[Wire]:
        """The ``messages`` of a request: the system prompt as a string, then each message in
        wire form; images a tool returned follow the run of ``tool`` messages they belong to (a
        user message between the results of one batch is a request providers reject)."""
        out: list[Wire] = [{"role": "system", "content": system_prompt}] if system_prompt else []
        with self._lock:
            out.extend(with_image_turns_after_results(history, self._converted))
        return out

    def _converted(self, msg: AgentMessage) -> list[Wire]:
        """The wire form of ``msg``: from the cache, where it moves to the recent end, or made now.
        The cache holds messages weakly, so a conversation nobody holds any more (and its
        images) is freed with its entries; an entry is only ever used for the very object it
        was made from, whatever ids are reused."""
        key = id(msg)
        cache = self._cache
        entry = cache.get(key)
        if entry is not None and entry[0]() is msg:
            cache.move_to_end(key)
            return entry[1]
        wire = _convert(msg)
        cache[key] = (weakref.ref(msg, _forget(cache, key)), wire)
        if len(cache) > self._limit:
            cache.popitem(last=False)
        return wire

    def tools(self, tools: Mapping[str, AgentTool]) -> list[Wire]:
        """The ``tools`` array (``function`` tools with each ``input_schema``), rebuilt only when
        the tools changed."""
        current = tuple(tools.items())
        with self._lock:
            if current != self._tools:  # AgentTool compares by identity: a cheap check
                self._tools = current
                self._tool_list = [
                    {
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.input_schema,
                        },
                    }
                    for t in tools.values()
                ]
            return list(self._tool_list)

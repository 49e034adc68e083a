"""The spec's request format: how the library's messages and tools look to an ``llm_call``
written against the spec (``request["messages"]``, ``request["tools"]``: OpenAI chat dicts).

This is the spec's own shape (section 14, decisions 4-5 of docs/design.md), not a provider's wire
form: provider clients read the typed fields of the ``LlmRequest`` and convert them themselves. The
view is built only when an ``llm_call`` reads it; converted messages are cached across turns
(messages are immutable and the history only grows), so a turn converts only the messages added
since."""

from __future__ import annotations

import threading
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
from yiemagent.core._output_request import OutputRequest
from yiemagent.core._tool_calls import extract_tool_calls
from yiemagent.core._tools import ToolMapping

__all__ = ["SpecViews", "message_to_openai", "response_format_view", "spec_view", "tools_to_openai"]

WireMessage = dict[str, Any]


def _part(block: ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContent):
        return image_part(block)
    if isinstance(block, Mapping) and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    return None


def _parts(content: list[ContentBlock]) -> list[dict[str, Any]]:
    return [p for p in map(_part, content) if p is not None]


def _assistant_to_openai(msg: AssistantMessage) -> WireMessage:
    texts: list[str] = []
    calls: list[AgentToolCall] = []
    for block in msg.content:  # one pass: text and tool calls, in order; images are dropped
        if isinstance(block, AgentToolCall):
            calls.append(block)
        elif isinstance(block, TextContent):
            texts.append(block.text)
        elif isinstance(block, Mapping):
            if isinstance(block.get("text"), str):
                texts.append(block["text"])
            _, found = extract_tool_calls([block])
            calls.extend(found)
    text = "".join(texts)
    out: WireMessage = {"role": "assistant", "content": text if text or not calls else None}
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


def _tool_result_to_openai(msg: ToolResultMessage) -> list[WireMessage]:
    texts: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for block in msg.content:
        if isinstance(block, TextContent):  # most results: text only, one pass, no parts list
            texts.append({"type": "text", "text": block.text})
        elif (part := _part(block)) is not None:
            (texts if part["type"] == "text" else images).append(part)
    if not texts:
        texts = [{"type": "text", "text": result_placeholder(bool(images))}]
    out = [{"role": "tool", "tool_call_id": msg.tool_call_id, "content": texts}]
    if images:
        out.append(tool_images_turn(msg.tool_name, images))
    return out


def message_to_openai(msg: AgentMessage) -> list[WireMessage]:
    """Convert one library message to its OpenAI chat message(s); unknown kinds give none."""
    if isinstance(msg, UserMessage):
        return [{"role": "user", "content": _parts(msg.content)}]
    if isinstance(msg, AssistantMessage):
        return [_assistant_to_openai(msg)]
    if isinstance(msg, ToolResultMessage):
        return _tool_result_to_openai(msg)
    return []


def _wire_messages(messages: Sequence[AgentMessage]) -> list[WireMessage]:
    """The OpenAI messages for ``messages``, the images of tool results in user turns after
    the run of ``tool`` messages (``with_image_turns_after_results``)."""
    return with_image_turns_after_results(messages, message_to_openai)


class SpecViews:
    """Remembers the spec's request view of a history (OpenAI-shaped dicts), so only messages
    added since are converted: one per agent, held by its default formatter, used when an
    ``llm_call`` reads ``request["messages"]``.

    A new history whose start is the remembered one (compared by identity first, then by value)
    reuses the converted prefix; any other history is converted afresh. ``lock`` serialises
    its users (a request may be read on another thread than the worker's).
    """

    __slots__ = ("_sources", "_system", "_tool_list", "_tools", "_wire", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._sources: list[AgentMessage] = []
        self._wire: list[WireMessage] = []
        self._tools: tuple[Any, ...] = ()
        self._tool_list: list[dict[str, Any]] = []
        self._system: tuple[str, WireMessage] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # A cache is no part of a value: a request or run config sent to another process (a
        # Ray actor), or deep-copied, gets an empty one, and the lock never travels.
        return (SpecViews, ())

    def system_message(self, prompt: str) -> WireMessage:
        """The OpenAI system message for ``prompt``, made again only when the prompt changed."""
        if self._system is None or self._system[0] != prompt:
            self._system = (prompt, {"role": "system", "content": [{"type": "text", "text": prompt}]})
        return self._system[1]

    def tools(self, tools: ToolMapping) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` array for ``tools``, rebuilt only when the tools changed."""
        current = tuple(tools.items())
        if current != self._tools:  # AgentTool compares by identity: a cheap check
            self._tools, self._tool_list = current, tools_to_openai(tools)
        return list(self._tool_list)

    def convert(self, messages: Sequence[AgentMessage]) -> list[WireMessage]:
        """Return the OpenAI messages for ``messages``: the cache's own list, to be copied by the
        caller before it is kept or changed."""
        known = len(self._sources)
        # A slice of a list (or HistoryView) is a list: compared in C, identity first.
        if len(messages) < known or messages[:known] != self._sources:
            self._sources, self._wire, known = [], [], 0
        if len(messages) > known:
            added = messages[known:]
            self._wire.extend(_wire_messages(added))
            self._sources.extend(added)
        return self._wire


def tools_to_openai(tools: ToolMapping) -> list[dict[str, Any]]:
    """Return the OpenAI ``tools`` array (``function`` tools with each ``input_schema``)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for t in tools.values()
    ]


def spec_view(
    system_prompt: str, messages: Sequence[AgentMessage], tools: ToolMapping, views: SpecViews | None
) -> dict[str, Any]:
    """The spec's request for a context (docs/design.md, decisions 4-5): ``{"messages", "tools"?}``
    with a system message of text parts first, user content as parts, assistant tool calls with
    JSON-string ``arguments`` and tool results as ``tool`` messages; ``tools`` only when there are
    some. ``views`` reuses what was converted for earlier turns (a new one converts everything)."""
    cache = views if views is not None else SpecViews()
    with cache.lock:
        history = cache.convert(messages)
        listed = [cache.system_message(system_prompt), *history] if system_prompt else history.copy()
        view: dict[str, Any] = {"messages": listed}
        if tools:
            view["tools"] = cache.tools(tools)
    return view


def response_format_view(output: OutputRequest) -> dict[str, Any]:
    """The spec view's ``response_format`` for a run's output (``LlmRequest``'s view, and a
    request dict of a custom ``format_msg_for_llm``): ``{"type": "json_schema", "json_schema":
    {"name", "schema"}}``, the spec's own form. A provider client builds its wire form from the
    ``OutputRequest`` itself."""
    return {"type": "json_schema", "json_schema": {"name": output.name, "schema": output.schema}}

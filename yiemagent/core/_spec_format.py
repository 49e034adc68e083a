"""The OpenAI chat wire format: how the library's messages and tools become an OpenAI request.

``format_msg_for_llm`` (the default formatter, spec section 14, DESIGN points 4-6) turns an
``AgentContext`` into an OpenAI chat request. Converted messages are cached across turns
(messages are immutable and the history only grows), so a turn converts only the messages added
since the last one. The Anthropic wire format lives beside it, in ``anthropic_format``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from yiemagent.core._content import AgentToolCall, ContentBlock, ImageContent, TextContent
from yiemagent.core._json_text import to_json
from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._tool_calls import extract_tool_calls
from yiemagent.core._tools import AgentContext, ToolMapping

__all__ = [
    "LlmRequest",
    "WireCache",
    "format_msg_for_llm",
    "message_to_openai",
    "tools_to_openai",
]

WireMessage = dict[str, Any]


class LlmRequest(dict[str, Any]):
    """The dict given to ``llm_call``: OpenAI chat fields, plus the source ``context``.

    It compares and serialises as the plain dict it is; ``context`` lets provider clients with
    another wire format (Anthropic) convert from the library's own messages. Treat it as
    read-only: its message dicts are cached and reused on later turns.
    """

    context: AgentContext | None = None


def _image_url(block: ImageContent) -> str:
    if block.data.startswith(("data:", "http://", "https://")):
        return block.data
    return f"data:{block.mime_type};base64,{block.data}"


def _part(block: ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContent):
        return {"type": "image_url", "image_url": {"url": _image_url(block)}}
    if isinstance(block, Mapping) and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    return None


def _parts(content: list[ContentBlock]) -> list[dict[str, Any]]:
    return [p for p in map(_part, content) if p is not None]


def _arguments_json(arguments: Any) -> str:
    if isinstance(arguments, str):  # invalid JSON from the model: send back exactly what it sent
        return arguments
    return to_json(arguments)


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
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": _arguments_json(c.arguments)}}
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
        texts = [{"type": "text", "text": "(see attached image)" if images else "(no output)"}]
    out = [{"role": "tool", "tool_call_id": msg.tool_call_id, "content": texts}]
    if images:  # OpenAI tool messages cannot carry images: attach them in a user turn
        intro = {"type": "text", "text": f"Image(s) returned by tool {msg.tool_name}:"}
        out.append({"role": "user", "content": [intro, *images]})
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
    """The OpenAI messages for ``messages``. Images that tool results return travel in a user
    message placed after the whole run of ``tool`` messages: a user message between the tool
    messages answering one assistant message is a request providers reject."""
    out: list[WireMessage] = []
    held: list[WireMessage] = []
    for msg in messages:
        wire = message_to_openai(msg)
        if isinstance(msg, ToolResultMessage):
            out.append(wire[0])
            held.extend(wire[1:])
        else:
            out.extend(held)
            held.clear()
            out.extend(wire)
    out.extend(held)
    return out


class WireCache:
    """Remembers the OpenAI form of a history so only messages added since are converted.

    A new history whose start is the remembered one (compared by identity first, then by value)
    reuses the converted prefix; any other history is converted afresh. Not thread-safe: one
    cache belongs to one agent's worker.
    """

    __slots__ = ("_sources", "_system", "_tool_list", "_tools", "_wire")

    def __init__(self) -> None:
        self._sources: list[AgentMessage] = []
        self._wire: list[WireMessage] = []
        self._tools: tuple[Any, ...] = ()
        self._tool_list: list[dict[str, Any]] = []
        self._system: tuple[str, WireMessage] | None = None

    def system_message(self, prompt: str) -> WireMessage:
        """The OpenAI system message for ``prompt``, made again only when the prompt changed."""
        if self._system is None or self._system[0] != prompt:
            self._system = (prompt, {"role": "system",
                                     "content": [{"type": "text", "text": prompt}]})
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
        {"type": "function",
         "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
        for t in tools.values()
    ]


def format_msg_for_llm(ctx: AgentContext) -> LlmRequest:
    """Default ``format_msg_for_llm``: an OpenAI chat request ``{"messages", "tools"?}``.

    The system prompt becomes a system message with text parts; user messages keep text and
    image parts; assistant tool calls carry JSON-string ``arguments``; tool results become
    ``tool`` messages. ``tools`` is present only when the context has tools.
    """
    cache = ctx.wire_cache if isinstance(ctx.wire_cache, WireCache) else WireCache()
    history = cache.convert(ctx.messages)
    messages = ([cache.system_message(ctx.system_prompt), *history] if ctx.system_prompt
                else history.copy())
    request = LlmRequest(messages=messages)
    if ctx.tools:
        request["tools"] = cache.tools(ctx.tools)
    request.context = ctx
    return request

"""Converting the library's messages and tools to an Anthropic Messages API request.

User text and images become ``text`` and ``image`` blocks; assistant text, signed thinking and tool
calls (typed ``AgentToolCall`` blocks and the spec's dict forms alike) become ``text``,
``thinking`` and ``tool_use`` blocks; tool results become ``tool_result`` blocks with
``is_error``. Consecutive messages of one role, such as the results of one batch of tool calls,
are merged into one turn, as the API expects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from yiemagent.core._content import (
    AgentToolCall,
    ContentBlock,
    ImageContent,
    TextContent,
    ThinkingContent,
)
from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._tool_calls import extract_tool_calls, parse_arguments
from yiemagent.core._tools import AgentContext
from yiemagent.core._user_input import openai_to_user_message, parse_data_url
from yiemagent.llm._jsonutil import parts_text

__all__ = [
    "context_to_anthropic",
    "messages_to_anthropic",
    "openai_request_to_anthropic",
    "sanitize_tool_id",
    "tool_to_anthropic",
]

WireBlock = dict[str, Any]
_BAD_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize_tool_id(call_id: str) -> str:
    """Return a tool-call id Anthropic accepts (``[a-zA-Z0-9_-]``, at most 64 characters).

    The same id always gives the same result, so a ``tool_use`` and its ``tool_result`` still match.
    """
    return _BAD_ID_CHARS.sub("_", call_id)[:64] or "call"


def _image_block(image: ImageContent) -> WireBlock:
    if image.data.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": image.data}}
    media_type, data = parse_data_url(image.data) or (image.mime_type, image.data)
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _plain_block(block: ContentBlock) -> WireBlock | None:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ImageContent):
        return _image_block(block)
    if isinstance(block, Mapping) and isinstance(block.get("text"), str) and block["text"]:
        return {"type": "text", "text": block["text"]}
    return None


def _tool_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    parsed = parse_arguments(arguments)
    if isinstance(parsed, Mapping):
        return dict(parsed)
    raw = parsed if isinstance(parsed, str) else json.dumps(parsed)
    return {"_raw_arguments": raw}  # not a JSON object: keep what the model sent, visibly


def _tool_use(call: AgentToolCall) -> WireBlock:
    return {
        "type": "tool_use",
        "id": sanitize_tool_id(call.id),
        "name": call.name,
        "input": _tool_input(call.arguments),
    }


def _assistant_block(block: ContentBlock) -> list[WireBlock]:
    if isinstance(block, ThinkingContent):
        if block.signature:
            return [{"type": "thinking", "thinking": block.thinking, "signature": block.signature}]
        # Unsigned reasoning (another provider's) cannot be sent as thinking: keep it as text.
        return [{"type": "text", "text": block.thinking}] if block.thinking else []
    if isinstance(block, Mapping) and block.get("type") == "redacted_thinking":
        return [{"type": "redacted_thinking", "data": block.get("data", "")}]
    _, calls = extract_tool_calls([block])
    if calls:
        return [_tool_use(c) for c in calls]
    plain = _plain_block(block)
    return [plain] if plain is not None and plain["type"] == "text" else []


def _tool_result(msg: ToolResultMessage) -> WireBlock:
    content = [b for b in map(_plain_block, msg.content) if b is not None]
    return {
        "type": "tool_result",
        "tool_use_id": sanitize_tool_id(msg.tool_call_id),
        "content": content or [{"type": "text", "text": "(no output)"}],
        "is_error": msg.is_error,
    }


def _turn(msg: AgentMessage) -> tuple[str, list[WireBlock]]:
    if isinstance(msg, UserMessage):
        return "user", [b for b in map(_plain_block, msg.content) if b is not None]
    if isinstance(msg, AssistantMessage):
        return "assistant", [w for block in msg.content for w in _assistant_block(block)]
    if isinstance(msg, ToolResultMessage):
        return "user", [_tool_result(msg)]
    return "user", []


def messages_to_anthropic(messages: Iterable[AgentMessage]) -> list[dict[str, Any]]:
    """Return the API's ``messages``: one turn per role change, empty messages left out."""
    turns: list[dict[str, Any]] = []
    for msg in messages:
        role, blocks = _turn(msg)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def tool_to_anthropic(name: str, description: str, input_schema: Mapping[str, Any]) -> WireBlock:
    """Return one entry of the API's ``tools``: ``{"name", "description", "input_schema"}``."""
    return {"name": name, "description": description, "input_schema": dict(input_schema)}


def context_to_anthropic(
    ctx: AgentContext,
) -> tuple[str, list[dict[str, Any]], list[WireBlock]]:
    """Return ``(system, messages, tools)`` for an ``AgentContext``."""
    tools = [tool_to_anthropic(t.name, t.description, t.input_schema) for t in ctx.tools.values()]
    return ctx.system_prompt, messages_to_anthropic(ctx.messages), tools


def _wire_message(msg: Mapping[str, Any]) -> AgentMessage | None:
    role = msg.get("role")
    if role == "user":
        return openai_to_user_message({"role": "user", "content": msg.get("content") or ""})
    if role == "assistant":
        content: list[ContentBlock] = []
        if text := parts_text(msg.get("content"), "\n"):
            content.append(TextContent(text))
        if msg.get("tool_calls"):
            content.append({"type": "tool_calls", "tool_calls": list(msg["tool_calls"])})
        return AssistantMessage(content)
    if role == "tool":
        return ToolResultMessage(
            str(msg.get("tool_call_id") or ""),
            str(msg.get("name") or ""),
            [TextContent(parts_text(msg.get("content"), "\n"))],
        )
    return None


def openai_request_to_anthropic(
    request: Mapping[str, Any],
) -> tuple[str, list[dict[str, Any]], list[WireBlock]]:
    """Return ``(system, messages, tools)`` for an OpenAI-format request without a ``context``.

    System (and developer) messages form the system prompt; user, assistant (with ``tool_calls``)
    and ``tool`` messages are read back into library messages and converted as usual; function
    tools give their ``parameters`` as ``input_schema``. Raises ``ValueError`` for what it cannot
    read, such as a remote image URL.
    """
    raw: Sequence[Any] = request.get("messages") or []
    system = "\n\n".join(
        parts_text(m.get("content"), "\n")
        for m in raw
        if isinstance(m, Mapping) and m.get("role") in ("system", "developer")
    )
    messages = [m for m in (_wire_message(w) for w in raw if isinstance(w, Mapping)) if m is not None]
    tools = []
    for entry in request.get("tools") or []:
        function = entry.get("function") if isinstance(entry, Mapping) else None
        if isinstance(function, Mapping) and function.get("name"):
            tools.append(
                tool_to_anthropic(
                    str(function["name"]),
                    str(function.get("description") or ""),
                    function.get("parameters") or {"type": "object", "properties": {}},
                )
            )
    return system, messages_to_anthropic(messages), tools

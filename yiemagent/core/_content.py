"""Message content blocks: text, images, thinking and typed tool calls.

Each block is a frozen attrs class with ``to_dict``/``from_dict`` for a plain, JSON-ready form.
Assistant content may also hold the spec's raw dict blocks (``{"type": "tool_calls", ...}``);
those are kept as given and pass through serialisation unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import attrs

__all__ = [
    "AgentToolCall",
    "ContentBlock",
    "ContentInput",
    "ImageContent",
    "MessageContent",
    "TextContent",
    "ThinkingContent",
    "content_from_dict",
    "content_list",
    "content_text",
    "content_to_dict",
]


@attrs.define(frozen=True)
class MessageContent:
    """Base class of every typed content block (spec ``messageContent``)."""

    block_type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """Return the block as a JSON-ready dict with a ``type`` key."""
        raise NotImplementedError


@attrs.define(frozen=True)
class TextContent(MessageContent):
    """Plain text (spec ``textContent``)."""

    text: str
    block_type: ClassVar[str] = "text"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type": "text", "text": ...}``."""
        return {"type": "text", "text": self.text}


@attrs.define(frozen=True)
class ImageContent(MessageContent):
    """An image as base64 ``data`` with its ``mime_type`` (spec ``imageContent``)."""

    data: str
    mime_type: str = "image/png"
    block_type: ClassVar[str] = "image"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type": "image", "data": ..., "mime_type": ...}``."""
        return {"type": "image", "data": self.data, "mime_type": self.mime_type}


@attrs.define(frozen=True)
class ThinkingContent(MessageContent):
    """Model reasoning; ``signature`` carries a provider's opaque token when it sends one."""

    thinking: str
    signature: str | None = None
    block_type: ClassVar[str] = "thinking"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type": "thinking", "thinking": ...}`` plus the signature when set."""
        out: dict[str, Any] = {"type": "thinking", "thinking": self.thinking}
        if self.signature is not None:
            out["signature"] = self.signature
        return out


@attrs.define(frozen=True)
class AgentToolCall(MessageContent):
    """A tool call requested by the model (spec ``agentToolCall``); also a typed content block.

    ``arguments`` is the parsed argument object. When a provider sent arguments that are not valid
    JSON, the raw string is kept here so the pipeline can report it to the model.
    """

    id: str
    name: str
    arguments: Any = attrs.field(factory=dict)
    type: str = "function"
    block_type: ClassVar[str] = "toolCall"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type": "toolCall", "id", "name", "arguments"}`` (JSON-ready)."""
        out: dict[str, Any] = {
            "type": "toolCall",
            "id": self.id,
            "name": self.name,
            "arguments": copy.deepcopy(self.arguments),
        }
        if self.type != "function":
            out["call_type"] = self.type
        return out


# A content entry is a typed block or one of the spec's raw dict blocks.
ContentBlock = MessageContent | dict[str, Any]
# What a message's ``content`` may be given as (``content_list`` turns it into blocks).
ContentInput = str | ContentBlock | Iterable[ContentBlock | str] | None


def content_to_dict(block: ContentBlock) -> dict[str, Any]:
    """Return a JSON-ready dict for a typed block, or a deep copy of a raw dict block."""
    if isinstance(block, MessageContent):
        return block.to_dict()
    if isinstance(block, Mapping):
        return copy.deepcopy(dict(block))
    raise TypeError(f"content block must be a MessageContent or a dict, got {type(block).__name__}")


def content_from_dict(data: Mapping[str, Any]) -> ContentBlock:
    """Rebuild a block from ``content_to_dict`` output; unknown types stay plain dicts."""
    kind = data.get("type")
    if kind == "text":
        return TextContent(str(data.get("text", "")))
    if kind == "image":
        mime = data.get("mime_type", data.get("mimeType", "image/png"))
        return ImageContent(str(data.get("data", "")), str(mime))
    if kind == "thinking":
        return ThinkingContent(str(data.get("thinking", "")), data.get("signature"))
    if kind == "toolCall":
        return AgentToolCall(
            id=str(data.get("id", "")),
            name=str(data.get("name", "")),
            arguments=copy.deepcopy(data.get("arguments", {})),
            type=str(data.get("call_type", "function")),
        )
    return copy.deepcopy(dict(data))


_KEPT = (MessageContent, dict)
_TYPED = "MessageContent (TextContent, ImageContent, ThinkingContent, AgentToolCall)"


def _shown(value: Any) -> str:
    return f"{type(value).__name__} ({value!r:.60})"


def _block(item: Any, owner: str, index: int) -> ContentBlock:
    if isinstance(item, str):
        return TextContent(item)
    if isinstance(item, (MessageContent, dict)):
        return item
    if isinstance(item, Mapping):
        return dict(item)
    raise TypeError(
        f"{owner}[{index}]: content blocks must be {_TYPED} instances, dicts or strings, got {_shown(item)}"
    )


def _not_content(value: Any, owner: str) -> TypeError:
    hint = " (decode bytes to a str first)" if isinstance(value, (bytes, bytearray)) else ""
    return TypeError(
        f"{owner} must be a str, one content block or a list of them, got "
        f"{_shown(value)}{hint}; a content block is a {_TYPED} or a dict, e.g. "
        "content='hi' or content=[TextContent('hi')]"
    )


def content_list(value: ContentInput, owner: str = "content") -> list[ContentBlock]:
    """Normalise message content: a string becomes one ``TextContent``, one block (typed or a
    dict) a list of it, ``None`` an empty list; an iterable gives a new list of its blocks.

    Strings inside a list become ``TextContent`` too. Anything else (a number, bytes, a list
    holding something that is not a block) raises ``TypeError`` here, when the message is built,
    rather than later when it is serialised; the error names ``owner`` (the field, e.g.
    ``UserMessage.content``), the index of a bad block, and what is accepted.
    """
    if type(value) is list:  # nearly always: a list of typed or dict blocks, kept one by one
        return [item if isinstance(item, _KEPT) else _block(item, owner, i) for i, item in enumerate(value)]
    if value is None:
        return []
    if isinstance(value, str):
        return [TextContent(value)]
    if isinstance(value, MessageContent):
        return [value]
    if isinstance(value, Mapping):  # one raw block; iterating it would give its keys
        return [value if isinstance(value, dict) else dict(value)]
    given: Any = value  # the annotation is what callers should pass, not what they may
    if isinstance(given, (bytes, bytearray)):  # iterable, but of ints
        raise _not_content(value, owner)
    try:
        items = iter(given)
    except TypeError:
        raise _not_content(value, owner) from None
    return [item if isinstance(item, _KEPT) else _block(item, owner, i) for i, item in enumerate(items)]


def content_text(content: Iterable[Any]) -> str:
    """The text of a content list: its text blocks (typed, or dicts with a string ``text``)
    joined with newlines; other blocks are left out. Never raises."""
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)

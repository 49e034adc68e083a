"""Reading Anthropic Messages API replies, whole or streamed, into an ``AssistantMessage``.

``text`` blocks become ``TextContent``, ``thinking`` blocks ``ThinkingContent`` (with their
``signature``, so they can be sent back), ``redacted_thinking`` blocks stay as raw dict blocks and
``tool_use`` blocks become ``AgentToolCall``. ``stop_reason`` maps ``end_turn`` and
``stop_sequence`` to ``stop``, ``max_tokens`` and ``model_context_window_exceeded`` to ``length``,
``tool_use`` to ``toolUse`` and ``refusal`` to ``error`` (with an ``error_message`` saying the
model declined; any text is kept).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from yiemagent.core._content import AgentToolCall, ContentBlock, TextContent, ThinkingContent
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage, LlmUsage
from yiemagent.core._tool_calls import parse_arguments
from yiemagent.llm._jsonutil import UNUSABLE, as_count
from yiemagent.llm._stream_fields import FieldReader
from yiemagent.llm.http._errors import LlmError, error_object_text
from yiemagent.llm.http._redact import excerpt
from yiemagent.llm.http._transport import Emit

__all__ = [
    "ANTHROPIC_API",
    "AnthropicStreamAssembler",
    "map_stop_reason",
    "parse_message",
    "usage_from_anthropic",
]

ANTHROPIC_API = "anthropic-messages"

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
    "refusal": "error",
}
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_RETRYABLE_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


def map_stop_reason(reason: Any) -> str:
    """Map Anthropic's ``stop_reason`` to the library's (``refusal`` is ``error``); anything else
    (``pause_turn``, missing) is ``stop``."""
    return _STOP_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"


def stop_of(reason: Any, label: str) -> tuple[str, str | None]:
    """Return ``(stop_reason, error_message)``: a refusal is an ``error`` whose message says so."""
    stop = map_stop_reason(reason)
    if stop == "error":
        return stop, f"{label} model declined to answer (stop_reason {reason})"
    return stop, None


def usage_from_anthropic(counts: Mapping[str, Any]) -> LlmUsage | None:
    """Return ``LlmUsage`` from Anthropic's usage counts (the total is the sum of all four);
    ``None`` when they cannot be read (no input or output count, or a count that is not one:
    negative, text, ``1e400``...), so the reply is unpriced rather than priced as 0 tokens."""
    read = {k: as_count(counts.get(k)) for k in _USAGE_KEYS}
    if any(v is UNUSABLE for v in read.values()):
        return None
    if read["input_tokens"] is None or read["output_tokens"] is None:
        return None
    values = {k: v if isinstance(v, int) else 0 for k, v in read.items()}
    return LlmUsage(
        input=values["input_tokens"],
        output=values["output_tokens"],
        cache_read=values["cache_read_input_tokens"],
        cache_write=values["cache_creation_input_tokens"],
        total_tokens=sum(values.values()),
    )


def error_from_body(body: Any, label: str) -> LlmError | None:
    """Return an ``LlmError`` for an ``{"type": "error", "error": {...}}`` body or stream event."""
    if not isinstance(body, Mapping) or body.get("type") != "error":
        return None
    text, kind = error_object_text(body.get("error"))
    kind = kind or "error"
    message = text or json.dumps(body)
    return LlmError(
        f"{label} reported an error ({kind}): {message}",
        provider_message=message,
        retryable=kind in _RETRYABLE_TYPES,
    )


def _block(raw: Any) -> ContentBlock | None:
    if not isinstance(raw, Mapping):
        return None
    kind = raw.get("type")
    if kind == "text":
        return TextContent(str(raw.get("text") or ""))
    if kind == "thinking":
        return ThinkingContent(str(raw.get("thinking") or ""), raw.get("signature") or None)
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": raw.get("data", "")}
    if kind == "tool_use":
        return AgentToolCall(
            id=str(raw.get("id") or ""),
            name=str(raw.get("name") or ""),
            arguments=parse_arguments(raw.get("input")),
        )
    return None  # server tools and future block types are not part of the library's model


def parse_message(body: Any, *, label: str, provider: str, model: str) -> AssistantMessage:
    """Return the ``AssistantMessage`` of a whole Messages API reply; raise ``LlmError`` for an
    error body or a body that is not a message."""
    error = error_from_body(body, label)
    if error is not None:
        raise error
    if not isinstance(body, Mapping) or not isinstance(body.get("content"), list):
        raise LlmError(f"{label} reply is not a message: {excerpt(json.dumps(body), 300)}")
    content = [b for b in map(_block, body["content"]) if b is not None]
    usage = body.get("usage")
    stop, problem = stop_of(body.get("stop_reason"), label)
    return AssistantMessage(
        content,
        api=ANTHROPIC_API,
        provider=provider,
        model=model,
        usage=usage_from_anthropic(usage) if isinstance(usage, Mapping) else None,
        stop_reason=stop,
        error_message=problem,
    )


# The string fields of each known kind of content block, checked when the block starts.
_START_TEXTS = {
    "text": ("text",),
    "thinking": ("thinking", "signature"),
    "tool_use": ("id", "name"),
    "redacted_thinking": ("data",),
}
_KNOWN_BLOCKS = frozenset(_START_TEXTS)
# Each delta the client keeps: its text field, the kind of block it extends, and the kind of
# update it is reported as (a signature is kept, not reported). Others (citations_delta) are
# skipped.
_DELTAS = {
    "text_delta": ("text", "text", "text"),
    "thinking_delta": ("thinking", "thinking", "thinking"),
    "input_json_delta": ("partial_json", "tool_use", "tool_call"),
    "signature_delta": ("signature", "thinking", None),
}


class _StreamBlock:
    """A content block being assembled from ``content_block_*`` events."""

    __slots__ = ("parts", "signature", "start")

    def __init__(self, start: Mapping[str, Any]) -> None:
        self.start = dict(start)
        self.parts: list[str] = []
        self.signature: str | None = None

    @property
    def kind(self) -> str | None:
        """The block's ``type`` (checked to be a string when the block started)."""
        kind = self.start.get("type")
        return kind if isinstance(kind, str) else None

    def build(self) -> ContentBlock | None:
        kind = self.kind
        joined = "".join(self.parts)
        if kind == "text":
            return TextContent(str(self.start.get("text") or "") + joined)
        if kind == "thinking":
            signature = self.signature or self.start.get("signature") or None
            return ThinkingContent(str(self.start.get("thinking") or "") + joined, signature)
        if kind == "tool_use":
            arguments = parse_arguments(joined) if self.parts else parse_arguments(self.start.get("input"))
            return AgentToolCall(
                id=str(self.start.get("id") or ""),
                name=str(self.start.get("name") or ""),
                arguments=arguments,
            )
        return _block(self.start)


def _checked_start(read: FieldReader, event: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return the ``content_block`` of a ``content_block_start`` event once its ``type`` and the
    fields the client reads of a block of that type hold what they should."""
    block = read.mapping(event, "content_block", "")
    if block is None:
        raise read.absent(event, "content_block", "", "an object")
    kind = read.text(block, "type", "content_block")
    if kind is None:
        raise read.absent(block, "type", "content_block", "a string")
    for key in _START_TEXTS.get(kind, ()):
        read.text(block, key, "content_block")
    if kind == "tool_use":
        read.mapping(block, "input", "content_block")
    return block


class AnthropicStreamAssembler:
    """Builds an ``AssistantMessage`` from Messages API stream events, reporting each delta.

    ``handle`` takes one decoded event and returns ``True`` at ``message_stop``; an ``error`` event
    raises ``LlmError``. Text, thinking and tool-input deltas go to ``emit`` with the block's
    ``index`` as ``content_index``; signature deltas are kept, not reported. An event whose fields
    hold the wrong kind of value (see ``stream_fields``), a block started twice, or a delta for a
    block of another kind (text into a tool call) raises ``LlmStreamError`` saying so; events and
    blocks of kinds the client does not know are skipped, and take no place in ``content_index``.
    """

    def __init__(self, emit: Emit, *, label: str, provider: str, model: str) -> None:
        self._emit = emit
        self._label = label
        self._provider = provider
        self._model = model
        self._blocks: dict[int, _StreamBlock] = {}
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None

    def handle(self, event: Any) -> bool:
        """Apply one event; return ``True`` when it is ``message_stop``."""
        error = error_from_body(event, self._label)
        if error is not None:
            raise error
        read = FieldReader(self._label, "event", event)
        event = read.object(event, "")
        kind = read.text(event, "type", "")
        if kind == "message_start":
            message = read.mapping(event, "message", "")
            if message is not None:
                self._add_usage(read.mapping(message, "usage", "message"))
        elif kind == "content_block_start":
            self._start(read, event)
        elif kind == "content_block_delta":
            self._delta(read, event)
        elif kind == "message_delta":
            delta = read.mapping(event, "delta", "") or {}
            self._stop_reason = read.text(delta, "stop_reason", "delta") or self._stop_reason
            self._add_usage(read.mapping(event, "usage", ""))
        return kind == "message_stop"

    def _add_usage(self, usage: Mapping[str, Any] | None) -> None:
        if usage is not None:
            self._usage.update({k: v for k, v in usage.items() if v is not None})

    def _start(self, read: FieldReader, event: Mapping[str, Any]) -> None:
        index = read.index(event, "index", "")
        index = len(self._blocks) if index is None else index
        block = _checked_start(read, event)
        if index in self._blocks:
            raise read.problem(f"content block {index} started a second time")
        self._blocks[index] = _StreamBlock(block)

    def _delta(self, read: FieldReader, event: Mapping[str, Any]) -> None:
        index = read.index(event, "index", "") or 0
        delta = read.mapping(event, "delta", "")
        if delta is None:
            raise read.absent(event, "delta", "", "an object")
        kind = read.text(delta, "type", "delta")
        if kind is None:
            raise read.absent(delta, "type", "delta", "a string")
        if kind not in _DELTAS:
            return
        key, block_kind, reported = _DELTAS[kind]
        text = read.text(delta, key, "delta") or ""
        block = self._blocks.get(index)
        if block is None:  # a delta without its start: assume the kind the delta implies
            block = self._blocks[index] = _StreamBlock({"type": block_kind})
        if block.kind not in _KNOWN_BLOCKS:
            return  # a block the message will not hold (a server tool's): nothing to report
        if block.kind != block_kind:
            raise read.problem(f"a {kind} for content block {index}, which is a {block.kind} block")
        if reported is None:
            block.signature = (block.signature or "") + text
        else:
            self._report(block, reported, text, self._position(index))

    def _position(self, index: int) -> int:
        """Where the block Anthropic numbers ``index`` sits in the assembled message's content:
        blocks of kinds the library leaves out (server tools, future kinds) take no place, so a
        listener's ``content_index`` always points at the block its deltas build."""
        return sum(1 for i, b in self._blocks.items() if i < index and b.kind in _KNOWN_BLOCKS)

    def _report(self, block: _StreamBlock, kind: str, text: str, index: int) -> None:
        block.parts.append(text)
        if kind == "tool_call":  # of a tool_use block
            call_id, name = block.start.get("id"), block.start.get("name")
            self._emit(
                MessageUpdateEvent(
                    "tool_call",
                    text,
                    index,
                    call_id if isinstance(call_id, str) and call_id else None,
                    name if isinstance(name, str) and name else None,
                )
            )
        elif text:
            self._emit(MessageUpdateEvent(kind, text, index))  # type: ignore[arg-type]

    def finish(self) -> AssistantMessage:
        """Return the assembled message (after ``message_stop``)."""
        content = [b for b in (self._blocks[i].build() for i in sorted(self._blocks)) if b is not None]
        stop, error = stop_of(self._stop_reason, self._label)
        return AssistantMessage(
            content,
            api=ANTHROPIC_API,
            provider=self._provider,
            model=self._model,
            usage=usage_from_anthropic(self._usage) if self._usage else None,
            stop_reason=stop,
            error_message=error,
        )

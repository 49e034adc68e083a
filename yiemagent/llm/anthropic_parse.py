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

from yiemagent.content import AgentToolCall, ContentBlock, TextContent, ThinkingContent
from yiemagent.events import MessageUpdateEvent
from yiemagent.llm.errors import LlmError, error_object_text
from yiemagent.llm.jsonutil import as_int, as_mapping
from yiemagent.llm.redact import excerpt
from yiemagent.llm.transport import Emit
from yiemagent.messages import AssistantMessage, LlmUsage
from yiemagent.tool_calls import parse_arguments

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
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
               "cache_creation_input_tokens")
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


def usage_from_anthropic(counts: Mapping[str, Any]) -> LlmUsage:
    """Return ``LlmUsage`` from Anthropic's usage counts; the total is the sum of all four."""
    values = {k: as_int(counts.get(k)) for k in _USAGE_KEYS}
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
    return LlmError(f"{label} reported an error ({kind}): {message}", provider_message=message,
                    retryable=kind in _RETRYABLE_TYPES)


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
        return AgentToolCall(id=str(raw.get("id") or ""), name=str(raw.get("name") or ""),
                             arguments=parse_arguments(raw.get("input")))
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
        content, api=ANTHROPIC_API, provider=provider, model=model,
        usage=usage_from_anthropic(usage) if isinstance(usage, Mapping) else None,
        stop_reason=stop, error_message=problem,
    )


class _StreamBlock:
    """A content block being assembled from ``content_block_*`` events."""

    __slots__ = ("parts", "signature", "start")

    def __init__(self, start: Mapping[str, Any]) -> None:
        self.start = dict(start)
        self.parts: list[str] = []
        self.signature: str | None = None

    def build(self) -> ContentBlock | None:
        kind = self.start.get("type")
        joined = "".join(self.parts)
        if kind == "text":
            return TextContent(str(self.start.get("text") or "") + joined)
        if kind == "thinking":
            signature = self.signature or self.start.get("signature") or None
            return ThinkingContent(str(self.start.get("thinking") or "") + joined, signature)
        if kind == "tool_use":
            arguments = parse_arguments(joined) if self.parts else parse_arguments(
                self.start.get("input"))
            return AgentToolCall(id=str(self.start.get("id") or ""),
                                 name=str(self.start.get("name") or ""), arguments=arguments)
        return _block(self.start)


class AnthropicStreamAssembler:
    """Builds an ``AssistantMessage`` from Messages API stream events, reporting each delta.

    ``handle`` takes one decoded event and returns ``True`` at ``message_stop``; an ``error`` event
    raises ``LlmError``. Text, thinking and tool-input deltas go to ``emit`` with the block's
    ``index`` as ``content_index``; signature deltas are kept, not reported.
    """

    def __init__(self, emit: Emit, *, label: str, provider: str, model: str) -> None:
        self._emit = emit
        self._label = label
        self._provider = provider
        self._model = model
        self._blocks: dict[int, _StreamBlock] = {}
        self._usage: dict[str, Any] = {}
        self._stop_reason: Any = None

    def handle(self, event: Any) -> bool:
        """Apply one event; return ``True`` when it is ``message_stop``."""
        error = error_from_body(event, self._label)
        if error is not None:
            raise error
        if not isinstance(event, Mapping):
            return False
        kind = event.get("type")
        if kind == "message_start":
            self._add_usage(as_mapping(event.get("message")).get("usage"))
        elif kind == "content_block_start" and isinstance(event.get("content_block"), Mapping):
            self._blocks[int(event.get("index", len(self._blocks)))] = _StreamBlock(
                event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), Mapping):
            self._delta(int(event.get("index", 0)), event["delta"])
        elif kind == "message_delta":
            self._stop_reason = as_mapping(event.get("delta")).get("stop_reason") or self._stop_reason
            self._add_usage(event.get("usage"))
        return kind == "message_stop"

    def _add_usage(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            self._usage.update({k: v for k, v in usage.items() if v is not None})

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        block = self._blocks.get(index)
        if block is None:  # a delta without its start: assume the kind the delta implies
            kinds = {"text_delta": "text", "thinking_delta": "thinking",
                     "input_json_delta": "tool_use"}
            block = self._blocks[index] = _StreamBlock({"type": kinds.get(str(delta.get("type")), "")})
        kind = delta.get("type")
        if kind == "text_delta":
            self._report(block, "text", str(delta.get("text") or ""), index)
        elif kind == "thinking_delta":
            self._report(block, "thinking", str(delta.get("thinking") or ""), index)
        elif kind == "input_json_delta":
            self._report(block, "tool_call", str(delta.get("partial_json") or ""), index)
        elif kind == "signature_delta":
            block.signature = (block.signature or "") + str(delta.get("signature") or "")

    def _report(self, block: _StreamBlock, kind: str, text: str, index: int) -> None:
        block.parts.append(text)
        if kind == "tool_call":
            call_id, name = block.start.get("id"), block.start.get("name")
            self._emit(MessageUpdateEvent("tool_call", text, index,
                                          str(call_id) if call_id else None,
                                          str(name) if name else None))
        elif text:
            self._emit(MessageUpdateEvent(kind, text, index))  # type: ignore[arg-type]

    def finish(self) -> AssistantMessage:
        """Return the assembled message (after ``message_stop``)."""
        content = [b for b in (self._blocks[i].build() for i in sorted(self._blocks))
                   if b is not None]
        stop, error = stop_of(self._stop_reason, self._label)
        return AssistantMessage(
            content, api=ANTHROPIC_API, provider=self._provider, model=self._model,
            usage=usage_from_anthropic(self._usage) if self._usage else None,
            stop_reason=stop, error_message=error,
        )

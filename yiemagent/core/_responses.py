"""The responses a run makes itself, beside the model's: a terminated batch's (spec section 10)
and the runtime's own (error, aborted, max_turns, usage_limit), which never join the history."""

from __future__ import annotations

from typing import TYPE_CHECKING

from yiemagent.core._content import ContentBlock, TextContent
from yiemagent.core._messages import AssistantMessage, now_ms

if TYPE_CHECKING:
    from yiemagent.core._tools import AgentState, AgentToolCallBatch

__all__ = ["ABORTED", "build_terminated_response", "runtime_response"]

ABORTED = "The run was aborted."


def build_terminated_response(
    batch: AgentToolCallBatch, response: AssistantMessage, timestamp: int | None = None
) -> AssistantMessage:
    """The final response of a terminated batch (spec section 10): the tools' text after
    ``Tool execution completed.``, ``error_message`` set when any call failed; ``timestamp``
    (milliseconds) defaults to now."""
    content: list[ContentBlock] = [TextContent("Tool execution completed.")]
    for msg in batch.messages:
        for block in msg.content:
            if isinstance(block, TextContent):
                content.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                content.append(TextContent(block["text"]))
    failed = any(m.is_error for m in batch.messages)
    return AssistantMessage(
        content=content,
        api=response.api,
        provider=response.provider,
        model=response.model,
        usage=response.usage,
        stop_reason="tool_use_terminated",
        error_message="One or more tool calls failed" if failed else None,
        timestamp=now_ms() if timestamp is None else timestamp,
    )


def runtime_response(
    state: AgentState, stop_reason: str, error_message: str | None, timestamp: int
) -> AssistantMessage:
    """A response the runtime makes itself (error, aborted, max_turns, ...), in the name of the
    state's model; it is not added to the history."""
    model = state.model
    return AssistantMessage(
        content=[],
        model=model.name if model is not None else "",
        provider=model.provider if model is not None else "",
        api=model.api if model is not None else "",
        stop_reason=stop_reason,
        error_message=error_message,
        timestamp=timestamp,
    )

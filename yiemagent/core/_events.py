"""Events sent to an agent's event sink: the spec's three tool events and the run events.

Order within a run (also in the README): ``AgentStartEvent``; ``MessageStartEvent`` and
``MessageEndEvent`` for the user message (and each message that joins the run); then per turn
``TurnStartEvent``, ``MessageStartEvent``, ``MessageUpdateEvent``* (only when the LLM client
streams), ``MessageEndEvent`` for the reply, for each tool call ``ToolExecStartEvent``,
``ToolExecUpdateEvent``*, ``ToolExecEndEvent``, then ``MessageStartEvent``/``MessageEndEvent``
for each tool result, and ``TurnEndEvent``; finally ``AgentEndEvent``. Every start has its end,
on error and abort paths too.

Every event has ``to_dict()``: ``{"type": event_type, ...}`` with its fields as JSON-ready data
(messages and results through their own ``to_dict``). Tool events also give what conformance
traces compare: ``text``, and for the end event ``is_error`` and ``error_kind``
(``yiemagent.parity`` documents that trace format).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import attrs

from yiemagent.core._approval import PendingApproval
from yiemagent.core._content import content_text
from yiemagent.core._error_kinds import error_kind
from yiemagent.core._json_safety import json_ready
from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage
from yiemagent.core._tools import AgentToolResult

__all__ = [
    "AgentEndEvent",
    "AgentEvent",
    "AgentStartEvent",
    "ApprovalRequestedEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "ToolExecEndEvent",
    "ToolExecStartEvent",
    "ToolExecUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]


@attrs.define(frozen=True)
class AgentEvent:
    """Base class of every event; ``event_type`` is a stable snake_case name for logs."""

    event_type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        """Return the event as JSON-ready data: ``{"type": event_type}`` plus its fields."""
        return {"type": self.event_type}


def _plain(value: Any) -> Any:
    """A JSON-ready copy of an event payload (tool arguments, a partial result)."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return copy.deepcopy(json_ready(value))


def _partial_text(partial: Any) -> str:
    """The text of a partial result: its content's text blocks, or the text itself."""
    if isinstance(partial, str):
        return partial
    content = partial.get("content") if isinstance(partial, Mapping) else getattr(partial, "content", None)
    if isinstance(content, str):
        return content
    return content_text(content) if isinstance(content, list) else ""


@attrs.define(frozen=True)
class ToolExecStartEvent(AgentEvent):
    """A tool call is about to be prepared (spec ``toolExecStartEvent``)."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    event_type: ClassVar[str] = "tool_execution_start"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "tool_call_id", "tool_name", "arguments"}``."""
        return {
            "type": self.event_type,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments": _plain(self.arguments),
        }


@attrs.define(frozen=True)
class ToolExecUpdateEvent(AgentEvent):
    """A running tool reported a partial result (spec ``toolExecUpdateEvent``)."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    partial_result: Any
    event_type: ClassVar[str] = "tool_execution_update"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "tool_call_id", "tool_name", "arguments", "text",
        "partial_result"}``; ``text`` is the partial result's text."""
        return {
            "type": self.event_type,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments": _plain(self.arguments),
            "text": _partial_text(self.partial_result),
            "partial_result": _plain(self.partial_result),
        }


@attrs.define(frozen=True)
class ToolExecEndEvent(AgentEvent):
    """A tool call finished, successfully or not (spec ``toolExecEndEvent``)."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool = False
    event_type: ClassVar[str] = "tool_execution_end"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "tool_call_id", "tool_name", "is_error", "error_kind", "text",
        "result"}``: ``error_kind`` is the pipeline's kind of error (``None`` for results a
        tool or hook made), ``text`` the result's text, ``result`` its ``to_dict()``."""
        return {
            "type": self.event_type,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "is_error": self.is_error,
            "error_kind": error_kind(self.result.details),
            "text": content_text(self.result.content),
            "result": self.result.to_dict(),
        }


@attrs.define(frozen=True)
class AgentStartEvent(AgentEvent):
    """A run started."""

    event_type: ClassVar[str] = "agent_start"


@attrs.define(frozen=True)
class AgentEndEvent(AgentEvent):
    """A run ended; ``messages`` are the messages the run added to the history, ``response`` the
    run's one response (also a made-up one: error, aborted, max_turns, tool_use_terminated)."""

    messages: list[AgentMessage] = attrs.field(factory=list)
    response: AssistantMessage | None = attrs.field(default=None, kw_only=True)
    event_type: ClassVar[str] = "agent_end"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "messages", "response"}`` with each message's ``to_dict()`` (the
        response is ``None`` when the event was made without one), and ``"run_usage"`` (the
        run's ``RunUsage.to_dict()``) when the response carries it."""
        data = {
            "type": self.event_type,
            "messages": [m.to_dict() for m in self.messages],
            "response": None if self.response is None else self.response.to_dict(),
        }
        usage = None if self.response is None else self.response.run_usage
        if usage is not None:
            data["run_usage"] = usage.to_dict()
        return data


@attrs.define(frozen=True)
class TurnStartEvent(AgentEvent):
    """A turn (one LLM call and its tool calls) started; ``turn`` counts from 1 within the run."""

    turn: int = 1
    event_type: ClassVar[str] = "turn_start"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "turn"}``."""
        return {"type": self.event_type, "turn": self.turn}


@attrs.define(frozen=True)
class TurnEndEvent(AgentEvent):
    """A turn ended with the assistant ``message`` and the ``tool_results`` of its calls."""

    message: AssistantMessage
    tool_results: list[ToolResultMessage] = attrs.field(factory=list)
    event_type: ClassVar[str] = "turn_end"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "message", "tool_results"}`` with the messages' ``to_dict()``."""
        return {
            "type": self.event_type,
            "message": self.message.to_dict(),
            "tool_results": [m.to_dict() for m in self.tool_results],
        }


@attrs.define(frozen=True)
class MessageStartEvent(AgentEvent):
    """A message enters the conversation (user messages, the assistant reply, tool results)."""

    message: AgentMessage | None = None
    event_type: ClassVar[str] = "message_start"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "message"}``; the message is ``None`` for a model reply whose call
        has not returned yet."""
        return {"type": self.event_type, "message": None if self.message is None else self.message.to_dict()}


@attrs.define(frozen=True)
class MessageUpdateEvent(AgentEvent):
    """A streamed piece of the assistant reply: text, thinking, or tool-call argument text.

    ``content_index`` is the block (or tool call) index the delta belongs to; tool-call deltas
    carry ``tool_call_id`` and ``tool_name`` when the provider has sent them.
    """

    kind: Literal["text", "thinking", "tool_call"]
    delta: str
    content_index: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None
    event_type: ClassVar[str] = "message_update"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "kind", "delta", "content_index", "tool_call_id", "tool_name"}``."""
        return {
            "type": self.event_type,
            "kind": self.kind,
            "delta": self.delta,
            "content_index": self.content_index,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
        }


@attrs.define(frozen=True)
class MessageEndEvent(AgentEvent):
    """A message is complete and added to the history."""

    message: AgentMessage
    event_type: ClassVar[str] = "message_end"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "message"}`` with the message's ``to_dict()``."""
        return {"type": self.event_type, "message": self.message.to_dict()}


@attrs.define(frozen=True)
class ApprovalRequestedEvent(AgentEvent):
    """A batch paused: ``pending`` are the calls that wait for a decision (with the arguments
    that will execute if approved); the run ends with ``stop_reason="awaiting_approval"``."""

    pending: list[PendingApproval] = attrs.field(factory=list)
    event_type: ClassVar[str] = "approval_requested"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "pending": [{"tool_call_id", "tool_name", "arguments"}]}``."""
        return {"type": self.event_type, "pending": [p.to_dict() for p in self.pending]}

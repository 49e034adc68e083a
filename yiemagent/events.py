"""Events sent to an agent's event sink: the spec's three tool events and the run events.

Order within a run (also in the README): ``AgentStartEvent``; ``MessageStartEvent`` and
``MessageEndEvent`` for the user message (and each message that joins the run); then per turn
``TurnStartEvent``, ``MessageStartEvent``, ``MessageUpdateEvent``* (only when the LLM client
streams), ``MessageEndEvent`` for the reply, for each tool call ``ToolExecStartEvent``,
``ToolExecUpdateEvent``*, ``ToolExecEndEvent``, then ``MessageStartEvent``/``MessageEndEvent``
for each tool result, and ``TurnEndEvent``; finally ``AgentEndEvent``. Every start has its end,
on error and abort paths too.

Every event has ``to_dict()``: a JSON-ready dict whose ``"type"`` is its ``event_type`` (the
README's "Events as JSON" lists each shape); ``yiemagent.event_log`` writes them as JSON lines.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

import attrs

from yiemagent.content import content_to_dict
from yiemagent.json_safety import json_ready
from yiemagent.messages import AgentMessage, AssistantMessage, ToolResultMessage
from yiemagent.tool_types import AgentToolResult

__all__ = [
    "AgentEndEvent",
    "AgentEvent",
    "AgentStartEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "ToolExecEndEvent",
    "ToolExecStartEvent",
    "ToolExecUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
    "tool_result_to_dict",
]


def _plain(value: Any) -> Any:
    """A JSON-ready copy of ``value`` (a tool's arguments, details or progress report), never
    shared with the history: converted as ``json_safety.json_ready`` converts tool details."""
    return copy.deepcopy(json_ready(value))


def tool_result_to_dict(result: AgentToolResult) -> dict[str, Any]:
    """``{"content": [...], "details": {...}, "usage": {...} | None, "terminate": bool}``: the
    JSON-ready form of a tool's result (content blocks as in messages' ``to_dict``)."""
    return {
        "content": [content_to_dict(b) for b in result.content],
        "details": _plain(result.details),
        "usage": None if result.usage is None else result.usage.to_dict(),
        "terminate": bool(result.terminate),
    }


def _progress(partial: Any) -> Any:
    """A progress report as JSON: a tool result's dict form, anything else converted."""
    return tool_result_to_dict(partial) if isinstance(partial, AgentToolResult) else _plain(partial)


@attrs.define(frozen=True)
class AgentEvent:
    """Base class of every event; ``event_type`` is a stable snake_case name for logs."""

    event_type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-ready dict: ``{"type": event_type, ...its fields}``."""
        return {"type": self.event_type}


@attrs.define(frozen=True)
class ToolExecStartEvent(AgentEvent):
    """A tool call is about to be prepared (spec ``toolExecStartEvent``)."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    event_type: ClassVar[str] = "tool_execution_start"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "tool_call_id", "tool_name", "args"}`` (args JSON-ready)."""
        return {"type": self.event_type, "tool_call_id": self.tool_call_id,
                "tool_name": self.tool_name, "args": _plain(self.arguments)}


@attrs.define(frozen=True)
class ToolExecUpdateEvent(AgentEvent):
    """A running tool reported a partial result (spec ``toolExecUpdateEvent``)."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    partial_result: Any
    event_type: ClassVar[str] = "tool_execution_update"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "tool_call_id", "tool_name", "args", "partial_result"}``; a partial
        result that is an ``AgentToolResult`` takes ``tool_result_to_dict``'s form."""
        return {"type": self.event_type, "tool_call_id": self.tool_call_id,
                "tool_name": self.tool_name, "args": _plain(self.arguments),
                "partial_result": _progress(self.partial_result)}


@attrs.define(frozen=True)
class ToolExecEndEvent(AgentEvent):
    """A tool call finished, successfully or not (spec ``toolExecEndEvent``)."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool = False
    event_type: ClassVar[str] = "tool_execution_end"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "tool_call_id", "tool_name", "result", "is_error"}``, the result in
        ``tool_result_to_dict``'s form."""
        return {"type": self.event_type, "tool_call_id": self.tool_call_id,
                "tool_name": self.tool_name, "result": tool_result_to_dict(self.result),
                "is_error": bool(self.is_error)}


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
        """Return ``{"type", "messages": [message.to_dict(), ...]}``."""
        return {"type": self.event_type, "messages": [m.to_dict() for m in self.messages]}


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
        """Return ``{"type", "message", "tool_results": [...]}``, messages as ``to_dict()``."""
        return {"type": self.event_type, "message": self.message.to_dict(),
                "tool_results": [r.to_dict() for r in self.tool_results]}


@attrs.define(frozen=True)
class MessageStartEvent(AgentEvent):
    """A message enters the conversation (user messages, the assistant reply, tool results)."""

    message: AgentMessage | None = None
    event_type: ClassVar[str] = "message_start"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "message"}``, the message as ``to_dict()`` (or ``None``)."""
        return {"type": self.event_type,
                "message": None if self.message is None else self.message.to_dict()}


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
        return {"type": self.event_type, "kind": self.kind, "delta": self.delta,
                "content_index": self.content_index, "tool_call_id": self.tool_call_id,
                "tool_name": self.tool_name}


@attrs.define(frozen=True)
class MessageEndEvent(AgentEvent):
    """A message is complete and added to the history."""

    message: AgentMessage
    event_type: ClassVar[str] = "message_end"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"type", "message"}``, the message as ``to_dict()``."""
        return {"type": self.event_type, "message": self.message.to_dict()}

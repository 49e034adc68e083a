"""Events sent to an agent's event sink: the spec's three tool events and the run events.

Order within a run (also in the README): ``AgentStartEvent``; ``MessageStartEvent`` and
``MessageEndEvent`` for the user message (and each message that joins the run); then per turn
``TurnStartEvent``, ``MessageStartEvent``, ``MessageUpdateEvent``* (only when the LLM client
streams), ``MessageEndEvent`` for the reply, for each tool call ``ToolExecStartEvent``,
``ToolExecUpdateEvent``*, ``ToolExecEndEvent``, then ``MessageStartEvent``/``MessageEndEvent``
for each tool result, and ``TurnEndEvent``; finally ``AgentEndEvent``. Every start has its end,
on error and abort paths too.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

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
]


@attrs.define(frozen=True)
class AgentEvent:
    """Base class of every event; ``event_type`` is a stable snake_case name for logs."""

    event_type: ClassVar[str] = "event"


@attrs.define(frozen=True)
class ToolExecStartEvent(AgentEvent):
    """A tool call is about to be prepared (spec ``toolExecStartEvent``)."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    event_type: ClassVar[str] = "tool_execution_start"


@attrs.define(frozen=True)
class ToolExecUpdateEvent(AgentEvent):
    """A running tool reported a partial result (spec ``toolExecUpdateEvent``)."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    partial_result: Any
    event_type: ClassVar[str] = "tool_execution_update"


@attrs.define(frozen=True)
class ToolExecEndEvent(AgentEvent):
    """A tool call finished, successfully or not (spec ``toolExecEndEvent``)."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool = False
    event_type: ClassVar[str] = "tool_execution_end"


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


@attrs.define(frozen=True)
class TurnStartEvent(AgentEvent):
    """A turn (one LLM call and its tool calls) started; ``turn`` counts from 1 within the run."""

    turn: int = 1
    event_type: ClassVar[str] = "turn_start"


@attrs.define(frozen=True)
class TurnEndEvent(AgentEvent):
    """A turn ended with the assistant ``message`` and the ``tool_results`` of its calls."""

    message: AssistantMessage
    tool_results: list[ToolResultMessage] = attrs.field(factory=list)
    event_type: ClassVar[str] = "turn_end"


@attrs.define(frozen=True)
class MessageStartEvent(AgentEvent):
    """A message enters the conversation (user messages, the assistant reply, tool results)."""

    message: AgentMessage | None = None
    event_type: ClassVar[str] = "message_start"


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


@attrs.define(frozen=True)
class MessageEndEvent(AgentEvent):
    """A message is complete and added to the history."""

    message: AgentMessage
    event_type: ClassVar[str] = "message_end"

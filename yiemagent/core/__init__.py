"""The core: content, messages, events, tools, the argument checks, the per-call tool pipeline
(prepare -> execute -> finalize) and the run loop, with the default request format.

It imports nothing of the rest of the package but ``yiemagent.errors``: no agent, no provider,
no thread of its own. ``yiemagent.agent`` wraps it in a stateful shell; providers in
``yiemagent.llm`` read the ``LlmRequest`` it builds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_content": (
            "AgentToolCall",
            "ContentBlock",
            "ImageContent",
            "MessageContent",
            "TextContent",
            "ThinkingContent",
        ),
        "_messages": (
            "AgentMessage",
            "AssistantMessage",
            "HistorySnapshot",
            "HistoryView",
            "LlmModel",
            "LlmUsage",
            "ToolResultMessage",
            "UserMessage",
        ),
        "_approval": ("Approve", "Deny", "Edit", "PausedBatch", "PausedCall", "PendingApproval"),
        "_events": (
            "AgentEndEvent",
            "ApprovalRequestedEvent",
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
        ),
        "_tools": (
            "AbortSignal",
            "AfterToolCallContext",
            "AfterToolCallResult",
            "AgentContext",
            "AgentLoopConfig",
            "AgentState",
            "AgentTool",
            "AgentToolCallBatch",
            "AgentToolResult",
            "BeforeToolCallContext",
            "BeforeToolCallResult",
            "ExecutedOutcome",
            "FinalizedOutcome",
            "ImmediateOutcome",
            "PreparedToolCall",
        ),
        "_error_kinds": ("ERROR_KINDS", "ERROR_KIND_KEY", "error_kind"),
        "_arguments": ("prepare_tool_call_arguments", "validate_required_args", "validate_tool_arguments"),
        "_tool_calls": ("extract_tool_calls",),
        "_pipeline": (
            "BatchEntry",
            "PreparedBatch",
            "UnannouncedOutcome",
            "create_error_tool_result",
            "create_tool_result_message",
            "emit_tool_execution_end",
            "execute_prepared_tool_call",
            "execute_tool_calls",
            "execute_tool_calls_parallel",
            "execute_tool_calls_sequential",
            "finalize_executed_tool_call",
            "prepare_batch",
            "prepare_tool_call",
            "run_prepared",
            "should_terminate",
        ),
        "_loop": ("RunConfig", "run_loop"),
        "_usage": ("Prices", "RunUsage", "UsageLimits"),
        "_context": ("LlmRequest", "format_msg_for_llm", "prepare_context"),
        "_user_input": ("openai_to_user_message",),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.core._approval import Approve as Approve
    from yiemagent.core._approval import Deny as Deny
    from yiemagent.core._approval import Edit as Edit
    from yiemagent.core._approval import PausedBatch as PausedBatch
    from yiemagent.core._approval import PausedCall as PausedCall
    from yiemagent.core._approval import PendingApproval as PendingApproval
    from yiemagent.core._arguments import prepare_tool_call_arguments as prepare_tool_call_arguments
    from yiemagent.core._arguments import validate_required_args as validate_required_args
    from yiemagent.core._arguments import validate_tool_arguments as validate_tool_arguments
    from yiemagent.core._content import AgentToolCall as AgentToolCall
    from yiemagent.core._content import ContentBlock as ContentBlock
    from yiemagent.core._content import ImageContent as ImageContent
    from yiemagent.core._content import MessageContent as MessageContent
    from yiemagent.core._content import TextContent as TextContent
    from yiemagent.core._content import ThinkingContent as ThinkingContent
    from yiemagent.core._context import LlmRequest as LlmRequest
    from yiemagent.core._context import format_msg_for_llm as format_msg_for_llm
    from yiemagent.core._context import prepare_context as prepare_context
    from yiemagent.core._error_kinds import ERROR_KIND_KEY as ERROR_KIND_KEY
    from yiemagent.core._error_kinds import ERROR_KINDS as ERROR_KINDS
    from yiemagent.core._error_kinds import error_kind as error_kind
    from yiemagent.core._events import AgentEndEvent as AgentEndEvent
    from yiemagent.core._events import AgentEvent as AgentEvent
    from yiemagent.core._events import AgentStartEvent as AgentStartEvent
    from yiemagent.core._events import ApprovalRequestedEvent as ApprovalRequestedEvent
    from yiemagent.core._events import MessageEndEvent as MessageEndEvent
    from yiemagent.core._events import MessageStartEvent as MessageStartEvent
    from yiemagent.core._events import MessageUpdateEvent as MessageUpdateEvent
    from yiemagent.core._events import ToolExecEndEvent as ToolExecEndEvent
    from yiemagent.core._events import ToolExecStartEvent as ToolExecStartEvent
    from yiemagent.core._events import ToolExecUpdateEvent as ToolExecUpdateEvent
    from yiemagent.core._events import TurnEndEvent as TurnEndEvent
    from yiemagent.core._events import TurnStartEvent as TurnStartEvent
    from yiemagent.core._loop import RunConfig as RunConfig
    from yiemagent.core._loop import run_loop as run_loop
    from yiemagent.core._messages import AgentMessage as AgentMessage
    from yiemagent.core._messages import AssistantMessage as AssistantMessage
    from yiemagent.core._messages import HistorySnapshot as HistorySnapshot
    from yiemagent.core._messages import HistoryView as HistoryView
    from yiemagent.core._messages import LlmModel as LlmModel
    from yiemagent.core._messages import LlmUsage as LlmUsage
    from yiemagent.core._messages import ToolResultMessage as ToolResultMessage
    from yiemagent.core._messages import UserMessage as UserMessage
    from yiemagent.core._pipeline import BatchEntry as BatchEntry
    from yiemagent.core._pipeline import PreparedBatch as PreparedBatch
    from yiemagent.core._pipeline import UnannouncedOutcome as UnannouncedOutcome
    from yiemagent.core._pipeline import create_error_tool_result as create_error_tool_result
    from yiemagent.core._pipeline import create_tool_result_message as create_tool_result_message
    from yiemagent.core._pipeline import emit_tool_execution_end as emit_tool_execution_end
    from yiemagent.core._pipeline import execute_prepared_tool_call as execute_prepared_tool_call
    from yiemagent.core._pipeline import execute_tool_calls as execute_tool_calls
    from yiemagent.core._pipeline import execute_tool_calls_parallel as execute_tool_calls_parallel
    from yiemagent.core._pipeline import execute_tool_calls_sequential as execute_tool_calls_sequential
    from yiemagent.core._pipeline import finalize_executed_tool_call as finalize_executed_tool_call
    from yiemagent.core._pipeline import prepare_batch as prepare_batch
    from yiemagent.core._pipeline import prepare_tool_call as prepare_tool_call
    from yiemagent.core._pipeline import run_prepared as run_prepared
    from yiemagent.core._pipeline import should_terminate as should_terminate
    from yiemagent.core._tool_calls import extract_tool_calls as extract_tool_calls
    from yiemagent.core._tools import AbortSignal as AbortSignal
    from yiemagent.core._tools import AfterToolCallContext as AfterToolCallContext
    from yiemagent.core._tools import AfterToolCallResult as AfterToolCallResult
    from yiemagent.core._tools import AgentContext as AgentContext
    from yiemagent.core._tools import AgentLoopConfig as AgentLoopConfig
    from yiemagent.core._tools import AgentState as AgentState
    from yiemagent.core._tools import AgentTool as AgentTool
    from yiemagent.core._tools import AgentToolCallBatch as AgentToolCallBatch
    from yiemagent.core._tools import AgentToolResult as AgentToolResult
    from yiemagent.core._tools import BeforeToolCallContext as BeforeToolCallContext
    from yiemagent.core._tools import BeforeToolCallResult as BeforeToolCallResult
    from yiemagent.core._tools import ExecutedOutcome as ExecutedOutcome
    from yiemagent.core._tools import FinalizedOutcome as FinalizedOutcome
    from yiemagent.core._tools import ImmediateOutcome as ImmediateOutcome
    from yiemagent.core._tools import PreparedToolCall as PreparedToolCall
    from yiemagent.core._usage import Prices as Prices
    from yiemagent.core._usage import RunUsage as RunUsage
    from yiemagent.core._usage import UsageLimits as UsageLimits
    from yiemagent.core._user_input import openai_to_user_message as openai_to_user_message

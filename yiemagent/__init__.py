"""yiemagent: a readable, testable, thread-based agent loop for LLMs that call tools.

A Python port of the YiemAgent design: tools with JSON-Schema inputs, per-agent tool stores, a
worker thread fed by channels, and a prepare -> execute -> finalize pipeline for every tool call.
Every name of the design's one-to-one table is importable from here, with what the README's
tour uses; everything else is imported from its layer (``yiemagent.core``, ``.agent``,
``.tools``, ``.llm``, ``.integrations``, ``.testing``, ``.cli``). Nothing is imported until it is
first used, so ``import yiemagent`` loads no provider, no ``requests`` and no ``jsonschema``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "yiemagent.core._content": (
            "AgentToolCall",
            "ImageContent",
            "MessageContent",
            "TextContent",
            "ThinkingContent",
        ),
        "yiemagent.core._messages": (
            "AgentMessage",
            "AssistantMessage",
            "LlmModel",
            "LlmUsage",
            "ToolResultMessage",
            "UserMessage",
        ),
        "yiemagent.core._events": (
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
        "yiemagent.core._tools": (
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
        "yiemagent.core._error_kinds": ("ERROR_KINDS", "error_kind"),
        "yiemagent.core._approval": ("Approve", "Deny", "Edit", "PendingApproval"),
        "yiemagent.core._arguments": (
            "prepare_tool_call_arguments",
            "validate_required_args",
            "validate_tool_arguments",
        ),
        "yiemagent.core._tool_calls": ("extract_tool_calls",),
        "yiemagent.core._pipeline": (
            "create_error_tool_result",
            "create_tool_result_message",
            "emit_tool_execution_end",
            "execute_prepared_tool_call",
            "execute_tool_calls",
            "execute_tool_calls_parallel",
            "execute_tool_calls_sequential",
            "finalize_executed_tool_call",
            "prepare_tool_call",
            "should_terminate",
        ),
        "yiemagent.core._loop": ("RunConfig", "run_loop"),
        "yiemagent.core._usage": ("Prices", "RunUsage", "UsageLimits"),
        "yiemagent.integrations._price_catalog": ("PriceCatalog",),
        "yiemagent.core._context": ("LlmRequest", "format_msg_for_llm", "prepare_context"),
        "yiemagent.core._user_input": ("openai_to_user_message",),
        "yiemagent.agent._agent": ("YiemAgent", "follow_up", "resume", "run_agent", "take_response"),
        "yiemagent.agent._options": ("ContextOptions", "OutputOptions", "QueueOptions", "ToolOptions"),
        "yiemagent.tools._store": (
            "ToolStore",
            "clear_tools",
            "get_tools",
            "list_tool",
            "load_tools",
            "register_tool",
        ),
        "yiemagent.tools._function_tool": ("function_tool",),
        "yiemagent.tools.mcp._connection": ("load_mcp_tools",),
        "yiemagent.llm._factory": ("create_llm_call",),
        "yiemagent.errors": ("OutputRejected", "YiemAgentError"),
    },
    optional=("load_mcp_tools",),
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.agent._agent import YiemAgent as YiemAgent
    from yiemagent.agent._agent import follow_up as follow_up
    from yiemagent.agent._agent import resume as resume
    from yiemagent.agent._agent import run_agent as run_agent
    from yiemagent.agent._agent import take_response as take_response
    from yiemagent.agent._options import ContextOptions as ContextOptions
    from yiemagent.agent._options import OutputOptions as OutputOptions
    from yiemagent.agent._options import QueueOptions as QueueOptions
    from yiemagent.agent._options import ToolOptions as ToolOptions
    from yiemagent.core._approval import Approve as Approve
    from yiemagent.core._approval import Deny as Deny
    from yiemagent.core._approval import Edit as Edit
    from yiemagent.core._approval import PendingApproval as PendingApproval
    from yiemagent.core._arguments import prepare_tool_call_arguments as prepare_tool_call_arguments
    from yiemagent.core._arguments import validate_required_args as validate_required_args
    from yiemagent.core._arguments import validate_tool_arguments as validate_tool_arguments
    from yiemagent.core._content import AgentToolCall as AgentToolCall
    from yiemagent.core._content import ImageContent as ImageContent
    from yiemagent.core._content import MessageContent as MessageContent
    from yiemagent.core._content import TextContent as TextContent
    from yiemagent.core._content import ThinkingContent as ThinkingContent
    from yiemagent.core._context import LlmRequest as LlmRequest
    from yiemagent.core._context import format_msg_for_llm as format_msg_for_llm
    from yiemagent.core._context import prepare_context as prepare_context
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
    from yiemagent.core._messages import LlmModel as LlmModel
    from yiemagent.core._messages import LlmUsage as LlmUsage
    from yiemagent.core._messages import ToolResultMessage as ToolResultMessage
    from yiemagent.core._messages import UserMessage as UserMessage
    from yiemagent.core._pipeline import create_error_tool_result as create_error_tool_result
    from yiemagent.core._pipeline import create_tool_result_message as create_tool_result_message
    from yiemagent.core._pipeline import emit_tool_execution_end as emit_tool_execution_end
    from yiemagent.core._pipeline import execute_prepared_tool_call as execute_prepared_tool_call
    from yiemagent.core._pipeline import execute_tool_calls as execute_tool_calls
    from yiemagent.core._pipeline import execute_tool_calls_parallel as execute_tool_calls_parallel
    from yiemagent.core._pipeline import execute_tool_calls_sequential as execute_tool_calls_sequential
    from yiemagent.core._pipeline import finalize_executed_tool_call as finalize_executed_tool_call
    from yiemagent.core._pipeline import prepare_tool_call as prepare_tool_call
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
    from yiemagent.errors import OutputRejected as OutputRejected
    from yiemagent.errors import YiemAgentError as YiemAgentError
    from yiemagent.integrations._price_catalog import PriceCatalog as PriceCatalog
    from yiemagent.llm._factory import create_llm_call as create_llm_call
    from yiemagent.tools._function_tool import function_tool as function_tool
    from yiemagent.tools._store import ToolStore as ToolStore
    from yiemagent.tools._store import clear_tools as clear_tools
    from yiemagent.tools._store import get_tools as get_tools
    from yiemagent.tools._store import list_tool as list_tool
    from yiemagent.tools._store import load_tools as load_tools
    from yiemagent.tools._store import register_tool as register_tool
    from yiemagent.tools.mcp._connection import load_mcp_tools as load_mcp_tools

__version__ = "0.1.0"

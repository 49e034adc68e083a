"""yiemagent: a readable, testable, thread-based agent loop for LLMs that call tools.

A Python port of the YiemAgent design: tools with JSON-Schema inputs, per-agent tool stores, a
worker thread fed by channels, and a prepare -> execute -> finalize pipeline for every tool call.
Every public name of DESIGN.md is importable from here. ``load_mcp_tools`` and ``McpConnection``
(the ``mcp`` extra) are imported on first use, so ``import yiemagent`` never imports the MCP SDK.
"""

from typing import TYPE_CHECKING, Any

from yiemagent.agent import YiemAgent, follow_up, resume, run_agent, take_response
from yiemagent.agent_core import (
    create_error_tool_result,
    create_tool_result_message,
    emit_tool_execution_end,
    execute_prepared_tool_call,
    execute_tool_calls,
    execute_tool_calls_parallel,
    execute_tool_calls_sequential,
    finalize_executed_tool_call,
    prepare_tool_call,
    should_terminate,
)
from yiemagent.content import (
    AgentToolCall,
    ImageContent,
    MessageContent,
    TextContent,
    ThinkingContent,
)
from yiemagent.error_kinds import ERROR_KINDS, error_kind
from yiemagent.errors import (
    AgentClosedError,
    McpToolError,
    ResponseTimeout,
    RunError,
    SessionError,
    ToolArgumentError,
    ToolLoadError,
)
from yiemagent.events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from yiemagent.function_tool import function_tool, to_tool_result
from yiemagent.llm import (
    AnthropicMessagesClient,
    LlamaCppClient,
    LlmAbortedError,
    LlmClient,
    LlmError,
    LlmStreamError,
    LlmTimeoutError,
    OpenAIChatClient,
    RetryPolicy,
    create_llm_call,
)
from yiemagent.messages import (
    AgentMessage,
    AssistantMessage,
    LlmModel,
    LlmUsage,
    ToolResultMessage,
    UserMessage,
)
from yiemagent.run import RunConfig, run_loop
from yiemagent.session import SessionData, load_session, save_session
from yiemagent.tool_calls import extract_tool_calls
from yiemagent.tool_registry import (
    ToolStore,
    clear_tools,
    get_tools,
    list_tool,
    load_tools,
    register_tool,
    unregister_tool,
)
from yiemagent.tool_types import (
    AbortSignal,
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentState,
    AgentTool,
    AgentToolCallBatch,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ExecutedOutcome,
    FinalizedOutcome,
    ImmediateOutcome,
    PreparedToolCall,
)
from yiemagent.utils import (
    LlmRequest,
    format_msg_for_llm,
    openai_to_user_message,
    prepare_context,
)
from yiemagent.validation import (
    prepare_tool_call_arguments,
    validate_required_args,
    validate_tool_arguments,
)

if TYPE_CHECKING:  # for type checkers only; left out of ``__all__`` so ``import *`` needs no SDK
    from yiemagent.mcp_tools import McpConnection as McpConnection
    from yiemagent.mcp_tools import load_mcp_tools as load_mcp_tools

__version__ = "0.1.0"

_LAZY = {"McpConnection", "load_mcp_tools"}  # they import the optional MCP SDK


def __getattr__(name: str) -> Any:
    """Import ``load_mcp_tools`` and ``McpConnection`` when first asked for."""
    if name in _LAZY:
        from yiemagent import mcp_tools

        return getattr(mcp_tools, name)
    raise AttributeError(f"module 'yiemagent' has no attribute {name!r}")

__all__ = [
    "ERROR_KINDS",
    "AbortSignal",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentClosedError",
    "AgentContext",
    "AgentEndEvent",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentMessage",
    "AgentStartEvent",
    "AgentState",
    "AgentTool",
    "AgentToolCall",
    "AgentToolCallBatch",
    "AgentToolResult",
    "AnthropicMessagesClient",
    "AssistantMessage",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "ExecutedOutcome",
    "FinalizedOutcome",
    "ImageContent",
    "ImmediateOutcome",
    "LlamaCppClient",
    "LlmAbortedError",
    "LlmClient",
    "LlmError",
    "LlmModel",
    "LlmRequest",
    "LlmStreamError",
    "LlmTimeoutError",
    "LlmUsage",
    "McpToolError",
    "MessageContent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "OpenAIChatClient",
    "PreparedToolCall",
    "ResponseTimeout",
    "RetryPolicy",
    "RunConfig",
    "RunError",
    "SessionData",
    "SessionError",
    "TextContent",
    "ThinkingContent",
    "ToolArgumentError",
    "ToolExecEndEvent",
    "ToolExecStartEvent",
    "ToolExecUpdateEvent",
    "ToolLoadError",
    "ToolResultMessage",
    "ToolStore",
    "TurnEndEvent",
    "TurnStartEvent",
    "UserMessage",
    "YiemAgent",
    "clear_tools",
    "create_error_tool_result",
    "create_llm_call",
    "create_tool_result_message",
    "emit_tool_execution_end",
    "error_kind",
    "execute_prepared_tool_call",
    "execute_tool_calls",
    "execute_tool_calls_parallel",
    "execute_tool_calls_sequential",
    "extract_tool_calls",
    "finalize_executed_tool_call",
    "follow_up",
    "format_msg_for_llm",
    "function_tool",
    "get_tools",
    "list_tool",
    "load_session",
    "load_tools",
    "openai_to_user_message",
    "prepare_context",
    "prepare_tool_call",
    "prepare_tool_call_arguments",
    "register_tool",
    "resume",
    "run_agent",
    "run_loop",
    "save_session",
    "should_terminate",
    "take_response",
    "to_tool_result",
    "unregister_tool",
    "validate_required_args",
    "validate_tool_arguments",
]

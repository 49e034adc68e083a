"""yiemagent: a readable, testable, thread-based agent loop for LLMs that call tools.

A Python port of the YiemAgent design: tools with JSON-Schema inputs, per-agent tool stores, a
worker thread fed by channels, and a prepare -> execute -> finalize pipeline for every tool call.
Every public name of DESIGN.md is importable from here.
"""

from yiemagent.agent import AgentClosedError, YiemAgent, follow_up, run_agent, take_response
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
from yiemagent.function_tool import function_tool
from yiemagent.llm import AnthropicMessagesClient, LlmError, OpenAIChatClient, create_llm_call
from yiemagent.messages import (
    AgentMessage,
    AssistantMessage,
    LlmModel,
    LlmUsage,
    ToolResultMessage,
    UserMessage,
)
from yiemagent.session import SessionError
from yiemagent.tool_calls import extract_tool_calls
from yiemagent.tool_registry import (
    ToolLoadError,
    ToolStore,
    clear_tools,
    get_tools,
    list_tool,
    load_tools,
    register_tool,
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
    ToolArgumentError,
    prepare_tool_call_arguments,
    validate_required_args,
    validate_tool_arguments,
)

__version__ = "0.1.0"

__all__ = [
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
    "LlmError",
    "LlmModel",
    "LlmRequest",
    "LlmUsage",
    "MessageContent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "OpenAIChatClient",
    "PreparedToolCall",
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
    "load_tools",
    "openai_to_user_message",
    "prepare_context",
    "prepare_tool_call",
    "prepare_tool_call_arguments",
    "register_tool",
    "run_agent",
    "should_terminate",
    "take_response",
    "validate_required_args",
    "validate_tool_arguments",
]

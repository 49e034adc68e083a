"""The public surface, pinned: the root exports the design's one-to-one names and what the
README's tour uses, nothing more, so a name cannot be added or lost by accident; every layer's
names resolve; every exception derives from ``YiemAgentError``; ``import yiemagent`` is cheap."""

from __future__ import annotations

import importlib
import inspect
import itertools
import subprocess
import sys

import attrs
import pytest

import yiemagent
import yiemagent.errors

ROOT = [
    # the design's table: content, messages, tools and the pipeline's types
    "AbortSignal",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentContext",
    "AgentLoopConfig",
    "AgentMessage",
    "AgentState",
    "AgentTool",
    "AgentToolCall",
    "AgentToolCallBatch",
    "AgentToolResult",
    "AssistantMessage",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "ExecutedOutcome",
    "FinalizedOutcome",
    "ImageContent",
    "ImmediateOutcome",
    "LlmModel",
    "LlmUsage",
    "MessageContent",
    "PreparedToolCall",
    "TextContent",
    "ThinkingContent",
    "ToolExecEndEvent",
    "ToolExecStartEvent",
    "ToolExecUpdateEvent",
    "ToolResultMessage",
    "ToolStore",
    "UserMessage",
    "YiemAgent",
    # the design's functions
    "clear_tools",
    "create_error_tool_result",
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
    # the run events beside the spec's three, resume, the request, the loop on its own
    "AgentEndEvent",
    "AgentEvent",
    "AgentStartEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
    "resume",
    "LlmRequest",
    "RunConfig",
    "run_loop",
    # approval before a tool runs
    "Approve",
    "ApprovalRequestedEvent",
    "Deny",
    "Edit",
    "PendingApproval",
    # structured output: a validate_output hook refuses an output with it
    "OutputRejected",
    # budgets: the usage of a run and of an agent, its limits, prices (and the prices extra's table)
    "PriceCatalog",
    "Prices",
    "RunUsage",
    "UsageLimits",
    # the agent's grouped settings
    "ContextOptions",
    "OutputOptions",
    "QueueOptions",
    "ToolOptions",
    # the tour: error kinds, the exception root, a model from one string, a decorated tool
    "ERROR_KINDS",
    "error_kind",
    "YiemAgentError",
    "create_llm_call",
    "function_tool",
]


def test_the_root_exports_exactly_the_pinned_names() -> None:
    assert sorted(yiemagent.__all__) == sorted(ROOT)
    assert len(set(ROOT)) == len(ROOT)


@pytest.mark.parametrize("name", ROOT)
def test_every_root_name_resolves(name: str) -> None:
    assert getattr(yiemagent, name) is not None


@pytest.mark.needs("mcp")
def test_mcp_is_importable_from_the_root_without_import_star_loading_it() -> None:
    assert "load_mcp_tools" not in yiemagent.__all__
    assert callable(yiemagent.load_mcp_tools)


@pytest.mark.parametrize(
    "package",
    [
        "yiemagent.core",
        "yiemagent.output",
        "yiemagent.agent",
        "yiemagent.tools",
        "yiemagent.tools.mcp",
        "yiemagent.llm",
        "yiemagent.llm.http",
        "yiemagent.llm.openai",
        "yiemagent.llm.anthropic",
        "yiemagent.llm.llamacpp",
        "yiemagent.integrations",
        "yiemagent.testing",
        "yiemagent.cli",
    ],
)
def test_every_layers_names_resolve(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018


def test_every_exception_derives_from_the_one_root() -> None:
    classes = [
        v for v in vars(yiemagent.errors).values() if inspect.isclass(v) and issubclass(v, BaseException)
    ]
    assert len(classes) > 15
    assert all(issubclass(c, yiemagent.YiemAgentError) for c in classes), [
        c.__name__ for c in classes if not issubclass(c, yiemagent.YiemAgentError)
    ]
    # The built-in bases callers catch are kept.
    assert issubclass(yiemagent.errors.SessionError, ValueError)
    assert issubclass(yiemagent.errors.ResponseTimeout, TimeoutError)
    assert issubclass(yiemagent.errors.AgentClosedError, RuntimeError)


def test_import_yiemagent_loads_no_provider_and_no_heavy_dependency() -> None:
    code = (
        "import sys, yiemagent\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('requests', 'tenacity', 'jsonschema', 'ray', 'mcp', 'xllamacpp', 'opentelemetry')"
        " or m.startswith(('yiemagent.llm', 'yiemagent.agent', 'yiemagent.core._'))]\n"
        "print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


# Issue 20: option objects instead of keyword walls. The settings the LLM clients share live in
# HttpOptions, those the MCP entry points share in McpOptions; a signature keeps its own subject
# (model, base_url, api_key; store, server) as positional parameters and a few keywords.
WALLS = {
    "yiemagent.llm": ["LlmClient", "OpenAIChatClient", "AnthropicMessagesClient", "create_llm_call"],
    "yiemagent.tools.mcp": ["load_mcp_tools", "McpConnection"],
}
OPTIONS = {"yiemagent.llm": "HttpOptions", "yiemagent.tools.mcp": "McpOptions"}
MAX_SHARED_KEYWORDS = 5
MAX_POSITIONAL = 3


def _signatures() -> dict[str, inspect.Signature]:
    found: dict[str, inspect.Signature] = {}
    for package, names in WALLS.items():
        module = importlib.import_module(package)
        for name in names:
            found[name] = inspect.signature(getattr(module, name))
    return found


def _keywords(signature: inspect.Signature) -> set[str]:
    return {p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY}


@pytest.mark.needs("mcp")
def test_no_list_of_more_than_five_keywords_is_repeated_across_signatures() -> None:
    signatures = _signatures()
    walls = []
    for first, second in itertools.combinations(sorted(signatures), 2):
        shared = _keywords(signatures[first]) & _keywords(signatures[second])
        if len(shared) > MAX_SHARED_KEYWORDS:
            walls.append(f"{first} and {second} share {len(shared)}: {sorted(shared)}")
    assert walls == []


@pytest.mark.needs("mcp")
def test_no_wall_hides_in_positional_parameters() -> None:
    for name, signature in _signatures().items():
        positional = [
            p.name
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        assert len(positional) <= MAX_POSITIONAL, f"{name}: {positional}"


@pytest.mark.needs("mcp")
def test_an_option_objects_fields_are_set_only_through_it() -> None:
    signatures = _signatures()
    for package, names in WALLS.items():
        options = getattr(importlib.import_module(package), OPTIONS[package])
        fields = {field.name for field in attrs.fields(options)}
        for name in names:
            assert set(signatures[name].parameters) & fields == set(), name

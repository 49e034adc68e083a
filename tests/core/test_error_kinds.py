"""Every error result the pipeline makes carries a stable kind in ``details["error_kind"]``; the
texts may change, the kinds may not (other implementations of the design are compared on them)."""

from __future__ import annotations

from typing import Any

import pytest

from yiemagent import (
    ERROR_KINDS,
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    TextContent,
    create_error_tool_result,
    error_kind,
    execute_tool_calls,
)
from yiemagent.core._repeated_calls import RepeatedCalls
from yiemagent.core._tool_calls import normalize_tool_calls

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def ok(*_: Any) -> AgentToolResult:
    return AgentToolResult([TextContent("ok")])


def boom(*_: Any) -> AgentToolResult:
    raise RuntimeError("boom")


def kind_of(
    call: AgentToolCall, tool: AgentTool, signal: AbortSignal | None = None, **config: Any
) -> str | None:
    reply = normalize_tool_calls(AssistantMessage([call]))
    batch = execute_tool_calls(
        AgentContext(tools=[tool]),
        reply,
        list(reply.content),
        AgentLoopConfig([tool], **config),
        signal,
        None,
    )
    (msg,) = batch.messages
    assert msg.is_error == (error_kind(msg.details) is not None)
    return error_kind(msg.details)


def tool(execute: Any = ok, **kw: Any) -> AgentTool:
    return AgentTool("t", "T", "a tool", SCHEMA, execute, **kw)


def _made_once() -> RepeatedCalls:
    """A run's counts in which ``t`` was already called once with ``{"n": 1}``, of one allowed."""
    counts = RepeatedCalls(1)
    counts.record("t", {"n": 1}, "an earlier batch")
    return counts


CASES: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    "tool_not_found": (AgentToolCall("c", "nope", {"n": 1}), tool(), {}),
    "invalid_json": (AgentToolCall("c", "t", "{not json"), tool(), {}),
    "invalid_arguments": (AgentToolCall("c", "t", "[1, 2]"), tool(), {}),
    "prepare_failed": (AgentToolCall("c", "t", {"n": 1}), tool(prepare_arguments=lambda a: [a]), {}),
    "schema_violation": (AgentToolCall("c", "t", {"n": "one"}), tool(), {}),
    "blocked": (
        AgentToolCall("c", "t", {"n": 1}),
        tool(),
        {"before_tool_call": lambda *_: {"block": True, "reason": "no"}},
    ),
    "hook_failed": (AgentToolCall("c", "t", {"n": 1}), tool(), {"after_tool_call": lambda *_: 1 / 0}),
    "tool_raised": (AgentToolCall("c", "t", {"n": 1}), tool(boom), {}),
    "invalid_result": (AgentToolCall("c", "t", {"n": 1}), tool(lambda *_: "text"), {}),
    "repeated_call": (AgentToolCall("c", "t", {"n": 1}), tool(), {"repeated_calls": _made_once()}),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_each_failure_has_its_kind(kind: str) -> None:
    call, the_tool, config = CASES[kind]
    assert kind_of(call, the_tool, **config) == kind


def test_nested_too_deep_is_invalid_arguments_not_invalid_json() -> None:
    deep: Any = []
    for _ in range(80):
        deep = [deep]
    assert kind_of(AgentToolCall("c", "t", {"n": deep}), tool()) == "invalid_arguments"


def test_aborted_and_timeout_kinds() -> None:
    assert kind_of(AgentToolCall("c", "t", {"n": 1}), tool(), AbortSignal(aborted=True)) == "aborted"
    slow = tool(lambda _id, _a, signal, _p: signal.wait(10) and ok())
    assert kind_of(AgentToolCall("c", "t", {"n": 1}), slow, tool_timeout_s=0.05) == "timeout"


def test_successes_and_hook_made_errors_have_no_kind() -> None:
    assert kind_of(AgentToolCall("c", "t", {"n": 1}), tool()) is None
    flip = {"after_tool_call": lambda *_: {"is_error": True}}
    reply = AssistantMessage([AgentToolCall("c", "t", {"n": 1})])
    batch = execute_tool_calls(
        AgentContext(tools=[tool()]),
        reply,
        list(reply.content),
        AgentLoopConfig([tool()], **flip),
        None,
        None,
    )
    assert batch.messages[0].is_error and error_kind(batch.messages[0].details) is None


def test_the_catalogue_and_the_plain_error_result() -> None:
    assert len(set(ERROR_KINDS)) == len(ERROR_KINDS) == 16
    assert create_error_tool_result("x").details == {}
    assert create_error_tool_result("x", "blocked").details == {"error_kind": "blocked"}
    assert error_kind({"error_kind": 3}) is None and error_kind(None) is None

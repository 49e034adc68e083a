"""The pipeline contains whatever a tool or hook throws at it, and stops timed-out tools."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pipeline_helpers import assert_batch_well_formed, call, make_tool, run, text

from yiemagent import (
    AbortSignal,
    AgentLoopConfig,
    AgentToolResult,
    ImmediateOutcome,
    LlmUsage,
    TextContent,
    ToolExecEndEvent,
    create_error_tool_result,
    emit_tool_execution_end,
    execute_tool_calls_parallel,
    execute_tool_calls_sequential,
)
from yiemagent.core._tools import FinalizedOutcome

WAIT = 10.0
RUNNERS = [execute_tool_calls_sequential, execute_tool_calls_parallel]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("exc", [asyncio.CancelledError(), SystemExit(3), GeneratorExit()])
def test_base_exceptions_from_a_tool_become_error_results(runner: Any, exc: BaseException) -> None:
    def execute(*_: Any) -> AgentToolResult:
        raise exc

    tools = [make_tool("bad", execute, parallel=True), make_tool("good", parallel=True)]
    calls = [call("c1", "bad"), call("c2", "good")]
    batch, recorder = run(tools, calls, runner=runner)
    assert_batch_well_formed(calls, batch, recorder.events)
    assert batch.messages[0].is_error and type(exc).__name__ in text(batch.messages[0])
    assert not batch.messages[1].is_error


@pytest.mark.parametrize("hook", ["before_tool_call", "after_tool_call"])
def test_base_exceptions_from_hooks_become_error_results(hook: str) -> None:
    def raising(*_: Any) -> None:
        raise asyncio.CancelledError()

    tools = [make_tool("t")]
    batch, _ = run(tools, [call("c1", "t")], AgentLoopConfig(tools, **{hook: raising}))
    assert batch.messages[0].is_error and "CancelledError" in text(batch.messages[0])


def test_a_keyboard_interrupt_is_not_swallowed() -> None:
    def execute(*_: Any) -> AgentToolResult:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run([make_tool("t", execute)], [call("c1", "t")])


@pytest.mark.parametrize(
    ("added", "expected"), [(3, []), (None, []), ({"x": 1}, []), (["ok", 5], ["ok"]), ("single", ["single"])]
)
def test_unusable_added_tool_names_never_break_the_batch(added: Any, expected: list[str]) -> None:
    tool = make_tool("t", lambda *_: AgentToolResult("done", {"addedToolNames": added}))
    batch, _ = run([tool], [call("c1", "t")])
    assert batch.messages[0].added_tool_names == expected
    assert not batch.messages[0].is_error


def test_details_that_are_not_a_dict_are_an_error_result() -> None:
    tool = make_tool("t", lambda *_: AgentToolResult("done", None))  # type: ignore[arg-type]
    batch, _ = run([tool], [call("c1", "t")])
    assert batch.messages[0].is_error
    assert "details must be a dict" in text(batch.messages[0])


def test_after_hook_usage_dict_is_converted_and_bad_usage_is_an_error() -> None:
    tools = [make_tool("t")]
    batch, _ = run(
        tools,
        [call("c1", "t")],
        AgentLoopConfig(tools, after_tool_call=lambda ctx, sig: {"usage": {"input": 3, "output": 4}}),
    )
    assert batch.messages[0].usage == LlmUsage(input=3, output=4)
    assert batch.messages[0].to_dict()["usage"]["input"] == 3  # serialisable, not a raw dict
    batch, _ = run(
        tools, [call("c1", "t")], AgentLoopConfig(tools, after_tool_call=lambda ctx, sig: {"usage": "lots"})
    )
    assert batch.messages[0].is_error and "usage" in text(batch.messages[0])


def test_a_timed_out_tool_sees_its_signal_aborted() -> None:
    saw_abort = threading.Event()

    def patient(_id: str, _args: Any, signal: AbortSignal, _p: Any) -> AgentToolResult:
        if signal.wait(WAIT):
            saw_abort.set()
        return AgentToolResult("finished")

    batch, _ = run([make_tool("slow", patient, timeout_s=0.05)], [call("c1", "slow")])
    assert "timed out after 0.05 s" in text(batch.messages[0])
    assert saw_abort.wait(WAIT)  # the tool was told, so it can stop instead of running on


def test_an_update_reported_in_reaction_to_the_timeout_is_dropped() -> None:
    # The abort callback runs on the thread that aborts, inside the timeout handling: the
    # update it reports must find the gate already closed.
    def reacts(_id: str, _args: Any, signal: AbortSignal, on_partial: Any) -> AgentToolResult:
        signal.on_abort(lambda: on_partial("too late"))
        signal.wait(WAIT)
        return AgentToolResult("finished")

    batch, recorder = run([make_tool("slow", reacts, timeout_s=0.05)], [call("c1", "slow")])
    assert "timed out" in text(batch.messages[0])
    assert [type(e).__name__ for e in recorder.events] == ["ToolExecStartEvent", "ToolExecEndEvent"]


def test_a_timed_out_tool_follows_the_callers_abort_too() -> None:
    parent = AbortSignal()
    started, saw_abort = threading.Event(), threading.Event()

    def patient(_id: str, _args: Any, signal: AbortSignal, _p: Any) -> AgentToolResult:
        started.set()
        if signal.wait(WAIT):
            saw_abort.set()
        return AgentToolResult(signal.reason or "")

    def abort_when_started() -> None:
        started.wait(WAIT)
        parent.abort("stop now")

    aborter = threading.Thread(target=abort_when_started)
    aborter.start()
    batch, _ = run([make_tool("slow", patient, timeout_s=WAIT)], [call("c1", "slow")], signal=parent)
    aborter.join()
    assert saw_abort.is_set()
    assert text(batch.messages[0]) == "stop now"


def test_emit_tool_execution_end_contains_a_failing_sink_and_builds_nothing_without_one() -> None:
    finalized = FinalizedOutcome(call("c1", "t"), create_error_tool_result("x"), True)
    seen: list[Any] = []

    def sink(event: Any) -> None:
        seen.append(event)
        raise RuntimeError("ui down")

    emit_tool_execution_end(finalized, sink)  # does not raise
    assert isinstance(seen[0], ToolExecEndEvent)
    emit_tool_execution_end(finalized, None)  # nothing to do, nothing raised


def test_an_immediate_outcome_is_an_error_by_default() -> None:
    assert ImmediateOutcome(AgentToolResult([TextContent("no")])).is_error

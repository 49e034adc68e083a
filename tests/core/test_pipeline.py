"""Every branch of the per-call pipeline (spec sections 8-12), mostly in sequential mode."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from pipeline_helpers import (
    WAIT_S,
    WEATHER_SCHEMA,
    Recorder,
    assert_batch_well_formed,
    call,
    echo_execute,
    make_tool,
    ok_execute,
    run,
    text,
)

from yiemagent import (
    AbortSignal,
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ExecutedOutcome,
    FinalizedOutcome,
    ImageContent,
    ImmediateOutcome,
    LlmUsage,
    PreparedToolCall,
    TextContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    create_error_tool_result,
    create_tool_result_message,
    emit_tool_execution_end,
    execute_prepared_tool_call,
    execute_tool_calls_sequential,
    finalize_executed_tool_call,
    prepare_tool_call,
    should_terminate,
)

ABORTED = "was not run: the operation was aborted"


class Counter:
    """Counts how often a tool's execute ran."""

    def __init__(self, reply: str = "ran") -> None:
        self.calls: list[str] = []
        self._reply = reply

    def __call__(self, call_id: str, _args: Any, _signal: Any, _on_partial: Any) -> AgentToolResult:
        self.calls.append(call_id)
        return AgentToolResult([TextContent(self._reply)])


# --- the public pieces ----------------------------------------------------------------------------


def test_create_error_tool_result_is_one_text_block() -> None:
    result = create_error_tool_result("boom")
    assert result == AgentToolResult([TextContent("boom")], {}, None, False)


def test_the_three_phases_one_by_one() -> None:
    tool = make_tool("echo", echo_execute)
    tc = call("c1", "echo", {"x": 1})
    message = AssistantMessage([tc])
    context = AgentContext(tools=[tool])
    config = AgentLoopConfig([tool])
    prep = prepare_tool_call(context, message, tc, config, None)
    assert prep == PreparedToolCall(tool, tc, {"x": 1})
    rec = Recorder()
    executed = execute_prepared_tool_call(prep, None, rec)
    assert executed == ExecutedOutcome(
        AgentToolResult([TextContent("c1:[('x', 1)]")], {"args": {"x": 1}}), False
    )
    finalized = finalize_executed_tool_call(context, message, prep, executed, config, None)
    assert finalized == FinalizedOutcome(tc, executed.result, False)
    emit_tool_execution_end(finalized, rec)
    assert rec.events == [ToolExecEndEvent("c1", "echo", executed.result, False)]
    emit_tool_execution_end(finalized, None)  # no sink: nothing to do, no error
    msg = create_tool_result_message(finalized)
    assert (
        msg.role,
        msg.tool_call_id,
        msg.tool_name,
        msg.content,
        msg.details,
        msg.usage,
        msg.added_tool_names,
        msg.is_error,
    ) == ("toolResult", "c1", "echo", executed.result.content, {"args": {"x": 1}}, None, [], False)


def test_successful_batch_in_sequential_mode_keeps_events_per_call_together() -> None:
    tool = make_tool("echo", echo_execute)
    calls = [call(f"c{i}", "echo", {"i": i}) for i in range(3)]
    batch, rec = run([tool], calls)
    assert_batch_well_formed(calls, batch, rec.events)
    assert [text(m) for m in batch.messages] == [f"c{i}:[('i', {i})]" for i in range(3)]
    assert not any(m.is_error for m in batch.messages)
    assert batch.terminate is False
    kinds = [(type(e).__name__, e.tool_call_id) for e in rec.events]
    assert kinds == [(k, f"c{i}") for i in range(3) for k in ("ToolExecStartEvent", "ToolExecEndEvent")]
    assert rec.events[0] == ToolExecStartEvent("c0", "echo", {"i": 0})


def test_empty_batch() -> None:
    batch, rec = run([make_tool("echo")], [])
    assert batch.messages == [] and batch.terminate is False and rec.events == []


# --- preparation ----------------------------------------------------------------------------------


def test_tool_not_found_names_the_tool_and_the_known_ones() -> None:
    counter = Counter()
    calls = [call("c1", "nope"), call("c2", "real")]
    batch, rec = run([make_tool("real", counter), make_tool("other")], calls)
    assert_batch_well_formed(calls, batch, rec.events)
    missing, found = batch.messages
    assert missing.is_error and text(missing) == 'Tool "nope" not found. Available tools: real, other.'
    assert not found.is_error and counter.calls == ["c2"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ({}, "args: 'city' is a required property"),
        ({"city": 1}, "args.city: 1 is not of type 'string'"),
        ({"city": "x", "units": "kelvin"}, "args.units: 'kelvin' is not one of ['metric', 'imperial']"),
        ({"city": "x", "extra": 1}, "args: Additional properties are not allowed ('extra' was unexpected)"),
    ],
)
def test_schema_violations_become_error_results_and_the_tool_does_not_run(
    args: dict[str, Any], line: str
) -> None:
    counter = Counter()
    calls = [call("c1", "getWeather", args)]
    batch, rec = run([make_tool("getWeather", counter, WEATHER_SCHEMA)], calls)
    assert_batch_well_formed(calls, batch, rec.events)
    result = batch.messages[0]
    assert result.is_error
    assert text(result).startswith('Validation failed for tool "getWeather":\n')
    assert f"  - {line}\n" in text(result)
    assert "Received arguments:" in text(result)
    assert counter.calls == []


def test_custom_validator_in_the_pipeline() -> None:
    counter = Counter()
    tool = make_tool("t", counter, validate_required_args=lambda a: None if a.get("ok") else "need ok")
    calls = [call("c1", "t", {"ok": False}), call("c2", "t", {"ok": True})]
    batch, _ = run([tool], calls)
    assert batch.messages[0].is_error and "  - need ok" in text(batch.messages[0])
    assert not batch.messages[1].is_error
    assert counter.calls == ["c2"]


# --- before_tool_call -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (BeforeToolCallResult(block=True, reason="Not on Sundays."), "Not on Sundays."),
        (BeforeToolCallResult(block=True), "Tool execution was blocked"),
        (BeforeToolCallResult(True, ""), "Tool execution was blocked"),
        ({"block": True, "reason": "Policy says no."}, "Policy says no."),
        ({"block": True}, "Tool execution was blocked"),
    ],
    ids=["object-reason", "object-no-reason", "object-empty-reason", "dict-reason", "dict-no-reason"],
)
def test_before_hook_blocks(decision: Any, expected: str) -> None:
    counter = Counter()
    tool = make_tool("t", counter)
    config = AgentLoopConfig([tool], before_tool_call=lambda ctx, sig: decision)
    calls = [call("c1", "t")]
    batch, rec = run([tool], calls, config)
    assert_batch_well_formed(calls, batch, rec.events)
    assert batch.messages[0].is_error
    assert text(batch.messages[0]) == expected
    assert counter.calls == []


@pytest.mark.parametrize(
    "decision",
    [
        None,
        BeforeToolCallResult(),
        BeforeToolCallResult(block=False, reason="ignored"),
        {"block": False},
        {},
    ],
    ids=["none", "object-default", "object-explicit-allow", "dict-allow", "empty-dict"],
)
def test_before_hook_allows(decision: Any) -> None:
    counter = Counter()
    tool = make_tool("t", counter)
    config = AgentLoopConfig([tool], before_tool_call=lambda ctx, sig: decision)
    batch, _ = run([tool], [call("c1", "t")], config)
    assert not batch.messages[0].is_error
    assert counter.calls == ["c1"]


def test_before_hook_sees_the_message_call_prepared_args_context_and_signal() -> None:
    seen: list[tuple[BeforeToolCallContext, Any]] = []

    def before(ctx: BeforeToolCallContext, sig: Any) -> None:
        seen.append((ctx, sig))

    tool = make_tool("t", prepare_arguments=lambda a: {**a, "added": 1})
    tc = call("c1", "t", {"x": 1})
    message = AssistantMessage([TextContent("hi"), tc])
    context = AgentContext("sys", [], [tool])
    signal = AbortSignal()
    batch = execute_tool_calls_sequential(
        context, message, [tc], AgentLoopConfig([tool], before), signal, None
    )
    assert not batch.messages[0].is_error
    [(ctx, sig)] = seen
    assert ctx.message is message and ctx.assistant_message is message
    assert ctx.tool_call is tc
    assert ctx.args == {"x": 1, "added": 1}
    assert ctx.context is context
    assert sig is signal


def test_before_hook_that_raises_gives_an_error_result() -> None:
    counter = Counter()

    def before(_ctx: Any, _sig: Any) -> None:
        raise RuntimeError("policy service down")

    tool = make_tool("t", counter)
    calls = [call("c1", "t"), call("c2", "unknown")]
    batch, rec = run([tool], calls, AgentLoopConfig([tool], before))
    assert_batch_well_formed(calls, batch, rec.events)
    assert batch.messages[0].is_error
    assert text(batch.messages[0]) == (
        'before_tool_call hook failed for tool "t": RuntimeError: policy service down'
    )
    assert counter.calls == []


@pytest.mark.parametrize("decision", [True, "block", 1, ["block"]])
def test_before_hook_returning_a_wrong_type_gives_an_error_result(decision: Any) -> None:
    counter = Counter()
    tool = make_tool("t", counter)
    batch, _ = run([tool], [call("c1", "t")], AgentLoopConfig([tool], lambda c, s: decision))
    assert batch.messages[0].is_error
    assert f"before_tool_call returned {type(decision).__name__}; expected None" in text(batch.messages[0])
    assert counter.calls == []


def test_abort_during_the_before_hook_is_seen_after_it() -> None:
    counter = Counter()
    signal = AbortSignal()

    def before(_ctx: Any, sig: AbortSignal) -> None:
        sig.abort()

    tool = make_tool("t", counter)
    calls = [call("c1", "t"), call("c2", "t")]
    batch, rec = run([tool], calls, AgentLoopConfig([tool], before), signal)
    assert_batch_well_formed(calls, batch, rec.events)
    assert all(m.is_error and ABORTED in text(m) for m in batch.messages)
    assert counter.calls == []


# --- execution ------------------------------------------------------------------------------------


def test_a_tool_that_raises_gives_an_error_result_and_the_batch_goes_on() -> None:
    def boom(*_a: Any) -> AgentToolResult:
        raise ValueError("disk full")

    calls = [call("c1", "boom"), call("c2", "fine")]
    batch, rec = run([make_tool("boom", boom), make_tool("fine")], calls)
    assert_batch_well_formed(calls, batch, rec.events)
    assert batch.messages[0].is_error
    assert text(batch.messages[0]) == 'Tool "boom" failed: ValueError: disk full'
    assert not batch.messages[1].is_error and text(batch.messages[1]) == "fine"


def test_a_raising_tool_logs_its_traceback_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    def write_report(*_a: Any) -> AgentToolResult:
        raise ValueError("disk full")

    with caplog.at_level(logging.DEBUG, logger="yiemagent.tools"):
        batch, _ = run([make_tool("report", write_report)], [call("c1", "report")])
    assert batch.messages[0].is_error
    [record] = [r for r in caplog.records if r.name == "yiemagent.tools"]
    assert record.levelno == logging.DEBUG
    assert record.getMessage() == 'Tool "report" raised (call c1)'
    assert record.exc_info is not None and record.exc_info[0] is ValueError
    # The traceback reaches the tool's own frame, so its author can see where it failed.
    assert "write_report" in caplog.text and "disk full" in caplog.text


def test_a_tool_that_exits_is_still_contained() -> None:
    def bye(*_a: Any) -> AgentToolResult:
        raise SystemExit(3)

    batch, _ = run([make_tool("bye", bye)], [call("c1", "bye")])
    assert batch.messages[0].is_error and "SystemExit: 3" in text(batch.messages[0])


@pytest.mark.parametrize(
    ("returned", "type_name"),
    [
        (None, "NoneType"),
        ({"content": "x"}, "dict"),
        ("text", "str"),
        ([TextContent("x")], "list"),
    ],
)
def test_a_tool_that_returns_the_wrong_type_gives_an_error_result(returned: Any, type_name: str) -> None:
    calls = [call("c1", "bad")]
    batch, rec = run([make_tool("bad", lambda *a: returned)], calls)
    assert_batch_well_formed(calls, batch, rec.events)
    assert batch.messages[0].is_error
    assert text(batch.messages[0]) == (
        f'Tool "bad" returned {type_name}; its execute function must return an AgentToolResult.'
    )


def test_the_tool_gets_id_validated_args_signal_and_a_callback() -> None:
    seen: list[Any] = []

    def execute(call_id: str, args: dict[str, Any], signal: Any, on_partial: Any) -> AgentToolResult:
        seen.append((call_id, args, signal, callable(on_partial)))
        return AgentToolResult("ok")

    signal = AbortSignal()
    run([make_tool("t", execute)], [call("c7", "t", {"a": [1]})], signal=signal)
    assert seen == [("c7", {"a": [1]}, signal, True)]


def test_a_tool_editing_its_arguments_does_not_change_the_history() -> None:
    def execute(_id: str, args: dict[str, Any], *_rest: Any) -> AgentToolResult:
        args["a"].append("tampered")
        return AgentToolResult("ok")

    tc = call("c1", "t", {"a": [1]})
    run([make_tool("t", execute)], [tc])
    assert tc.arguments == {"a": [1]}


def test_partial_results_become_update_events_between_start_and_end() -> None:
    def execute(_id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        for i in range(3):
            on_partial({"progress": i})
        return AgentToolResult("done")

    calls = [call("c1", "stream", {"q": 1}), call("c2", "stream")]
    batch, rec = run([make_tool("stream", execute)], calls)
    assert_batch_well_formed(calls, batch, rec.events)
    updates = rec.of(ToolExecUpdateEvent, "c1")
    assert updates == [ToolExecUpdateEvent("c1", "stream", {"q": 1}, {"progress": i}) for i in range(3)]
    assert [type(e).__name__ for e in rec.events[:5]] == [
        "ToolExecStartEvent",
        "ToolExecUpdateEvent",
        "ToolExecUpdateEvent",
        "ToolExecUpdateEvent",
        "ToolExecEndEvent",
    ]


def test_partial_results_without_a_sink_are_harmless() -> None:
    def execute(_id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        on_partial("tick")
        return AgentToolResult("done")

    tool = make_tool("s", execute)
    tc = call("c1", "s")
    batch = execute_tool_calls_sequential(
        AgentContext(tools=[tool]), AssistantMessage([tc]), [tc], AgentLoopConfig(), None, None
    )
    assert not batch.messages[0].is_error and text(batch.messages[0]) == "done"


def test_updates_reported_after_execute_returned_are_dropped() -> None:
    go, late_done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def execute(_id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        on_partial("in time")

        def later() -> None:
            try:
                go.wait(WAIT_S)
                on_partial("too late")
            except BaseException as exc:
                errors.append(exc)
            finally:
                late_done.set()

        threading.Thread(target=later, daemon=True).start()
        return AgentToolResult("returned")

    calls = [call("c1", "leaky")]
    batch, rec = run([make_tool("leaky", execute)], calls)
    go.set()
    assert late_done.wait(WAIT_S)
    assert errors == []
    assert_batch_well_formed(calls, batch, rec.events)
    assert [e.partial_result for e in rec.of(ToolExecUpdateEvent)] == ["in time"]
    assert isinstance(rec.events[-1], ToolExecEndEvent)


# --- timeouts -------------------------------------------------------------------------------------


class Blocker:
    """A tool that blocks until released, then reports a late partial result and returns."""

    def __init__(self) -> None:
        self.started, self.release, self.finished = threading.Event(), threading.Event(), threading.Event()

    def __call__(self, _id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        self.started.set()
        on_partial("before the deadline")
        try:
            self.release.wait(WAIT_S)
            on_partial("after the deadline")
            return AgentToolResult("finished late")
        finally:
            self.finished.set()


@pytest.mark.parametrize("where", ["tool", "config", "both"])
def test_a_call_past_its_timeout_gets_an_error_and_its_thread_is_left_running(where: str) -> None:
    blocker = Blocker()
    tool = make_tool("slow", blocker, timeout_s=0.05 if where in ("tool", "both") else None)
    config = AgentLoopConfig([tool], tool_timeout_s=WAIT_S * 10 if where == "both" else 0.05)
    calls = [call("c1", "slow"), call("c2", "fast")]
    fast = make_tool("fast", timeout_s=WAIT_S)  # its own generous limit: never flaky under load
    try:
        batch, rec = run([tool, fast], calls, config)
        assert not blocker.finished.is_set()  # still running: it was not waited for
        assert_batch_well_formed(calls, batch, rec.events)
        assert batch.messages[0].is_error
        assert text(batch.messages[0]) == 'Tool "slow" timed out after 0.05 s.'
        assert not batch.messages[1].is_error and text(batch.messages[1]) == "fast"
        assert blocker.started.wait(WAIT_S)
    finally:
        blocker.release.set()
    assert blocker.finished.wait(WAIT_S)
    # What it reported after the deadline is dropped; whether the early report made it in before
    # the deadline depends on thread scheduling, so it is allowed but not required.
    updates = [e.partial_result for e in rec.of(ToolExecUpdateEvent)]
    assert set(updates) <= {"before the deadline"}
    assert isinstance(rec.events[-1], ToolExecEndEvent)


def test_a_tool_within_its_timeout_runs_normally_with_updates() -> None:
    def execute(_id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        on_partial(1)
        return AgentToolResult("quick", {"k": 1})

    calls = [call("c1", "quick")]
    batch, rec = run([make_tool("quick", execute, timeout_s=WAIT_S)], calls)
    assert_batch_well_formed(calls, batch, rec.events)
    assert not batch.messages[0].is_error and batch.messages[0].details == {"k": 1}
    assert [e.partial_result for e in rec.of(ToolExecUpdateEvent)] == [1]


@pytest.mark.parametrize("timeout_s", [None, WAIT_S])
def test_a_tool_raising_timeout_error_is_a_failure_not_a_timeout(timeout_s: float | None) -> None:
    def execute(*_a: Any) -> AgentToolResult:
        raise TimeoutError("upstream socket timed out")

    batch, _ = run([make_tool("net", execute, timeout_s=timeout_s)], [call("c1", "net")])
    assert batch.messages[0].is_error
    assert text(batch.messages[0]) == 'Tool "net" failed: TimeoutError: upstream socket timed out'


def test_exceptions_cross_the_timeout_thread() -> None:
    def execute(*_a: Any) -> AgentToolResult:
        raise KeyError("k")

    batch, _ = run([make_tool("t", execute, timeout_s=WAIT_S)], [call("c1", "t")])
    assert text(batch.messages[0]) == "Tool \"t\" failed: KeyError: 'k'"


# --- after_tool_call ------------------------------------------------------------------------------

BASE = AgentToolResult([TextContent("secret 1234")], {"raw": True}, LlmUsage(input=1), False)
NEW_USAGE = LlmUsage(input=5, output=6, total_tokens=11)


@pytest.mark.parametrize(
    ("override", "field", "expected"),
    [
        ({"content": [TextContent("masked")]}, "content", [TextContent("masked")]),
        ({"content": "masked"}, "content", [TextContent("masked")]),
        ({"content": [ImageContent("aGk=")]}, "content", [ImageContent("aGk=")]),
        ({"details": {"masked": True}}, "details", {"masked": True}),
        ({"usage": NEW_USAGE}, "usage", NEW_USAGE),
        ({"terminate": True}, "terminate", True),
        ({"is_error": True}, "is_error", True),
    ],
)
@pytest.mark.parametrize("form", ["object", "dict"])
def test_after_hook_overrides_one_field_and_keeps_the_others(
    override: dict[str, Any], field: str, expected: Any, form: str
) -> None:
    returned = AfterToolCallResult(**override) if form == "object" else dict(override)
    tool = make_tool("t", lambda *a: BASE)
    config = AgentLoopConfig([tool], after_tool_call=lambda c, s: returned)
    batch, rec = run([tool], [call("c1", "t")], config)
    msg = batch.messages[0]
    final = {
        "content": msg.content,
        "details": msg.details,
        "usage": msg.usage,
        "terminate": rec.of(ToolExecEndEvent)[0].result.terminate,
        "is_error": msg.is_error,
    }
    base = {
        "content": BASE.content,
        "details": BASE.details,
        "usage": BASE.usage,
        "terminate": BASE.terminate,
        "is_error": False,
    }
    assert final == {**base, field: expected}
    assert batch.terminate is (field == "terminate")


@pytest.mark.parametrize("form", ["object", "dict"])
def test_after_hook_can_turn_a_failure_into_a_success(form: str) -> None:
    def boom(*_a: Any) -> AgentToolResult:
        raise RuntimeError("flaky")

    seen: list[AfterToolCallContext] = []

    def after(ctx: AfterToolCallContext, _sig: Any) -> Any:
        seen.append(ctx)
        fields = {"content": [TextContent("recovered")], "is_error": False}
        return AfterToolCallResult(**fields) if form == "object" else fields

    tool = make_tool("t", boom)
    tc = call("c1", "t", {"a": 1})
    batch, _ = run([tool], [tc], AgentLoopConfig([tool], after_tool_call=after))
    assert not batch.messages[0].is_error and text(batch.messages[0]) == "recovered"
    [ctx] = seen
    assert ctx.is_error is True and "RuntimeError: flaky" in text(ctx.result)
    assert ctx.tool_call is tc and ctx.args == {"a": 1}
    assert isinstance(ctx.message, AssistantMessage) and ctx.assistant_message is ctx.message


@pytest.mark.parametrize(
    "returned",
    [
        None,
        AfterToolCallResult(),
        {},
        {"content": None, "details": None, "usage": None, "terminate": None, "is_error": None},
    ],
    ids=["none", "empty-object", "empty-dict", "dict-of-nones"],
)
def test_after_hook_returning_nothing_to_change_keeps_everything(returned: Any) -> None:
    def failing(*_a: Any) -> AgentToolResult:
        raise RuntimeError("x")

    tools = [make_tool("ok", lambda *a: BASE), make_tool("bad", failing)]
    batch, _ = run(
        tools,
        [call("c1", "ok"), call("c2", "bad")],
        AgentLoopConfig(tools, after_tool_call=lambda c, s: returned),
    )
    ok, bad = batch.messages
    assert (ok.content, ok.details, ok.usage, ok.is_error) == (BASE.content, BASE.details, BASE.usage, False)
    assert bad.is_error and "RuntimeError: x" in text(bad)


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (
            RuntimeError("hook crashed"),
            'after_tool_call hook failed for tool "t": RuntimeError: hook crashed',
        ),
        ("masked", "after_tool_call returned str; expected None"),
        ({"contents": []}, "unknown fields ['contents']"),
    ],
)
def test_after_hook_failures_give_an_error_result(returned: Any, expected: str) -> None:
    def after(_ctx: Any, _sig: Any) -> Any:
        if isinstance(returned, Exception):
            raise returned
        return returned

    tool = make_tool("t", lambda *a: BASE)
    calls = [call("c1", "t")]
    batch, rec = run([tool], calls, AgentLoopConfig([tool], after_tool_call=after))
    assert_batch_well_formed(calls, batch, rec.events)
    assert batch.messages[0].is_error
    assert expected in text(batch.messages[0])
    assert "secret" not in text(batch.messages[0])


def test_after_hook_is_not_run_for_immediate_outcomes() -> None:
    seen: list[str] = []
    tool = make_tool("t")
    batch, _ = run(
        [tool],
        [call("c1", "missing")],
        AgentLoopConfig([tool], after_tool_call=lambda c, s: seen.append(c.tool_call.id)),
    )
    assert batch.messages[0].is_error and seen == []


# --- termination and result messages --------------------------------------------------------------


def _fin(terminate: bool) -> FinalizedOutcome:
    return FinalizedOutcome(call("c", "t"), AgentToolResult([], terminate=terminate), False)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([True, True, True], True),
        ([True], True),
        ([True, False, True], False),
        ([False, False], False),
        ([], False),
    ],
    ids=["all", "one", "some", "none", "empty"],
)
def test_should_terminate(flags: list[bool], expected: bool) -> None:
    assert should_terminate([_fin(f) for f in flags]) is expected
    tools = [make_tool(f"t{i}", ok_execute(terminate=f)) for i, f in enumerate(flags)]
    batch, _ = run(tools, [call(f"c{i}", f"t{i}") for i in range(len(flags))])
    assert batch.terminate is expected


def test_an_error_result_does_not_terminate() -> None:
    tools = [make_tool("stop", ok_execute(terminate=True))]
    batch, _ = run(tools, [call("c1", "stop"), call("c2", "missing")])
    assert batch.terminate is False


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        ({"addedToolNames": ["searchWine", "orderWine"]}, ["searchWine", "orderWine"]),
        ({"addedToolNames": "searchWine"}, ["searchWine"]),
        ({"addedToolNames": []}, []),
        ({"other": 1}, []),
    ],
)
def test_added_tool_names_come_from_details(details: dict[str, Any], expected: list[str]) -> None:
    batch, _ = run(
        [make_tool("writeTool", ok_execute("written", details=details))], [call("c1", "writeTool")]
    )
    assert batch.messages[0].added_tool_names == expected
    assert batch.messages[0].details == details


def test_result_message_carries_usage_and_error_flag() -> None:
    usage = LlmUsage(input=3, output=4, total_tokens=7)
    batch, _ = run([make_tool("t", ok_execute("x", usage=usage))], [call("c1", "t"), call("c2", "zz")])
    assert batch.messages[0].usage == usage and batch.messages[0].is_error is False
    assert batch.messages[1].usage is None and batch.messages[1].is_error is True
    assert all(m.role == "toolResult" for m in batch.messages)


# --- abort ----------------------------------------------------------------------------------------


def test_abort_mid_batch_in_sequential_mode_gives_the_rest_aborted_results() -> None:
    ran: list[str] = []
    signal = AbortSignal()

    def execute(call_id: str, _args: Any, sig: AbortSignal, _p: Any) -> AgentToolResult:
        ran.append(call_id)
        if call_id == "c2":
            sig.abort("user pressed stop")
        return AgentToolResult(f"done {call_id}")

    tool = make_tool("t", execute)
    calls = [call(f"c{i}", "t") for i in range(1, 6)]
    batch, rec = run([tool], calls, signal=signal)
    assert ran == ["c1", "c2"]
    assert_batch_well_formed(calls, batch, rec.events)
    assert [m.is_error for m in batch.messages] == [False, False, True, True, True]
    assert text(batch.messages[1]) == "done c2"
    assert all(text(m) == f'Tool "t" {ABORTED}.' for m in batch.messages[2:])
    assert batch.terminate is False


def test_a_signal_aborted_before_the_batch_runs_nothing() -> None:
    counter = Counter()
    calls = [call("c1", "t"), call("c2", "missing")]
    batch, rec = run([make_tool("t", counter)], calls, signal=AbortSignal(aborted=True))
    assert_batch_well_formed(calls, batch, rec.events)
    assert all(m.is_error and ABORTED in text(m) for m in batch.messages)
    assert counter.calls == []


def test_prepare_and_execute_check_the_signal_themselves() -> None:
    tool = make_tool("t", Counter())
    tc = call("c1", "t")
    signal = AbortSignal()
    prep = prepare_tool_call(
        AgentContext(tools=[tool]), AssistantMessage([tc]), tc, AgentLoopConfig(), signal
    )
    assert isinstance(prep, PreparedToolCall)
    signal.abort()
    executed = execute_prepared_tool_call(prep, signal, None)
    assert executed.is_error and ABORTED in text(executed.result)
    again = prepare_tool_call(
        AgentContext(tools=[tool]), AssistantMessage([tc]), tc, AgentLoopConfig(), signal
    )
    assert isinstance(again, ImmediateOutcome) and again.is_error


# --- the event sink -------------------------------------------------------------------------------


@pytest.mark.parametrize("failing", [ToolExecStartEvent, ToolExecUpdateEvent, ToolExecEndEvent, object])
def test_a_raising_sink_does_not_break_the_batch(failing: type) -> None:
    def on_event(event: Any) -> None:
        if isinstance(event, failing):
            raise RuntimeError("UI crashed")

    def execute(call_id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        on_partial("tick")
        return AgentToolResult(f"ok {call_id}")

    tool = make_tool("t", execute)
    calls = [call("c1", "t"), call("c2", "t")]
    rec = Recorder(on_event)
    batch, _ = run([tool], calls, sink=rec)
    assert [text(m) for m in batch.messages] == ["ok c1", "ok c2"]
    assert not any(m.is_error for m in batch.messages)
    assert_batch_well_formed(calls, batch, rec.events)  # every event was still offered to the sink

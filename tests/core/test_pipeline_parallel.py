"""Parallel mode (spec section 9): ordering, real concurrency, the sequential fallback, the pool cap,
a serialised event sink, and abort. Concurrency is proven with barriers, never with timing."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import pytest
from pipeline_helpers import (
    WAIT_S,
    Recorder,
    assert_batch_well_formed,
    call,
    make_tool,
    run,
    text,
)

import yiemagent.core._pipeline as agent_core
from yiemagent import (
    AbortSignal,
    AgentLoopConfig,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    execute_tool_calls_parallel,
)

ABORTED = "was not run: the operation was aborted"
_yield_gil = getattr(os, "sched_yield", None) or (lambda: None)


class Concurrency:
    """Counts tools running at once, under a lock, and remembers the highest count and threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.threads: set[int] = set()
        self.seen_others: list[int] = []

    def __enter__(self) -> int:
        with self._lock:
            others = self.active
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.threads.add(threading.get_ident())
            self.seen_others.append(others)
            return others

    def __exit__(self, *_exc: Any) -> None:
        with self._lock:
            self.active -= 1


def barrier_tool(
    name: str, barrier: threading.Barrier, conc: Concurrency | None = None, *, parallel: bool = True
) -> AgentTool:
    """A tool that only returns once ``barrier`` is full: a non-concurrent run breaks it."""

    def execute(call_id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        with conc if conc is not None else Concurrency():
            on_partial("waiting")
            barrier.wait()  # raises BrokenBarrierError (an error result) if run alone
            on_partial("through")
            return AgentToolResult(f"{name} {call_id}")

    return make_tool(name, execute, parallel=parallel)


def counting_tool(name: str, conc: Concurrency, *, parallel: bool) -> AgentTool:
    """A tool that reports how many others were running and whether it ran on the caller's thread
    (sequential mode) or elsewhere (the pool)."""
    home = threading.get_ident()

    def execute(call_id: str, *_a: Any) -> AgentToolResult:
        with conc as others:
            where = "main" if threading.get_ident() == home else "pool"
            return AgentToolResult(f"{call_id} saw {others} others on {where}")

    return make_tool(name, execute, parallel=parallel)


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__.removeprefix("ToolExec").removesuffix("Event") for e in events]


# --- ordering and concurrency ---------------------------------------------------------------------


def test_parallel_calls_really_run_at_once() -> None:
    n = 4
    barrier = threading.Barrier(n, timeout=WAIT_S)
    conc = Concurrency()
    tool = barrier_tool("meet", barrier, conc)
    calls = [call(f"c{i}", "meet") for i in range(n)]
    batch, rec = run([tool], calls, AgentLoopConfig([tool], tool_execution="parallel"))
    assert [m.is_error for m in batch.messages] == [False] * n, [text(m) for m in batch.messages]
    assert [text(m) for m in batch.messages] == [f"meet c{i}" for i in range(n)]
    assert conc.max_active == n
    assert threading.get_ident() not in conc.threads
    assert_batch_well_formed(calls, batch, rec.events)
    # all calls are prepared (and started) before any executes
    assert kinds(rec.events)[:n] == ["Start"] * n


def test_results_come_back_in_call_order_even_when_calls_finish_in_reverse() -> None:
    n = 4
    finished = [threading.Event() for _ in range(n)]

    def execute(call_id: str, args: dict[str, Any], _sig: Any, _p: Any) -> AgentToolResult:
        i = args["i"]
        if i + 1 < n and not finished[i + 1].wait(WAIT_S):  # wait for the next call to finish
            raise RuntimeError("ran sequentially")
        finished[i].set()
        return AgentToolResult(f"result {i}")

    tool = make_tool("chain", execute, parallel=True)
    calls = [call(f"c{i}", "chain", {"i": i}) for i in range(n)]
    batch, rec = run([tool], calls, AgentLoopConfig([tool], tool_execution="parallel"))
    assert [text(m) for m in batch.messages] == [f"result {i}" for i in range(n)]
    assert [m.tool_call_id for m in batch.messages] == [c.id for c in calls]
    assert [e.tool_call_id for e in rec.of(ToolExecEndEvent)] == [f"c{i}" for i in reversed(range(n))]
    assert_batch_well_formed(calls, batch, rec.events)


def test_immediate_outcomes_keep_their_place_among_parallel_results() -> None:
    barrier = threading.Barrier(2, timeout=WAIT_S)
    tool = barrier_tool("meet", barrier)
    strict = make_tool("strict", schema={"type": "object", "required": ["x"]}, parallel=True)
    calls = [call("a", "unknown"), call("b", "meet"), call("c", "strict"), call("d", "meet")]
    batch, rec = run([tool, strict], calls, AgentLoopConfig([tool, strict], tool_execution="parallel"))
    assert_batch_well_formed(calls, batch, rec.events)
    assert [m.is_error for m in batch.messages] == [True, False, True, False]
    assert "not found" in text(batch.messages[0]) and "required property" in text(batch.messages[2])
    # immediate outcomes end during preparation, before any tool runs
    assert kinds(rec.events)[:6] == ["Start", "End", "Start", "Start", "End", "Start"]


def test_a_single_prepared_call_in_parallel_mode() -> None:
    tool = make_tool("only", parallel=True)
    calls = [call("a", "only"), call("b", "missing")]
    batch, rec = run([tool], calls, AgentLoopConfig([tool], tool_execution="parallel"))
    assert_batch_well_formed(calls, batch, rec.events)
    assert [m.is_error for m in batch.messages] == [False, True]


def test_unknown_tools_do_not_force_sequential_mode() -> None:
    barrier = threading.Barrier(2, timeout=WAIT_S)
    tool = barrier_tool("meet", barrier)
    calls = [call("a", "meet"), call("b", "ghost"), call("c", "meet")]
    batch, _ = run([tool], calls, AgentLoopConfig([tool], tool_execution="parallel"))
    assert [m.is_error for m in batch.messages] == [False, True, False]


# --- when the batch runs sequentially -------------------------------------------------------------


def _assert_ran_sequentially(conc: Concurrency, batch: Any, rec: Recorder, n: int) -> None:
    assert conc.max_active == 1
    assert conc.seen_others == [0] * n
    assert [text(m) for m in batch.messages] == [f"c{i} saw 0 others on main" for i in range(n)]
    # sequential mode starts each call only after the previous one ended
    assert kinds(rec.events) == ["Start", "End"] * n


def test_one_non_parallel_tool_makes_the_whole_batch_sequential() -> None:
    conc = Concurrency()
    fast = counting_tool("fast", conc, parallel=True)
    careful = counting_tool("careful", conc, parallel=False)
    names = ["fast", "fast", "careful", "fast"]
    calls = [call(f"c{i}", name) for i, name in enumerate(names)]
    batch, rec = run([fast, careful], calls, AgentLoopConfig([fast, careful], tool_execution="parallel"))
    assert_batch_well_formed(calls, batch, rec.events)
    _assert_ran_sequentially(conc, batch, rec, len(calls))


def test_sequential_config_forces_sequential_mode() -> None:
    conc = Concurrency()
    fast = counting_tool("fast", conc, parallel=True)
    calls = [call(f"c{i}", "fast") for i in range(4)]
    batch, rec = run([fast], calls, AgentLoopConfig([fast], tool_execution="sequential"))
    assert_batch_well_formed(calls, batch, rec.events)
    _assert_ran_sequentially(conc, batch, rec, len(calls))


def test_all_parallel_tools_in_parallel_config_use_the_pool() -> None:
    conc = Concurrency()
    fast = counting_tool("fast", conc, parallel=True)
    calls = [call(f"c{i}", "fast") for i in range(3)]
    batch, rec = run([fast], calls, AgentLoopConfig([fast], tool_execution="parallel"))
    assert all(text(m).endswith("on pool") for m in batch.messages)
    assert kinds(rec.events)[:3] == ["Start"] * 3


# --- the pool cap ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_max_parallel_tools_caps_concurrency(cap: int, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real_pool = agent_core.ThreadPoolExecutor

    def spy(max_workers: int, *args: Any, **kw: Any) -> Any:
        sizes.append(max_workers)
        return real_pool(max_workers, *args, **kw)

    monkeypatch.setattr(agent_core, "ThreadPoolExecutor", spy)
    n = 6
    barrier = threading.Barrier(cap, timeout=WAIT_S)  # cap tools must be able to run together
    conc = Concurrency()
    tool = barrier_tool("meet", barrier, conc)
    calls = [call(f"c{i}", "meet") for i in range(n)]
    config = AgentLoopConfig([tool], tool_execution="parallel", max_parallel_tools=cap)
    batch, rec = run([tool], calls, config)
    assert [m.is_error for m in batch.messages] == [False] * n, [text(m) for m in batch.messages]
    assert conc.max_active == cap
    assert len(conc.threads) <= cap
    assert sizes == [cap]
    assert_batch_well_formed(calls, batch, rec.events)


def test_without_a_cap_the_pool_has_one_thread_per_prepared_call(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real_pool = agent_core.ThreadPoolExecutor
    monkeypatch.setattr(
        agent_core, "ThreadPoolExecutor", lambda n, *a, **k: sizes.append(n) or real_pool(n, *a, **k)
    )
    tool = make_tool("t", parallel=True)
    run(
        [tool],
        [call(f"c{i}", "t") for i in range(5)] + [call("x", "ghost")],
        AgentLoopConfig([tool], tool_execution="parallel"),
    )
    assert sizes == [5]


# --- the event sink -------------------------------------------------------------------------------


def test_the_sink_is_never_entered_by_two_threads_at_once() -> None:
    n, updates = 6, 40
    barrier = threading.Barrier(n, timeout=WAIT_S)

    def execute(call_id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        barrier.wait()
        for i in range(updates):
            on_partial(i)
        return AgentToolResult(call_id)

    def linger(_event: Any) -> None:
        for _ in range(5):  # give up the GIL inside the sink so an unserialised sink would overlap
            _yield_gil()

    tool = make_tool("noisy", execute, parallel=True)
    calls = [call(f"c{i}", "noisy") for i in range(n)]
    rec = Recorder(linger)
    batch, _ = run([tool], calls, AgentLoopConfig([tool], tool_execution="parallel"), sink=rec)
    assert not any(m.is_error for m in batch.messages)
    assert rec.overlaps == 0
    assert len(rec.of(ToolExecUpdateEvent)) == n * updates
    for c in calls:
        assert [e.partial_result for e in rec.of(ToolExecUpdateEvent, c.id)] == list(range(updates))
    assert_batch_well_formed(calls, batch, rec.events)


def test_a_raising_sink_does_not_break_a_parallel_batch() -> None:
    barrier = threading.Barrier(3, timeout=WAIT_S)

    def explode(_event: Any) -> None:
        raise RuntimeError("sink down")

    tool = barrier_tool("meet", barrier)
    calls = [call(f"c{i}", "meet") for i in range(3)]
    rec = Recorder(explode)
    batch, _ = run([tool], calls, AgentLoopConfig([tool], tool_execution="parallel"), sink=rec)
    assert [text(m) for m in batch.messages] == [f"meet c{i}" for i in range(3)]
    assert_batch_well_formed(calls, batch, rec.events)


# --- late updates and timeouts in parallel mode ---------------------------------------------------


def test_late_updates_and_timeouts_in_parallel_mode() -> None:
    release, finished = threading.Event(), threading.Event()

    def slow(_id: str, _args: Any, _sig: Any, on_partial: Any) -> AgentToolResult:
        try:
            on_partial("early")
            release.wait(WAIT_S)
            on_partial("late")
            return AgentToolResult("slow done")
        finally:
            finished.set()

    slow_tool = make_tool("slow", slow, parallel=True, timeout_s=0.05)
    quick = make_tool("quick", parallel=True)
    calls = [call("a", "slow"), call("b", "quick")]
    try:
        batch, rec = run(
            [slow_tool, quick], calls, AgentLoopConfig([slow_tool, quick], tool_execution="parallel")
        )
        assert not finished.is_set()
        assert text(batch.messages[0]) == 'Tool "slow" timed out after 0.05 s.'
        assert batch.messages[0].is_error and not batch.messages[1].is_error
    finally:
        release.set()
    assert finished.wait(WAIT_S)
    assert set(e.partial_result for e in rec.of(ToolExecUpdateEvent)) <= {"early"}  # "late" dropped
    assert_batch_well_formed(calls, batch, rec.events)


# --- abort ----------------------------------------------------------------------------------------


def test_abort_during_a_parallel_batch_gives_unstarted_calls_aborted_results() -> None:
    signal = AbortSignal()
    barrier = threading.Barrier(2, timeout=WAIT_S)
    ran: list[str] = []
    lock = threading.Lock()

    def execute(call_id: str, _args: Any, sig: AbortSignal, _p: Any) -> AgentToolResult:
        with lock:
            ran.append(call_id)
        barrier.wait()  # c0 and c1 run together (cap 2)
        if call_id == "c0":
            sig.abort()
        elif not sig.wait(WAIT_S):  # c1 returns only after the abort, so c2.. start after it
            raise RuntimeError("abort never came")
        return AgentToolResult(f"done {call_id}")

    tool = make_tool("t", execute, parallel=True)
    calls = [call(f"c{i}", "t") for i in range(5)]
    config = AgentLoopConfig([tool], tool_execution="parallel", max_parallel_tools=2)
    batch, rec = run([tool], calls, config, signal)
    assert sorted(ran) == ["c0", "c1"]
    assert_batch_well_formed(calls, batch, rec.events)
    assert [text(m) for m in batch.messages[:2]] == ["done c0", "done c1"]
    assert [m.is_error for m in batch.messages] == [False, False, True, True, True]
    assert all(text(m) == f'Tool "t" {ABORTED}.' for m in batch.messages[2:])


def test_abort_while_preparing_a_parallel_batch() -> None:
    signal = AbortSignal()
    ran: list[str] = []

    def before(ctx: Any, sig: AbortSignal) -> None:
        if ctx.tool_call.id == "c1":
            sig.abort()

    def execute(call_id: str, *_a: Any) -> AgentToolResult:
        ran.append(call_id)
        return AgentToolResult("ran")

    tool = make_tool("t", execute, parallel=True)
    calls = [call(f"c{i}", "t") for i in range(3)]
    batch, rec = run([tool], calls, AgentLoopConfig([tool], before, tool_execution="parallel"), signal)
    assert ran == []
    assert_batch_well_formed(calls, batch, rec.events)
    assert all(m.is_error and ABORTED in text(m) for m in batch.messages)


def test_execute_tool_calls_parallel_directly_with_typed_calls() -> None:
    barrier = threading.Barrier(2, timeout=WAIT_S)
    tool = barrier_tool("meet", barrier, parallel=False)  # the function itself does not dispatch
    calls = [AgentToolCall("x", "meet", {}), AgentToolCall("y", "meet", "{}")]
    batch, rec = run([tool], calls, runner=execute_tool_calls_parallel)
    assert [text(m) for m in batch.messages] == ["meet x", "meet y"]
    assert rec.of(ToolExecStartEvent)[1].arguments == "{}"
    assert_batch_well_formed(calls, batch, rec.events)


def test_a_parallel_batch_that_falls_back_to_order_says_why_once(caplog: pytest.LogCaptureFixture) -> None:
    import yiemagent.core._pipeline as agent_core
    from yiemagent import (
        AgentContext,
        AgentLoopConfig,
        AgentTool,
        AgentToolCall,
        AgentToolResult,
        AssistantMessage,
        TextContent,
        execute_tool_calls,
    )

    lonely = AgentTool(
        "lonelyHint",
        "Lonely",
        "sequential only",
        {"type": "object"},
        lambda *_: AgentToolResult([TextContent("ok")]),
    )
    calls = [AgentToolCall("a", "lonelyHint", {}), AgentToolCall("b", "lonelyHint", {})]
    context = AgentContext("", [], {"lonelyHint": lonely})
    config = AgentLoopConfig({"lonelyHint": lonely}, tool_execution="parallel")
    agent_core._hinted.discard("lonelyHint")
    with caplog.at_level(logging.INFO, logger="yiemagent"):
        for _ in range(2):
            execute_tool_calls(context, AssistantMessage(calls), calls, config, None, None)
    hints = [r.getMessage() for r in caplog.records if "do not allow parallel" in r.getMessage()]
    assert len(hints) == 1 and "'lonelyHint'" in hints[0] and "parallel_tool_execute=True" in hints[0]

"""The batch executor's two public halves used directly: ``prepare_batch`` prepares every call
and executes none; ``run_prepared`` runs the entries in order or at once, calling ``on_start``
and ``on_end`` once per prepared call. The approval path uses only these (and public names) of
the pipeline. Concurrency is proven with a barrier, never with timing."""

from __future__ import annotations

import ast
import inspect
import threading
from typing import Any

from pipeline_helpers import WAIT_S, Recorder, assert_batch_well_formed, call, make_tool, text

import yiemagent.core._approval_batch as approval_batch
from yiemagent.core import (
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    FinalizedOutcome,
    PreparedBatch,
    PreparedToolCall,
    ToolExecEndEvent,
    ToolExecStartEvent,
    UnannouncedOutcome,
    create_error_tool_result,
    prepare_batch,
    run_prepared,
)


class Callbacks:
    """Records ``on_start``/``on_end`` calls (from any thread) with the thread each ran on and how
    many events the sink held then."""

    def __init__(self, recorder: Recorder) -> None:
        self._lock = threading.Lock()
        self._recorder = recorder
        self.seen: list[tuple[str, str, int, int]] = []  # (what, call id, thread, events so far)

    def _note(self, what: str, call_id: str) -> None:
        with self._lock:
            self.seen.append((what, call_id, threading.get_ident(), len(self._recorder.events)))

    def on_start(self, prep: PreparedToolCall) -> FinalizedOutcome | None:
        self._note("start", prep.tool_call.id)
        return None

    def on_end(self, done: FinalizedOutcome) -> None:
        self._note("end", done.tool_call.id)

    def order(self) -> list[tuple[str, str]]:
        return [(what, call_id) for what, call_id, _, _ in self.seen]


def prepared(tools: list[AgentTool], calls: list[Any], mode: str) -> tuple[Any, Any, Recorder, Any]:
    context = AgentContext("system", [], tools)
    config = AgentLoopConfig(tools, tool_execution=mode)
    recorder = Recorder()
    batch = prepare_batch(context, AssistantMessage(calls), calls, config, None, recorder)
    return context, config, recorder, batch


def test_prepare_batch_prepares_every_call_and_executes_none() -> None:
    ran: list[str] = []
    tool = make_tool("t", lambda call_id, *_: ran.append(call_id) or AgentToolResult("ok"))
    calls = [call("a", "t"), call("b", "ghost"), call("c", "t")]
    _, _, recorder, batch = prepared([tool], calls, "sequential")
    assert ran == []
    assert [type(e) for e in batch.entries] == [PreparedToolCall, FinalizedOutcome, PreparedToolCall]
    assert batch.parallel is False
    assert [(type(e).__name__, e.tool_call_id) for e in recorder.events] == [
        ("ToolExecStartEvent", "a"),
        ("ToolExecStartEvent", "b"),
        ("ToolExecEndEvent", "b"),  # a call that ends in preparation ends there
        ("ToolExecStartEvent", "c"),
    ]


def test_prepare_batch_runs_in_parallel_only_when_every_known_tool_may() -> None:
    both = make_tool("both", parallel=True)
    alone = make_tool("alone", parallel=False)
    assert prepared([both], [call("a", "both"), call("b", "ghost")], "parallel")[3].parallel is True
    assert prepared([both, alone], [call("a", "both"), call("b", "alone")], "parallel")[3].parallel is False
    assert prepared([both], [call("a", "both"), call("b", "both")], "sequential")[3].parallel is False


def test_run_prepared_in_order_calls_the_callbacks_once_per_call_in_order() -> None:
    tool = make_tool("t")
    calls = [call("a", "t"), call("b", "ghost"), call("c", "t")]
    context, config, recorder, batch = prepared([tool], calls, "sequential")
    callbacks = Callbacks(recorder)
    done = run_prepared(
        context, batch, config, None, recorder, on_start=callbacks.on_start, on_end=callbacks.on_end
    )
    assert callbacks.order() == [("start", "a"), ("end", "a"), ("start", "c"), ("end", "c")]
    assert {thread for *_, thread, _ in callbacks.seen} == {threading.get_ident()}
    ends = [i for i, e in enumerate(recorder.events) if isinstance(e, ToolExecEndEvent)]
    # on_start comes before the call's end event, on_end just after it
    assert [events for *_, events in callbacks.seen] == [ends[1], ends[1] + 1, ends[2], ends[2] + 1]
    assert [m.is_error for m in done.messages] == [False, True, False]
    assert_batch_well_formed(calls, done, recorder.events)


def test_run_prepared_at_once_calls_the_callbacks_once_per_call_on_its_thread() -> None:
    n = 3
    barrier = threading.Barrier(n, timeout=WAIT_S)  # breaks unless the n calls run together

    def execute(call_id: str, *_: Any) -> AgentToolResult:
        barrier.wait()
        return AgentToolResult(f"met {call_id}")

    tool = make_tool("meet", execute, parallel=True)
    calls = [call(f"c{i}", "meet") for i in range(n)] + [call("x", "ghost")]
    context, config, recorder, batch = prepared([tool], calls, "parallel")
    assert batch.parallel is True
    callbacks = Callbacks(recorder)
    done = run_prepared(
        context, batch, config, None, recorder, on_start=callbacks.on_start, on_end=callbacks.on_end
    )
    assert [text(m) for m in done.messages[:n]] == [f"met c{i}" for i in range(n)]
    for i in range(n):
        own = [(what, thread) for what, call_id, thread, _ in callbacks.seen if call_id == f"c{i}"]
        assert [what for what, _ in own] == ["start", "end"]
        assert own[0][1] == own[1][1] != threading.get_ident()  # both on the pool thread that ran it
    assert all(call_id != "x" for _, call_id in callbacks.order())
    assert_batch_well_formed(calls, done, recorder.events)


def test_an_outcome_from_on_start_replaces_the_run_and_ends_in_its_place() -> None:
    ran: list[str] = []
    tool = make_tool("t", lambda call_id, *_: ran.append(call_id) or AgentToolResult("ran"))
    calls = [call("a", "t"), call("b", "t")]
    context, config, recorder, batch = prepared([tool], calls, "sequential")
    ends: list[str] = []

    def refuse_a(prep: PreparedToolCall) -> FinalizedOutcome | None:
        if prep.tool_call.id != "a":
            return None
        return FinalizedOutcome(prep.tool_call, create_error_tool_result("not now", "interrupted"), True)

    done = run_prepared(
        context,
        batch,
        config,
        None,
        recorder,
        on_start=refuse_a,
        on_end=lambda f: ends.append(f.tool_call.id),
    )
    assert ran == ["b"] and ends == ["b"]
    assert [text(m) for m in done.messages] == ["not now", "ran"]
    assert_batch_well_formed(calls, done, recorder.events)


def test_an_unannounced_outcome_gets_its_end_event_in_its_place() -> None:
    tool = make_tool("t")
    calls = [call("a", "t"), call("b", "t")]
    context, config, recorder, batch = prepared([tool], calls, "sequential")
    refused = UnannouncedOutcome(calls[0], create_error_tool_result("denied", "denied"), True)
    done = run_prepared(
        context, PreparedBatch(batch.message, [refused, batch.entries[1]]), config, None, recorder
    )
    assert [(type(e).__name__, e.tool_call_id) for e in recorder.events[2:]] == [
        ("ToolExecEndEvent", "a"),
        ("ToolExecEndEvent", "b"),
    ]
    assert [text(m) for m in done.messages] == ["denied", "t"]
    assert len([e for e in recorder.events if isinstance(e, ToolExecStartEvent)]) == 2


def test_the_approval_path_imports_no_private_name_of_the_pipeline() -> None:
    tree = ast.parse(inspect.getsource(approval_batch))
    imported = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "yiemagent.core._pipeline"
        for alias in node.names
    ]
    assert "prepare_batch" in imported and "run_prepared" in imported
    assert [name for name in imported if name.startswith("_")] == []
    plain = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert "yiemagent.core._pipeline" not in plain  # no way round it through the module object

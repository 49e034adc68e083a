"""A property of approval, over random batches: tools with and without approval, random
``prepare_arguments`` rewrites, random decisions, sequential and parallel. The arguments each
executed call receives equal the ones shown for it (or its edit), every call has exactly one
result, in call order, and a denied call never executes.

CI (``YIEMAGENT_TEST_SIZE=full``) runs 10,000 examples, ``long`` 50,000 and a developer's
default run (``quick``) 1,000: see ``tests/tiers.py``. The loop is driven
directly (``run_loop`` twice: the pause, then the decisions, checked as ``resume`` checks them),
so each example costs a fraction of a millisecond.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import sized

from yiemagent import AgentTool, AgentToolResult, Approve, AssistantMessage, Deny, Edit, UserMessage
from yiemagent.agent._approvals import check_decisions
from yiemagent.core._content import AgentToolCall
from yiemagent.core._loop import RunConfig, run_loop
from yiemagent.core._tools import AgentState

EXAMPLES = sized(quick=1_000, full=10_000, long=50_000)
REWRITES = {
    "none": None,
    "add_default": lambda a: {"mode": "safe", **a},
    "double": lambda a: {**a, "n": a.get("n", 0) * 2},
    "rename": lambda a: {"size": a.get("n", 0), **{k: v for k, v in a.items() if k != "n"}},
}
GATES = ("never", "always", "when_big")


class Executed:
    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def tool(self, name: str, gate: str, rewrite: str, parallel: bool) -> AgentTool:
        def execute(call_id: str, args: dict[str, Any], _s: Any, _u: Any) -> AgentToolResult:
            with self.lock:
                assert call_id not in self.calls, f"{call_id} executed twice"
                self.calls[call_id] = dict(args)
            return AgentToolResult("ok")

        needs: Any = {"never": False, "always": True, "when_big": lambda a, _c: a.get("n", 0) > 2}[gate]
        return AgentTool(
            name,
            name,
            name,
            {"type": "object"},
            execute,
            prepare_arguments=REWRITES[rewrite],
            parallel_tool_execute=parallel,
            needs_approval=needs,
        )


tool_specs = st.lists(
    st.tuples(st.sampled_from(GATES), st.sampled_from(sorted(REWRITES))), min_size=1, max_size=4
)


@st.composite
def batches(draw: Any) -> tuple[list[tuple[str, str]], list[tuple[int, int]], str, list[Any]]:
    tools = draw(tool_specs)
    calls = draw(
        st.lists(st.tuples(st.integers(0, len(tools) - 1), st.integers(0, 5)), min_size=1, max_size=6)
    )
    mode = draw(st.sampled_from(["sequential", "parallel"]))
    decisions = draw(
        st.lists(
            st.one_of(
                st.just(Approve()),
                st.builds(Deny, st.sampled_from(["no", "not now", "too risky"])),
                st.builds(Edit, st.fixed_dictionaries({"n": st.integers(-3, 9)})),
            ),
            min_size=len(calls),
            max_size=len(calls),
        )
    )
    return tools, calls, mode, decisions


@pytest.mark.timeout(1800)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(batches())
def test_executed_arguments_are_the_ones_shown_and_every_call_has_one_result(batch: Any) -> None:
    specs, call_specs, mode, decision_list = batch
    executed = Executed()
    tools = [executed.tool(f"t{i}", gate, rewrite, True) for i, (gate, rewrite) in enumerate(specs)]
    calls = [AgentToolCall(f"c{k}", f"t{t}", {"n": n}) for k, (t, n) in enumerate(call_specs)]
    reply = AssistantMessage([*calls], stop_reason="toolUse")
    replies = iter([reply, AssistantMessage(["done"]), AssistantMessage(["done again"])])
    config = RunConfig(llm_call=lambda _r: next(replies), tool_execution=mode, max_repeated_calls=None)
    state = AgentState(tools=tools)

    first = run_loop([UserMessage("go", 1)], state, config)
    prepared = {c.id: REWRITES[specs[t][1]] for c, (t, _) in zip(calls, call_specs, strict=True)}
    shown = {c.id: (prepared[c.id] or (lambda a: a))(dict(c.arguments)) for c in calls}
    gated = [
        c.id
        for c, (t, _) in zip(calls, call_specs, strict=True)
        if specs[t][0] == "always" or (specs[t][0] == "when_big" and shown[c.id].get("n", 0) > 2)
    ]
    if not gated:
        assert first.stop_reason == "stop" and state.paused_batch is None
        assert executed.calls == shown
    else:
        assert first.stop_reason == "awaiting_approval" and executed.calls == {}
        pending = state.paused_batch.pending()
        assert [p.tool_call_id for p in pending] == gated
        assert all(dict(p.arguments) == shown[p.tool_call_id] for p in pending)
        decisions = {i: decision_list[k] for k, i in enumerate(gated)}
        checked = check_decisions(state.paused_batch, decisions, state.tools)
        second = run_loop([], state, config, approvals=checked)
        assert second.stop_reason == "stop" and state.paused_batch is None
        want = {c.id: shown[c.id] for c in calls if c.id not in gated}
        for i, decision in decisions.items():
            if isinstance(decision, Approve):
                want[i] = shown[i]
            elif isinstance(decision, Edit):
                want[i] = dict(decision.arguments)
        assert executed.calls == want  # denied calls never ran; the others with what was shown
    results = [m for m in state.messages if m.role == "toolResult"]
    assert [m.tool_call_id for m in results] == [c.id for c in calls]  # one each, in call order
    for m in results:
        if m.tool_call_id in gated and isinstance(decisions[m.tool_call_id], Deny):
            assert m.is_error and m.details["error_kind"] == "denied"
        else:
            assert not m.is_error

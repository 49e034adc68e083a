"""Budgets: the usage of a run and of an agent, limits that end a run cleanly with
``stop_reason="usage_limit"`` at the right call with every result in place, and cost that says
so when a call cannot be priced. Scripted replies carry the usage a provider would report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yiemagent import (
    AgentEndEvent,
    AgentToolCall,
    AssistantMessage,
    LlmUsage,
    Prices,
    RunUsage,
    TextContent,
    ToolResultMessage,
    UsageLimits,
    YiemAgent,
    function_tool,
)

WAIT_S = 10.0


@function_tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@function_tool
def note(text: str) -> str:
    """Write a note."""
    return "noted"


def calls(*names: str, n: int, usage: LlmUsage | None = None) -> AssistantMessage:
    blocks: list[Any] = [
        AgentToolCall(f"c{n}_{i}", name, {"q" if name == "look" else "text": f"{n}.{i}"})
        for i, name in enumerate(names)
    ]
    return AssistantMessage(
        blocks, stop_reason="toolUse", model="m", usage=usage or LlmUsage(input=100, output=10)
    )


def text(value: str = "done", usage: LlmUsage | None = None, model: str = "m") -> AssistantMessage:
    return AssistantMessage([TextContent(value)], model=model, usage=usage or LlmUsage(input=120, output=5))


class Script:
    def __init__(self, replies: list[AssistantMessage]) -> None:
        self.replies = replies
        self.calls = 0

    def __call__(self, request: Any) -> AssistantMessage:
        self.calls += 1
        return self.replies[self.calls - 1]


def agent(replies: list[AssistantMessage], **options: Any) -> tuple[YiemAgent, Script]:
    script = Script(replies)
    options.setdefault("max_repeated_calls", None)
    return YiemAgent(llm_call=script, tools=[look, note], **options), script


def test_a_runs_response_carries_its_totals() -> None:
    cached = LlmUsage(input=100, output=10, cache_read=60, cache_write=7)
    a, _ = agent(
        [calls("look", "look", "note", n=1, usage=cached), text()], prices={"m": Prices(1e-6, 2e-6, 1e-7)}
    )
    with a:
        response = a.prompt("go", timeout=WAIT_S)
    usage = response.run_usage
    assert isinstance(usage, RunUsage)
    assert (usage.llm_calls, usage.tool_calls, usage.calls_per_tool) == (2, 3, {"look": 2, "note": 1})
    assert (usage.input_tokens, usage.output_tokens) == (220, 15)
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.total_tokens) == (60, 7, 235)
    assert usage.cost == pytest.approx(220e-6 + 15 * 2e-6 + 60e-7)
    assert usage.unpriced_calls == 0 and usage.wall_time_s > 0 and usage.runs == 1
    assert usage.to_dict()["total_tokens"] == 235


def test_the_agents_usage_is_the_sum_of_its_runs_also_after_save_and_load(tmp_path: Path) -> None:
    replies = [calls("look", n=1), text(), text(), calls("note", n=2), text()]
    a, _ = agent(replies, prices={"m": {"input": 1e-6, "output": 1e-6}})
    with a:
        runs = [a.prompt(p, timeout=WAIT_S).run_usage for p in ("one", "two", "three")]
        total = a.usage
        a.save(tmp_path / "s.json")
    expected = runs[0].plus(runs[1]).plus(runs[2])
    assert total == expected
    assert (total.llm_calls, total.tool_calls, total.runs) == (5, 2, 3)
    assert json.loads((tmp_path / "s.json").read_text())["usage"] == total.to_dict()
    loaded = YiemAgent.load(tmp_path / "s.json", llm_call=Script([text()]))
    try:
        assert loaded.usage == total
        loaded.prompt("four", timeout=WAIT_S)
        assert loaded.usage.llm_calls == 6
        loaded.reset()
        assert loaded.usage == RunUsage()
    finally:
        loaded.shutdown()


def test_an_unpriced_call_makes_the_cost_none_and_is_counted() -> None:
    a, _ = agent([calls("look", n=1), text(model="other")], prices={"m": Prices(1e-6, 1e-6)})
    with a:
        usage = a.prompt("go", timeout=WAIT_S).run_usage
        assert usage.cost is None and usage.unpriced_calls == 1
        assert a.usage.cost is None


def test_a_cost_the_provider_reports_is_used_when_no_price_is_given() -> None:
    a, _ = agent([text(usage=LlmUsage(input=10, output=2, cost=0.25))])
    with a:
        assert a.prompt("go", timeout=WAIT_S).run_usage.cost == 0.25


def test_max_llm_calls_stops_before_the_call_that_would_pass_it_with_every_result_in_place() -> None:
    replies = [calls("look", n=1), calls("look", n=2), calls("look", n=3), text()]
    a, script = agent(replies, usage_limits=UsageLimits(max_llm_calls=2))
    with a:
        response = a.prompt("go", timeout=WAIT_S)
        history = a.messages
    assert response.stop_reason == "usage_limit"
    assert response.error_message is not None and "max_llm_calls=2 reached" in response.error_message
    assert script.calls == 2
    assert [m.role for m in history] == ["user", "assistant", "toolResult", "assistant", "toolResult"]


def _texts(message: AssistantMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def test_max_tool_calls_lets_the_batch_finish_with_the_calls_past_it_refused() -> None:
    replies = [calls("look", "look", n=1), calls("look", "note", "look", n=2), text()]
    a, script = agent(replies, usage_limits=UsageLimits(max_tool_calls=3))
    with a:
        response = a.prompt("go", timeout=WAIT_S)
        results = [m for m in a.messages if isinstance(m, ToolResultMessage)]
    assert response.stop_reason == "usage_limit" and script.calls == 2
    assert [r.tool_call_id for r in results] == ["c1_0", "c1_1", "c2_0", "c2_1", "c2_2"]
    assert [r.is_error for r in results] == [False, False, False, True, True]
    assert results[3].details["error_kind"] == "usage_limit"
    assert "max_tool_calls=3 reached" in _texts(results[3])
    assert response.run_usage.tool_calls == 3


def test_max_calls_per_tool_refuses_only_that_tools_calls() -> None:
    replies = [calls("look", "note", "look", "note", n=1), text()]
    a, _ = agent(replies, usage_limits=UsageLimits(max_calls_per_tool={"look": 1}))
    with a:
        response = a.prompt("go", timeout=WAIT_S)
        results = [m for m in a.messages if isinstance(m, ToolResultMessage)]
    assert response.stop_reason == "usage_limit"
    assert [r.is_error for r in results] == [False, False, True, False]
    assert 'max_calls_per_tool["look"]=1 reached' in _texts(results[2])


@pytest.mark.parametrize(
    ("limits", "says", "made"),
    [
        (UsageLimits(max_output_tokens=20), "max_output_tokens=20 reached", 2),
        (UsageLimits(max_input_tokens=150), "max_input_tokens=150 would be passed", 1),
        (UsageLimits(max_total_tokens=200), "max_total_tokens=200 would be passed", 1),
        (UsageLimits(max_cost=1.5e-4), "max_cost=0.00015 would be passed", 1),
    ],
)
def test_token_and_cost_limits_are_checked_before_each_call(
    limits: UsageLimits, says: str, made: int
) -> None:
    replies = [calls("look", n=i) for i in range(1, 5)]
    a, script = agent(replies, usage_limits=limits, prices={"m": Prices(1e-6, 1e-6)})
    with a:
        response = a.prompt("go", timeout=WAIT_S)
    assert response.stop_reason == "usage_limit"
    assert response.error_message is not None and says in response.error_message
    assert script.calls == made


def test_a_cost_limit_with_an_unpriced_call_says_so_instead_of_passing() -> None:
    a, script = agent([calls("look", n=1), calls("look", n=2)], usage_limits=UsageLimits(max_cost=100.0))
    with a:
        response = a.prompt("go", timeout=WAIT_S)
    assert response.stop_reason == "usage_limit" and script.calls == 1
    assert "max_cost=100 cannot be checked: 1 LLM call(s) of this run could not be priced" in str(
        response.error_message
    )


def test_limits_given_per_prompt_apply_to_that_run_only() -> None:
    replies = [calls("look", n=1), calls("look", n=2), calls("look", n=3), text()]
    a, script = agent(replies)
    with a:
        limited = a.prompt("go", timeout=WAIT_S, usage_limits=UsageLimits(max_llm_calls=1))
        free = a.prompt("go on", timeout=WAIT_S)
    assert limited.stop_reason == "usage_limit" and free.stop_reason == "stop"
    assert script.calls == 4


def test_the_agent_end_event_carries_the_runs_usage() -> None:
    seen: list[AgentEndEvent] = []
    a, _ = agent(
        [text()], agent_event_sink=lambda e: seen.append(e) if isinstance(e, AgentEndEvent) else None
    )
    with a:
        a.prompt("go", timeout=WAIT_S)
    assert seen[0].to_dict()["run_usage"]["llm_calls"] == 1


@pytest.mark.parametrize(
    ("make", "error", "says"),
    [
        (lambda: UsageLimits(max_llm_calls=-1), ValueError, "max_llm_calls must be an int >= 0"),
        (lambda: UsageLimits(max_cost=float("nan")), ValueError, "max_cost must be a finite number"),
        (lambda: UsageLimits(max_calls_per_tool={"look": "x"}), ValueError, "max_calls_per_tool"),
        (lambda: Prices(-1, 0), ValueError, "input must be a finite number >= 0"),
        (lambda: YiemAgent(llm_call=text, prices={"m": {"in": 1}}), TypeError, "prices\\['m'\\]"),
        (lambda: YiemAgent(llm_call=text, usage_limits={"max_llm_calls": 1}), TypeError, "usage_limits"),
    ],
)
def test_unusable_limits_and_prices_are_refused_where_given(
    make: Any, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        make()


def test_a_resume_that_runs_pending_calls_past_a_tool_limit_ends_without_an_llm_call() -> None:
    from yiemagent import AgentState, RunConfig, UserMessage, run_loop

    pending = AssistantMessage(
        [AgentToolCall(f"p{i}", "look", {"q": str(i)}) for i in range(3)], stop_reason="toolUse"
    )
    state = AgentState(tools=[look], messages=[UserMessage("go"), pending])
    script = Script([text()])
    config = RunConfig(llm_call=script, usage_limits=UsageLimits(max_tool_calls=1))
    response = run_loop([], state, config)
    assert response.stop_reason == "usage_limit" and script.calls == 0
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False, True, True]


def test_a_price_whose_calculation_fails_leaves_the_call_unpriced() -> None:
    class Broken(Prices):
        def cost(self, usage: LlmUsage) -> float:
            raise LookupError("no price for this tier")

    usage = RunUsage()
    reply = AssistantMessage([TextContent("x")], model="m", usage=LlmUsage(input=10, output=2))
    usage.add_reply(reply, {"m": Broken(1e-6, 1e-6)})
    assert usage.cost is None and usage.unpriced_calls == 1
    assert (usage.llm_calls, usage.input_tokens, usage.output_tokens) == (1, 10, 2)


def _tool_events(events: list[Any]) -> list[tuple[str, str]]:
    return [(e.event_type, e.tool_call_id) for e in events if e.event_type.startswith("tool_execution")]


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_a_call_a_limit_stops_is_refused_in_its_place_as_any_refused_call_is(mode: str) -> None:
    """The third call of the batch passes ``max_calls_per_tool``: its events and result come in
    its place among the others', exactly where those of a call of an unknown tool come."""
    limited: list[Any] = []
    a, _ = agent(
        [calls("look", "note", "look", "note", n=1), text()],
        usage_limits=UsageLimits(max_calls_per_tool={"look": 1}),
        tool_execution=mode,
        agent_event_sink=limited.append,
    )
    with a:
        assert a.prompt("go", timeout=WAIT_S).stop_reason == "usage_limit"
        history = [
            (m.tool_call_id, m.details.get("error_kind")) for m in a.messages if m.role == "toolResult"
        ]
    unknown: list[Any] = []
    reply = calls("look", "note", "look", "note", n=1)
    blocks = list(reply.content)
    blocks[2] = AgentToolCall("c1_2", "gone", {"q": "1.2"})
    b, _ = agent(
        [AssistantMessage(blocks, stop_reason="toolUse", model="m", usage=reply.usage), text()],
        tool_execution=mode,
        agent_event_sink=unknown.append,
    )
    with b:
        assert b.prompt("go", timeout=WAIT_S).stop_reason == "stop"
    assert _tool_events(limited) == _tool_events(unknown)
    assert [e[1] for e in _tool_events(limited) if e[0] == "tool_execution_start"] == [
        "c1_0",
        "c1_1",
        "c1_2",
        "c1_3",
    ]
    assert history == [("c1_0", None), ("c1_1", None), ("c1_2", "usage_limit"), ("c1_3", None)]


@pytest.mark.parametrize("reload", [False, True])
def test_a_paused_batch_holds_the_call_a_limit_stopped_in_its_place(reload: bool, tmp_path: Path) -> None:
    """A batch that waits for approval holds the refused call's result in its place, asks
    nothing about it, and, once decided (also by an agent loaded from the saved session),
    leaves every result in call order and ends the run."""
    from yiemagent import Approve

    @function_tool(needs_approval=True)
    def erase(text: str) -> str:
        """Erase something."""
        return "erased"

    batch = AssistantMessage(
        [
            AgentToolCall("a", "look", {"q": "1"}),
            AgentToolCall("b", "look", {"q": "2"}),
            AgentToolCall("c", "erase", {"text": "x"}),
        ],
        stop_reason="toolUse",
        model="m",
    )
    script = Script([batch, text()])
    options: dict[str, Any] = {
        "tools": [look, erase],
        "usage_limits": UsageLimits(max_calls_per_tool={"look": 1}),
        "max_repeated_calls": None,
    }
    first = YiemAgent(llm_call=script, **options)
    try:
        assert first.prompt("go", timeout=WAIT_S).stop_reason == "awaiting_approval"
        assert [p.tool_call_id for p in first.pending_approvals] == ["c"]
        assert first.messages[-1].role == "assistant"  # nothing in the history before the decision
        before = first.usage.tool_calls
        if reload:
            first.save(tmp_path / "s.json")
            first.shutdown()
        a = YiemAgent.load(tmp_path / "s.json", llm_call=script, **options) if reload else first
        with a:
            a.resume({"c": Approve()})
            response = a.take_response(timeout=WAIT_S)
            results = [(m.tool_call_id, m.is_error) for m in a.messages if m.role == "toolResult"]
            made = (a.usage.tool_calls, a.usage.calls_per_tool)
    finally:
        first.shutdown()
    # The run the decisions resumed ends as the paused one would have: the limit named, the
    # model not asked again; the two calls that ran count once each, the refused one not at all.
    assert response.stop_reason == "usage_limit" and script.calls == 1
    assert 'max_calls_per_tool["look"]=1 reached' in str(response.error_message)
    assert results == [("a", False), ("b", True), ("c", False)]
    assert before == 0 and made == (2, {"look": 1, "erase": 1})


# --- every figure stays finite ---------------------------------------------------------------


def test_a_cost_that_overflows_is_unpriced_and_the_session_still_loads(tmp_path: Path) -> None:
    """Prices of 1e308 a token made the cost ``inf``: the saved session held ``Infinity`` and
    ``YiemAgent.load`` failed, and ``to_dict()`` was not JSON. An overflowing cost is unpriced."""
    a, _ = agent([calls("look", n=1), text()], prices={"m": Prices(1e308, 1e308)})
    with a:
        response = a.prompt("go", timeout=WAIT_S)
        a.save(tmp_path / "s.json")
    usage = response.run_usage
    assert usage.cost is None and usage.unpriced_calls == 2
    assert (usage.input_tokens, usage.output_tokens) == (220, 15)  # the tokens are still counted
    json.loads(json.dumps(response.to_dict(), allow_nan=False))
    json.loads(json.dumps(usage.to_dict(), allow_nan=False))
    loaded = YiemAgent.load(tmp_path / "s.json", llm_call=Script([text()]))
    try:
        assert loaded.usage == a.usage
    finally:
        loaded.shutdown()


def test_a_sum_of_finite_costs_that_overflows_is_unpriced() -> None:
    big = LlmUsage(input=1, cost=1.7e308)
    a, _ = agent([calls("look", n=1, usage=big), text(usage=big)])
    with a:
        usage = a.prompt("go", timeout=WAIT_S).run_usage
    assert usage.cost is None and usage.unpriced_calls == 1  # the second reply overflowed the sum
    total = RunUsage(cost=1.7e308).plus(RunUsage(cost=1.7e308))
    assert total.cost is None

"""``max_repeated_calls``: a model that calls one tool with the same arguments again and again
gets, from the third such call of a run on (by default), an error result telling it that it
already has that result, and the tool does not run again."""

from __future__ import annotations

from typing import Any

import pytest

from yiemagent import AgentTool, AgentToolResult, YiemAgent, error_kind
from yiemagent.core._repeated_calls import RepeatedCalls
from yiemagent.testing._scripted import ScriptedModel

WAIT_S = 30.0


def weather_tool(runs: list[dict[str, Any]], parallel: bool = False) -> AgentTool:
    def execute(_id: str, args: dict[str, Any], _signal: Any, _on_partial: Any) -> AgentToolResult:
        runs.append(args)
        return AgentToolResult(f"Sunny in {args['city']}")

    return AgentTool(
        "getWeather",
        "Weather",
        "The weather in a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}},
        execute,
        parallel_tool_execute=parallel,
    )


def calls(*cities: str, tag: str = "c") -> dict[str, Any]:
    return {
        "tool_calls": [
            {"id": f"{tag}{i}", "name": "getWeather", "arguments": {"city": c}} for i, c in enumerate(cities)
        ]
    }


def results(agent: YiemAgent) -> list[tuple[str | None, str]]:
    return [(error_kind(m.details), m.content[0].text) for m in agent.messages if m.role == "toolResult"]  # type: ignore[union-attr]


def test_the_third_identical_call_of_a_run_is_refused_and_does_not_run() -> None:
    runs: list[dict[str, Any]] = []
    replies = [calls("Paris", tag=f"t{n}-") for n in range(4)] + ["It is sunny in Paris."]
    with YiemAgent(llm_call=ScriptedModel(replies), tools=[weather_tool(runs)]) as agent:
        answer = agent.prompt("Weather in Paris?", timeout=WAIT_S)
        assert answer.stop_reason == "stop"
        assert runs == [{"city": "Paris"}] * 2
        kinds = [kind for kind, _ in results(agent)]
        assert kinds == [None, None, "repeated_call", "repeated_call"]
        refusal = results(agent)[2][1]
        assert 'Tool "getWeather" was not run' in refusal
        assert "already called 2 times in this run with these same arguments" in refusal
        assert "its result is above" in refusal


def test_other_arguments_are_not_repeats_and_each_run_counts_afresh() -> None:
    runs: list[dict[str, Any]] = []
    replies = [
        calls("Paris", tag="a"),
        calls("Rome", tag="b"),
        calls("Paris", tag="c"),
        calls("Rome", tag="d"),
        "done",
        calls("Paris", tag="e"),
        "done again",
    ]
    with YiemAgent(llm_call=ScriptedModel(replies), tools=[weather_tool(runs)]) as agent:
        agent.prompt("first", timeout=WAIT_S)
        agent.prompt("second", timeout=WAIT_S)
    assert [r["city"] for r in runs] == ["Paris", "Rome", "Paris", "Rome", "Paris"]


def test_repeats_within_one_parallel_batch_count_too() -> None:
    runs: list[dict[str, Any]] = []
    replies = [calls("Oslo", "Oslo", "Oslo", "Bergen"), "done"]
    with YiemAgent(
        llm_call=ScriptedModel(replies), tools=[weather_tool(runs, parallel=True)], tool_execution="parallel"
    ) as agent:
        agent.prompt("go", timeout=WAIT_S)
        kinds = [kind for kind, _ in results(agent)]
    assert kinds == [None, None, "repeated_call", None]
    assert sorted(r["city"] for r in runs) == ["Bergen", "Oslo", "Oslo"]


@pytest.mark.parametrize(("limit", "ran"), [(1, 1), (3, 3), (None, 5)])
def test_the_limit_is_a_setting_and_none_turns_it_off(limit: int | None, ran: int) -> None:
    runs: list[dict[str, Any]] = []
    replies = [calls("Paris", tag=f"t{n}-") for n in range(5)] + ["done"]
    with YiemAgent(
        llm_call=ScriptedModel(replies), tools=[weather_tool(runs)], max_repeated_calls=limit
    ) as agent:
        agent.prompt("go", timeout=WAIT_S)
        assert agent.max_repeated_calls == limit
    assert len(runs) == ran


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_bad_limit_is_refused_with_what_is_accepted(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_repeated_calls must be a positive int or None"):
        YiemAgent(llm_call=ScriptedModel([]), max_repeated_calls=bad)


def test_counts_tell_types_and_nesting_apart() -> None:
    counts = RepeatedCalls(1)
    counts.record("t", {"n": 1, "tags": ["a", "b"]})
    assert counts.refusal("t", {"tags": ["a", "b"], "n": 1}) is not None  # key order is no matter
    assert counts.refusal("t", {"n": 1, "tags": ["b", "a"]}) is None
    assert counts.refusal("u", {"n": 1, "tags": ["a", "b"]}) is None
    counts.record("t", {"flag": 1})
    assert counts.refusal("t", {"flag": True}) is None  # 1 == True in Python, not in JSON
    assert counts.refusal("t", {"flag": 1}) is not None

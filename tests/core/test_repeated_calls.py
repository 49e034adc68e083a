"""``max_repeated_calls``: a model that calls one tool with the same arguments again and again
gets, from the third turn of a run that repeats such a call on (by default), an error result
telling it that it already has that result, and the tool does not run again. Identical calls
in one batch count as one (four dice rolled at once are not a loop)."""

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


def dice_tool(rolls: list[int], parallel: bool = False) -> AgentTool:
    """``roll {}``: a fair die, so four identical calls are four different answers."""
    faces = iter([3, 6, 1, 4, 2, 5, 6, 6, 1, 2, 3, 4])

    def execute(_id: str, _args: dict[str, Any], _signal: Any, _on_partial: Any) -> AgentToolResult:
        rolls.append(next(faces))
        return AgentToolResult(str(rolls[-1]))

    return AgentTool(
        "roll", "Roll", "Roll a die.", {"type": "object"}, execute, parallel_tool_execute=parallel
    )


def rolls_of(count: int, tag: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"{tag}{i}", "name": "roll", "arguments": {}} for i in range(count)]}


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_four_identical_calls_in_one_batch_all_run_by_default(mode: str) -> None:
    """ "Roll four dice": the model sends four identical ``roll {}`` calls at once, before any
    result; that is four requests, not a loop, so each one runs (two were refused before)."""
    rolls: list[int] = []
    replies = [rolls_of(4, "a"), "You rolled 3, 6, 1 and 4."]
    with YiemAgent(
        llm_call=ScriptedModel(replies), tools=[dice_tool(rolls, mode == "parallel")], tool_execution=mode
    ) as agent:
        answer = agent.prompt("Roll four dice.", timeout=WAIT_S)
        assert answer.stop_reason == "stop"
        assert [kind for kind, _ in results(agent)] == [None] * 4
    assert sorted(rolls) == [1, 3, 4, 6]


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_repeats_are_counted_across_turns_with_a_batch_counting_once(mode: str) -> None:
    """Two batches of identical calls may run (the default limit is 2 batches); the third batch
    that repeats them after seeing their results is refused, every call of it."""
    rolls: list[int] = []
    replies = [rolls_of(3, "a"), rolls_of(2, "b"), rolls_of(2, "c"), "done"]
    with YiemAgent(
        llm_call=ScriptedModel(replies), tools=[dice_tool(rolls, mode == "parallel")], tool_execution=mode
    ) as agent:
        agent.prompt("go", timeout=WAIT_S)
        kinds = [kind for kind, _ in results(agent)]
    assert kinds == [None] * 5 + ["repeated_call"] * 2
    assert len(rolls) == 5


def test_a_batch_of_identical_calls_is_refused_whole_once_over_the_limit() -> None:
    runs: list[dict[str, Any]] = []
    replies = [calls("Oslo", tag="a"), calls("Oslo", "Oslo", "Bergen", tag="b"), "done"]
    with YiemAgent(
        llm_call=ScriptedModel(replies), tools=[weather_tool(runs)], max_repeated_calls=1
    ) as agent:
        agent.prompt("go", timeout=WAIT_S)
        kinds = [kind for kind, _ in results(agent)]
    assert kinds == [None, "repeated_call", "repeated_call", None]
    assert [r["city"] for r in runs] == ["Oslo", "Bergen"]


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
    counts.record("t", {"n": 1, "tags": ["a", "b"]}, "first batch")
    later = "later batch"
    assert counts.refusal("t", {"tags": ["a", "b"], "n": 1}, later) is not None  # key order is no matter
    assert counts.refusal("t", {"n": 1, "tags": ["b", "a"]}, later) is None
    assert counts.refusal("u", {"n": 1, "tags": ["a", "b"]}, later) is None
    counts.record("t", {"flag": 1}, later)
    assert counts.refusal("t", {"flag": True}, "third batch") is None  # 1 == True in Python, not in JSON
    assert counts.refusal("t", {"flag": 1}, "third batch") is not None

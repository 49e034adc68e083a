"""A run that ends in data, recorded: the cassette keeps the output the request asked for (the
native mode's schema, the tool mode's final-answer tool), a strict replay refuses a request that
asks for another output, and a captured draft is a scenario of the output profile that passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from yiemagent import YiemAgent
from yiemagent.testing import ScriptedModel, read_cassette, record, replay
from yiemagent.testing.parity import compare, run_scenario
from yiemagent.testing.parity._capture import capture_scenario
from yiemagent.testing.parity._scenario import parse_scenario

WAIT = 20.0
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
OLDER = {**PERSON, "properties": {"name": {"type": "string"}, "age": {"type": "number"}}}


def answer(args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "final_answer", "arguments": args}]}


REPLIES = {
    "tool": [answer({"name": "Ada", "age": "36"}), answer({"name": "Ada", "age": 36})],
    "native": ['{"name": "Ada"}', '{"name": "Ada", "age": 36}'],
}


def recorded(path: Path, mode: str) -> Path:
    llm = record(ScriptedModel(REPLIES[mode]), path)
    with YiemAgent(llm_call=llm, output_schema=PERSON, output_mode=mode) as agent:  # type: ignore[arg-type]
        assert agent.prompt("Who is Ada?", timeout=WAIT).output == {"name": "Ada", "age": 36}
    return path


@pytest.mark.parametrize("mode", ["tool", "native"])
def test_a_strict_replay_refuses_a_run_that_asks_for_another_output(tmp_path: Path, mode: str) -> None:
    path = recorded(tmp_path / "ada.json", mode)
    requests = [i.request for i in read_cassette(path).interactions]
    if mode == "native":
        assert requests[0]["output"] == {"name": "final_answer", "schema": PERSON}
    else:
        assert [t["name"] for t in requests[0]["tools"]] == ["final_answer"]
    with YiemAgent(llm_call=replay(path), output_schema=PERSON, output_mode=mode) as agent:  # type: ignore[arg-type]
        assert agent.prompt("Who is Ada?", timeout=WAIT).output == {"name": "Ada", "age": 36}
    with YiemAgent(llm_call=replay(path), output_schema=OLDER, output_mode=mode) as agent:  # type: ignore[arg-type]
        response = agent.prompt("Who is Ada?", timeout=WAIT)
    assert response.stop_reason == "error"
    where = "output.schema" if mode == "native" else "tools[0].input_schema"
    assert f'request.{where}.properties.age.type: expected "integer", actual "number"' in str(
        response.error_message
    )


@pytest.mark.parametrize("mode", ["tool", "native"])
def test_a_captured_output_run_is_an_output_scenario_that_passes(tmp_path: Path, mode: str) -> None:
    capture = capture_scenario(read_cassette(recorded(tmp_path / "ada.json", mode)))
    data = capture.data
    assert data["profile"] == ["output"]
    assert data["output"] == {"schema": PERSON, "mode": mode}
    assert "tools" not in data  # the output tool is the profile's, not a fixture
    scenario = parse_scenario(data, "ada.json")
    outcome = run_scenario(scenario)
    assert outcome.problems == []
    assert compare(scenario.expect, outcome.expect(), scenario) is None
    assert outcome.responses[-1]["output"] == {"name": "Ada", "age": 36}

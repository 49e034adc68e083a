"""``python -m yiemagent.parity capture``: a scenario drafted from a recorded run runs on the suite's
driver and agrees with itself, reproduces the recorded requests, and says where a real tool had to
be replaced by a fixture."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from yiemagent import AgentTool, AgentToolResult, AssistantMessage, LlmUsage, TextContent, YiemAgent
from yiemagent.errors import LlmError, ScenarioError
from yiemagent.testing import ScriptedModel, read_cassette, record
from yiemagent.testing.parity import compare, load_scenario, run_scenario
from yiemagent.testing.parity._capture import capture_scenario, scenario_name
from yiemagent.testing.parity._cli import main

WAIT = 20.0


def counting_tool(name: str, texts: list[str]) -> AgentTool:
    """A tool returning ``texts`` one after the other (the last one from then on)."""
    left = list(texts)

    def execute(_id: str, args: dict[str, Any], _signal: Any, _partial: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(left.pop(0) if len(left) > 1 else left[0])])

    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    return AgentTool(name, name, f"The {name} tool.", schema, execute)


def recorded(path: Path, replies: list[Any], tools: list[AgentTool], prompts: tuple[str, ...]) -> Path:
    with YiemAgent(
        llm_call=record(ScriptedModel(replies), path), tools=tools, system_prompt="Be brief."
    ) as agent:
        for prompt in prompts:
            agent.prompt(prompt, timeout=WAIT)
    return path


def call(name: str, city: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": {"city": city}}]}


def test_a_captured_run_is_a_scenario_that_passes_and_gives_the_recorded_requests(tmp_path: Path) -> None:
    usage = AssistantMessage([TextContent("Noon in Tokyo.")], usage=LlmUsage(input=40, output=4))
    path = recorded(
        tmp_path / "Tokyo Run.json",
        [call("getTime", "Tokyo"), usage, "Bye."],
        [counting_tool("getTime", ["12:00 in Tokyo"])],
        ("What time is it in Tokyo?", "Thanks!"),
    )
    capture = capture_scenario(read_cassette(path))
    assert capture.notes == []
    data = capture.data
    assert data["name"] == "tokyo_run" == scenario_name(path)
    assert data["system_prompt"] == "Be brief."
    assert data["inputs"] == [
        {"do": "user", "text": "What time is it in Tokyo?"},
        {"do": "user", "text": "Thanks!"},
    ]
    assert data["tools"][0]["outcome"] == {"text": "12:00 in Tokyo"}
    assert data["replies"][1] == {
        "message": {"role": "assistant", "content": "Noon in Tokyo."},
        "usage": {"input": 40, "output": 4},
    }
    # Written out and read back, it passes the suite's own run.
    file = tmp_path / f"{data['name']}.json"
    assert main(["capture", str(path), "-o", str(file)], io.StringIO()) == 0
    scenario = load_scenario(file)
    outcome = run_scenario(scenario)
    assert outcome.problems == []
    assert compare(scenario.expect, outcome.expect(), scenario) is None
    # The requests of the draft are the recorded ones.
    recorded_requests = [i.request for i in read_cassette(path).interactions]
    assert [r["messages"] for r in scenario.expect["requests"]] == [r["messages"] for r in recorded_requests]


def test_a_tool_that_echoes_its_arguments_becomes_an_echo(tmp_path: Path) -> None:
    echo = AgentTool(
        "lookup",
        "lookup",
        "",
        {"type": "object"},
        lambda _i, args, _s, _p: AgentToolResult([TextContent(json.dumps(args, separators=(",", ":")))]),
    )
    path = recorded(
        tmp_path / "echo.json", [call("lookup", "Oslo"), call("lookup", "Lima"), "ok"], [echo], ("go",)
    )
    capture = capture_scenario(read_cassette(path))
    assert capture.data["tools"][0]["outcome"] == {"echo": True}
    assert capture.notes == []


def test_a_real_tool_that_answers_differently_is_noted_and_the_draft_says_where_it_departs(
    tmp_path: Path,
) -> None:
    path = recorded(
        tmp_path / "clock.json",
        [call("getTime", "Tokyo"), call("getTime", "Tokyo"), "ok"],
        [counting_tool("getTime", ["12:00", "12:01"]), counting_tool("getWeather", ["sunny"])],
        ("go",),
    )
    notes = capture_scenario(read_cassette(path)).notes
    assert any("tool getTime returned 2 different results" in n and "fixture" in n for n in notes)
    assert any("tool getWeather was offered but never called" in n for n in notes)
    assert any(
        'request 3 of the draft is not the recorded one: messages[4].text: expected "12:01"' in n
        for n in notes
    )


def test_a_failed_model_call_becomes_a_fail_reply(tmp_path: Path) -> None:
    def failing(_request: Any) -> AssistantMessage:
        raise LlmError("the server is down")

    path = tmp_path / "down.json"
    with YiemAgent(llm_call=record(failing, path)) as agent:
        agent.prompt("hi", timeout=WAIT)
    capture = capture_scenario(read_cassette(path))
    assert capture.data["replies"] == [{"fail": "the server is down"}]
    assert capture.data["expect"]["responses"][0]["stop_reason"] == "error"


def test_the_command_prints_the_draft_and_its_notes(tmp_path: Path) -> None:
    path = recorded(
        tmp_path / "weather.json", ["Sunny."], [counting_tool("getWeather", ["x"])], ("Weather?",)
    )
    out = io.StringIO()
    assert main(["capture", str(path), "--name", "sunny_answer"], out) == 0
    text = out.getvalue()
    assert '"name": "sunny_answer"' in text
    assert "NOTE tool getWeather was offered but never called" in text


def test_the_scenario_is_named_after_the_file_it_is_written_to(tmp_path: Path) -> None:
    path = recorded(tmp_path / "tokyo.json", ["Noon."], [], ("Time?",))
    target = tmp_path / "tokyo_run.json"
    assert main(["capture", str(path), "-o", str(target)], io.StringIO()) == 0
    assert load_scenario(target).name == "tokyo_run"
    out = io.StringIO()
    assert main(["capture", str(path), "-o", str(tmp_path / "x.json"), "--name", "other"], out) == 1
    assert "write the scenario 'other' to other.json, or name it after the file with --name" in out.getvalue()
    out = io.StringIO()
    assert main(["capture", str(path), "-o", str(tmp_path / "Bad-Name.json")], out) == 1
    assert "write the scenario 'bad_name' to bad_name.json" in out.getvalue()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"format": "yiemagent-cassette", "version": 1, "interactions": []}', "holds no calls"),
        ("[]", "not a usable cassette"),
    ],
)
def test_an_unusable_cassette_is_an_error_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(content, encoding="utf-8")
    out = io.StringIO()
    assert main(["capture", str(path)], out) == 1
    assert out.getvalue().startswith("ERROR ") and message in out.getvalue()


BACKTRACKING = "^(?=(a+)+!)"  # RE2 refuses the lookahead; Python's re takes 2^n steps on "aaa…"


@pytest.mark.timeout(120)
def test_a_cassettes_backtracking_pattern_is_refused_not_matched_with_re(tmp_path: Path) -> None:
    """A schema read from a cassette is untrusted, as an MCP server's is: a pattern RE2 cannot
    run is refused by name, so capturing a hand-made cassette can never hang in Python's ``re``
    (it did, on the recorded call's argument). Run as the command, in a child interpreter."""
    tool = AgentTool(
        "lookup",
        "lookup",
        "Look a word up.",
        {"type": "object", "properties": {"word": {"type": "string", "pattern": "^[a-z!]+$"}}},
        lambda *_: AgentToolResult([TextContent("found")]),
    )
    word = "a" * 40
    path = recorded(
        tmp_path / "hostile.json",
        [{"tool_calls": [{"name": "lookup", "arguments": {"word": word}}]}, "Done."],
        [tool],
        ("Look it up.",),
    )
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("^[a-z!]+$", BACKTRACKING), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "yiemagent.parity", "capture", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cannot be matched in linear time" in done.stdout and "tools[0].input_schema" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_scenarios_output_schema_is_held_to_the_same_rule(tmp_path: Path) -> None:
    path = recorded(tmp_path / "plain.json", ["Hi."], [], ("Hi?",))
    data = capture_scenario(read_cassette(path)).data
    data["output"] = {
        "schema": {"type": "object", "properties": {"w": {"type": "string", "pattern": BACKTRACKING}}}
    }
    data["profile"] = ["output"]
    scenario_file = tmp_path / "plain.json"
    scenario_file.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"output\.schema.*cannot be matched in linear time"):
        load_scenario(scenario_file)

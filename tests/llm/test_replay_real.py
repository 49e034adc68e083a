"""Recording real models and replaying them offline: the embedded SmolLM2 and llama.cpp's own
server each answer the Tokyo question once, recorded; the cassette then replays 100 times with
no model, and the normalised trace (events, responses, history) is the recorded run's every
time. The suite's captured scenario is the capture of the embedded model's run.

The tools are the example tools' names, descriptions and schemas with fixed results (a clock
would make every run differ, which is what the capture notes say to do with a real tool).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from yiemagent import AgentTool, AgentToolResult, TextContent, ToolStore, YiemAgent, load_tools
from yiemagent.cli._session import DEFAULT_SYSTEM_PROMPT
from yiemagent.llm import HttpOptions, LlamaCppClient, OpenAIChatClient
from yiemagent.testing import read_cassette, record, replay
from yiemagent.testing.parity import load_scenario
from yiemagent.testing.parity._capture import capture_scenario
from yiemagent.testing.parity._normalise import Normaliser

pytestmark = [pytest.mark.timeout(900), pytest.mark.needs("local")]

QUESTION = "What time is it in Tokyo?"
TIME = "Current time in Tokyo: 2026-12-01T18:17:05+09:00 (Tuesday, time zone Asia/Tokyo, JST)"
WEATHER = "Weather in Tokyo, Japan: partly cloudy, 12.5°C (feels like 11.0°C), humidity 40%, wind 8 km/h"
REPLAYS = 100
WAIT = 240.0
SCENARIO = ROOT / "parity" / "scenarios" / "a_recorded_run_of_the_embedded_model_replays_alike.json"


def fixed_tools(tmp_path: Path) -> list[AgentTool]:
    """getTime and getWeather as the example tools describe them, with fixed results."""
    store = ToolStore("replay-real")
    folder = tmp_path / "examples"
    folder.mkdir()
    for name in ("getTime.py", "getWeather.py"):
        (folder / name).write_text((ROOT / "tools" / name).read_text(encoding="utf-8"), encoding="utf-8")
    load_tools(store, folder)
    texts = {"getTime": TIME, "getWeather": WEATHER}

    def fixed(tool: AgentTool) -> AgentTool:
        text = texts[tool.name]
        return AgentTool(
            tool.name,
            tool.label,
            tool.description,
            tool.input_schema,
            lambda _id, _args, _signal, _partial: AgentToolResult([TextContent(text)]),
        )

    return [fixed(store.tools[n]) for n in ("getTime", "getWeather")]


def traced_run(llm_call: Any, tools: list[AgentTool], max_turns: int = 50) -> list[dict[str, Any]]:
    """Ask the Tokyo question; the run's normalised trace (events, response, history)."""
    normaliser = Normaliser(())
    trace: list[dict[str, Any]] = []

    def sink(event: Any) -> None:
        line = normaliser.event(event.to_dict())
        if line is not None:
            trace.append(line)

    options: dict[str, Any] = {
        "system_prompt": DEFAULT_SYSTEM_PROMPT,
        "agent_event_sink": sink,
        "max_turns": max_turns,
    }
    with YiemAgent(llm_call=llm_call, tools=tools, **options) as agent:
        response = agent.prompt(QUESTION, timeout=WAIT)
        history = list(agent.messages)
    trace.append({"response": normaliser.message(response.to_dict())})
    trace += [{"history": normaliser.message(m.to_dict())} for m in history]
    return trace


def replays_alike(
    path: Path, recorded: list[dict[str, Any]], tools: list[AgentTool], max_turns: int = 50
) -> None:
    """The cassette replays ``REPLAYS`` times, strictly, to exactly the recorded trace."""
    for n in range(REPLAYS):
        assert traced_run(replay(path), tools, max_turns) == recorded, f"replay {n + 1} differs"


def without_rule(scenario: dict[str, Any]) -> dict[str, Any]:
    """A scenario without its rule (the suite's says it in words of its own)."""
    return {k: v for k, v in scenario.items() if k != "rule"}


@pytest.fixture(scope="module")
def embedded() -> Iterator[LlamaCppClient]:
    client = LlamaCppClient()
    yield client
    client.close()


def test_the_embedded_models_run_replays_alike_100_times(tmp_path: Path, embedded: LlamaCppClient) -> None:
    tools = fixed_tools(tmp_path)
    path = tmp_path / "embedded.json"
    recorded = traced_run(record(embedded, path), tools)
    calls = [e for e in recorded if e.get("type") == "tool_execution_end"]
    assert [c["tool_name"] for c in calls] == ["getTime"] and calls[0]["text"] == TIME
    assert "2026-12-01T18:17:05+09:00" in str(recorded[-1])  # the answer states the tool's time
    cassette = read_cassette(path)
    assert len(cassette.interactions) == 2
    assert any(i.deltas for i in cassette.interactions)  # the embedded model streams
    assert all(i.reply and i.reply["usage"]["input"] > 0 for i in cassette.interactions)
    replays_alike(path, recorded, tools)
    # The suite's captured scenario is this run's capture.
    capture = capture_scenario(cassette, SCENARIO.stem)
    assert capture.notes == [
        "tool getWeather was offered but never called: its fixture returns an empty text"
    ]
    suite = load_scenario(SCENARIO).data
    assert without_rule(capture.data) == without_rule(suite)


def test_the_llama_cpp_servers_run_replays_alike_100_times(tmp_path: Path, server_url: str) -> None:
    """llama.cpp's server, offered the tools, answers the question in text (its 135M model
    starts no call there): one interaction, streamed, recorded and replayed."""
    tools = fixed_tools(tmp_path)
    client = OpenAIChatClient(
        "smollm2",
        server_url,
        api_key_env=None,
        stream=True,
        extra_body={"temperature": 0, "max_tokens": 64},
        http=HttpOptions(timeout=120.0, deadline_s=180.0, max_retries=1, retry_base_delay_s=0.01),
    )
    path = tmp_path / "server.json"
    with client:
        recorded = traced_run(record(client, path), tools)
    cassette = read_cassette(path)
    (interaction,) = cassette.interactions
    assert interaction.reply is not None and interaction.deltas  # streamed, in pieces
    assert [b["type"] for b in interaction.reply["content"]] == ["text"]
    assert [t["name"] for t in interaction.request["tools"]] == ["getTime", "getWeather"]
    replays_alike(path, recorded, tools)

"""No bad item poisons the history: after each kind, the next run and the next save still work."""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, echo_tool, reply

from yiemagent import (
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    YiemAgent,
)
from yiemagent.agent._session import load_session
from yiemagent.core._json_safety import MAX_ECHO_CHARS, MAX_JSON_DEPTH, argument_problem, json_ready
from yiemagent.core._tools import AgentContext
from yiemagent.llm.anthropic._wire import context_to_anthropic


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def result_of(agent: YiemAgent) -> ToolResultMessage:
    return next(m for m in agent.messages if isinstance(m, ToolResultMessage))


def still_works(agent: YiemAgent, path: Path) -> None:
    """The next run answers and the session saves and loads back."""
    assert agent.prompt("and now?", WAIT).stop_reason == "stop"
    agent.save(path)
    assert load_session(path).messages == agent.messages
    json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda c: pytest.fail(c))


BAD_ARGUMENTS = {
    "deep dict": AssistantMessage([AgentToolCall("c", "echo", nested(5000))]),
    "deep dict form": AssistantMessage(
        [{"type": "tool_call", "id": "c", "name": "echo", "arguments": nested(5000)}]
    ),
    "deep JSON text": AssistantMessage([AgentToolCall("c", "echo", '{"a":' * 5000 + "1" + "}" * 5000)]),
    "NaN": AssistantMessage([AgentToolCall("c", "echo", {"text": math.nan})]),
    "NaN text": AssistantMessage([AgentToolCall("c", "echo", '{"text": NaN}')]),
    "object": AssistantMessage([AgentToolCall("c", "echo", {"text": datetime.date(2026, 1, 1)})]),
}


@pytest.mark.parametrize("bad", list(BAD_ARGUMENTS), ids=list(BAD_ARGUMENTS))
def test_unusable_arguments_give_an_error_result_and_poison_nothing(bad: str, tmp_path: Path) -> None:
    llm = ScriptedLLM(BAD_ARGUMENTS[bad], reply("sorry"))
    with YiemAgent(llm_call=llm, tools=[echo_tool()]) as agent:
        agent.prompt("go", WAIT)
        result = result_of(agent)
        assert result.is_error and result.tool_call_id == "c"
        assert any(word in result.content[0].text for word in ("not valid JSON", "cannot be used"))
        still_works(agent, tmp_path / "s.json")
        # the history is sendable to the other provider too
        body = context_to_anthropic(AgentContext("s", agent.messages, agent.tools))
        json.dumps(body, allow_nan=False)
        assert len(json.dumps(llm.requests[-1].to_dict())) < 100_000


def test_a_deep_but_allowed_argument_still_reaches_the_tool() -> None:
    seen: list[Any] = []
    tool = AgentTool(
        "deep",
        "Deep",
        "takes anything",
        {"type": "object"},
        lambda _i, args, _s, _p: seen.append(args) or AgentToolResult("ok"),
    )
    args = nested(MAX_JSON_DEPTH - 1)
    llm = ScriptedLLM(AssistantMessage([AgentToolCall("c", "deep", args)]), reply("ok"))
    with YiemAgent(llm_call=llm, tools=[tool]) as agent:
        agent.prompt("go", WAIT)
        assert not result_of(agent).is_error and seen == [args]
    assert argument_problem(nested(MAX_JSON_DEPTH)) is not None


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"name": "loop"}
    value["self"] = value
    return value


BAD_DETAILS = {
    "datetime": ({"when": datetime.datetime(2026, 11, 30, 12, 0)}, {"when": "2026-11-30T12:00:00"}),
    "set": ({"tags": {"b", "a"}}, {"tags": ["a", "b"]}),
    "object": ({"thing": Opaque()}, {"thing": "<Opaque thing>"}),
    "cycle": (cyclic(), {"name": "loop", "self": "<a cycle: this value contains itself>"}),
    "nan": ({"score": math.inf, 3: (1, 2)}, {"score": "inf", "3": [1, 2]}),
}


@pytest.mark.parametrize("bad", list(BAD_DETAILS), ids=list(BAD_DETAILS))
def test_details_that_are_not_json_are_converted_and_the_next_save_works(bad: str, tmp_path: Path) -> None:
    details, expected = BAD_DETAILS[bad]
    tool = AgentTool(
        "odd",
        "Odd",
        "odd details",
        {"type": "object"},
        lambda *_: AgentToolResult([TextContent("ok")], details),
    )
    llm = ScriptedLLM(AssistantMessage([AgentToolCall("c", "odd", {})]), reply("done"))
    with YiemAgent(llm_call=llm, tools=[tool]) as agent:
        agent.prompt("go", WAIT)
        assert result_of(agent).details == expected
        still_works(agent, tmp_path / "s.json")


def test_details_nested_beyond_the_limit_are_cut_with_a_note() -> None:
    converted = json_ready({"deep": nested(5000), "when": datetime.date(2026, 1, 1)})
    text = json.dumps(converted)
    assert "levels deep: not kept" in text and "2026-01-01" in text
    plain = {"a": [1, 2.5, None, "x"]}
    assert json_ready(plain) is plain  # JSON-ready details are not copied


def test_an_error_text_echoes_a_few_kb_of_a_huge_argument() -> None:
    huge = "x" * 10_000_000
    llm = ScriptedLLM(
        AssistantMessage([AgentToolCall("c", "echo", {"text": 5, "pad": huge})]),
        AssistantMessage([AgentToolCall("d", "echo", "{" + huge)]),
        reply("ok"),
    )
    with YiemAgent(llm_call=llm, tools=[echo_tool()]) as agent:
        agent.prompt("go", WAIT)
        errors = [m.content[0].text for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert len(errors) == 2
    for text in errors:
        assert len(text) < MAX_ECHO_CHARS + 1000 and "more characters not shown" in text

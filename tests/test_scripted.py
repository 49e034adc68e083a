"""``ScriptedModel``: replies in order, in every documented form, from Python or a file (a saved
session replays the assistant's side); bad scripts are refused up front, naming the reply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yiemagent import (
    AgentToolCall,
    AssistantMessage,
    MessageUpdateEvent,
    TextContent,
    ThinkingContent,
    YiemAgent,
    function_tool,
)
from yiemagent.scripted import ScriptedModel, ScriptError, ScriptExhaustedError


def test_replies_come_in_order_in_every_form() -> None:
    given = AssistantMessage(content=[TextContent("given")])
    model = ScriptedModel([
        "plain text",
        {"text": "calling", "thinking": "hmm", "tool_calls": [{"name": "t", "arguments": {"a": 1}},
                                                              {"name": "u", "id": "mine"}]},
        {"content": [{"type": "text", "text": "as dict"}], "stop_reason": "length"},
        given,
        lambda request: f"saw {len(request['messages'])} messages",
        {"error_message": "rate limited"},
    ])
    first = model({"messages": []})
    assert first.content == [TextContent("plain text")] and first.stop_reason == "stop"
    second = model({})
    assert second.content == [ThinkingContent("hmm"), TextContent("calling"),
                              AgentToolCall("call_2_1", "t", {"a": 1}), AgentToolCall("mine", "u", {})]
    assert second.stop_reason == "toolUse"
    assert model({}).stop_reason == "length"
    assert model({}).content == given.content
    assert model({"messages": [1, 2]}).content == [TextContent("saw 2 messages")]
    error = model({})
    assert error.stop_reason == "error" and error.error_message == "rate limited"
    assert model.calls == 6 and len(model.requests) == 6
    with pytest.raises(ScriptExhaustedError, match="has 6 replies"):
        model({})


def test_text_streams_word_by_word_to_on_update() -> None:
    updates: list[MessageUpdateEvent] = []
    ScriptedModel(["It is  noon."])({}, on_update=updates.append)
    assert [u.delta for u in updates] == ["It ", "is  ", "noon."]
    assert all(u.kind == "text" for u in updates)
    quiet: list[MessageUpdateEvent] = []
    ScriptedModel(["x y"], stream=False)({}, on_update=quiet.append)
    assert quiet == []


@pytest.mark.parametrize(("reply", "says"), [
    (42, "reply 1: a reply must be a string or an object"),
    ({"txt": "x"}, "unknown key(s) 'txt'"),
    ({"tool_calls": [{"arguments": {}}]}, "must be an object with a \"name\""),
    ({"tool_calls": [{"name": "t", "args": {}}]}, "unknown tool-call key(s) args"),
    ({"tool_calls": "t"}, "\"tool_calls\" must be a list"),
    ({"role": "user", "content": []}, "a reply is the assistant's"),
])
def test_bad_replies_are_refused_when_the_script_is_made(reply: Any, says: str) -> None:
    with pytest.raises(ScriptError) as info:
        ScriptedModel([reply])
    assert says in str(info.value)


def test_a_file_holds_a_list_or_an_object_of_replies(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(["a", {"text": "b"}]), encoding="utf-8")
    assert [m({}).content for m in [ScriptedModel.from_file(listed)] for _ in range(2)] == [
        [TextContent("a")], [TextContent("b")]]
    wrapped = tmp_path / "object.json"
    wrapped.write_text(json.dumps({"replies": ["c"]}), encoding="utf-8")
    assert ScriptedModel.from_file(wrapped)({}).content == [TextContent("c")]


@pytest.mark.parametrize(("text", "says"), [
    ("[1,", "is not valid JSON"),
    ('{"x": NaN}', "is not valid JSON"),
    ('"just text"', "must be a JSON list of replies"),
    ('[{"text": "ok"}, {"bad": 1}]', "reply 2"),
])
def test_bad_files_say_what_is_wrong(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        ScriptedModel.from_file(path)
    assert says in str(info.value) and str(path) in str(info.value)
    with pytest.raises(ScriptError, match="cannot read"):
        ScriptedModel.from_file(tmp_path / "missing.json")


def test_a_saved_session_replays_the_conversation(tmp_path: Path) -> None:
    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first.
            b: The second.
        """
        return a + b

    original = ScriptedModel([{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 40}}]},
                              "It is 42."])
    with YiemAgent(llm_call=original, tools=[add]) as agent:
        agent.prompt("2 + 40?", timeout=10)
        agent.save(tmp_path / "session.json")
        history = agent.messages
    replay = ScriptedModel.from_file(tmp_path / "session.json")
    with YiemAgent(llm_call=replay, tools=[add]) as agent:
        answer = agent.prompt("2 + 40?", timeout=10)
        assert answer.content == [TextContent("It is 42.")]
        assert [m.to_dict()["role"] for m in agent.messages] == [
            m.to_dict()["role"] for m in history]
        assert agent.messages[2].content == history[2].content  # the tool ran again

"""The default OpenAI formatting: wire shapes, image placement, and the per-agent caches."""

from __future__ import annotations

from typing import Any

from yiemagent import (
    AgentContext,
    AgentState,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolResultMessage,
    UserMessage,
    format_msg_for_llm,
    prepare_context,
)


def tool(name: str) -> AgentTool:
    return AgentTool(name, name, f"{name} tool", {"type": "object"}, lambda *_: AgentToolResult("x"))


def roles(request: dict[str, Any]) -> list[str]:
    return [m["role"] for m in request["messages"]]


def test_images_from_tool_results_follow_the_whole_run_of_tool_messages() -> None:
    calls = AssistantMessage([AgentToolCall("c1", "shot", {}), AgentToolCall("c2", "shot", {})])
    history = [
        UserMessage("screenshots please"),
        calls,
        ToolResultMessage("c1", "shot", [TextContent("first"), ImageContent("AAA", "image/png")]),
        ToolResultMessage("c2", "shot", [ImageContent("BBB", "image/jpeg")]),
        AssistantMessage([TextContent("two screenshots")]),
    ]
    request = format_msg_for_llm(AgentContext("", history))
    assert roles(request) == ["user", "assistant", "tool", "tool", "user", "user", "assistant"]
    first_images = request["messages"][4]["content"]
    assert first_images[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}
    assert request["messages"][3]["content"] == [{"type": "text", "text": "(see attached image)"}]


def test_images_are_placed_the_same_way_when_converted_turn_by_turn() -> None:
    state = AgentState("sys")
    calls = AssistantMessage([AgentToolCall("c1", "shot", {}), AgentToolCall("c2", "shot", {})])
    state.messages += [UserMessage("go"), calls]
    format_msg_for_llm(prepare_context(state))  # caches the first two messages
    state.messages += [
        ToolResultMessage("c1", "shot", [ImageContent("AAA")]),
        ToolResultMessage("c2", "shot", [TextContent("no image")]),
    ]
    request = format_msg_for_llm(prepare_context(state))
    assert roles(request) == ["system", "user", "assistant", "tool", "tool", "user"]


def test_the_cache_notices_a_history_changed_in_the_middle() -> None:
    state = AgentState("sys")
    state.messages += [UserMessage("one"), AssistantMessage([TextContent("two")]), UserMessage("three")]
    format_msg_for_llm(prepare_context(state))
    state.messages[1] = AssistantMessage([TextContent("edited")])
    request = format_msg_for_llm(prepare_context(state))
    assert request["messages"][2] == {"role": "assistant", "content": "edited"}
    assert len(request["messages"]) == 4


def test_requests_are_independent_of_later_turns() -> None:
    state = AgentState("sys")
    state.messages.append(UserMessage("one"))
    first = format_msg_for_llm(prepare_context(state))
    state.messages.append(AssistantMessage([TextContent("two")]))
    second = format_msg_for_llm(prepare_context(state))
    assert len(first["messages"]) == 2 and len(second["messages"]) == 3


def test_the_tools_array_follows_changes_to_the_tools() -> None:
    state = AgentState("sys", tools=[tool("a")])
    state.messages.append(UserMessage("hi"))
    first = format_msg_for_llm(prepare_context(state))
    state.tools["b"] = tool("b")
    second = format_msg_for_llm(prepare_context(state))
    state.tools["a"] = AgentTool(
        "a", "a", "changed description", {"type": "object"}, lambda *_: AgentToolResult("x")
    )  # same name, a new object
    third = format_msg_for_llm(prepare_context(state))
    assert [t["function"]["name"] for t in first["tools"]] == ["a"]
    assert [t["function"]["name"] for t in second["tools"]] == ["a", "b"]
    assert third["tools"][0]["function"]["description"] == "changed description"
    del state.tools["a"], state.tools["b"]
    assert "tools" not in format_msg_for_llm(prepare_context(state))


def test_assistant_tool_calls_go_out_as_json_strings_and_bad_json_unchanged() -> None:
    msg = AssistantMessage(
        [
            TextContent("let me look"),
            AgentToolCall("c1", "t", {"q": "é"}),
            AgentToolCall("c2", "t", "{not json"),
        ]
    )
    wire = format_msg_for_llm(AgentContext("", [msg]))["messages"][0]
    assert wire["content"] == "let me look"
    assert [c["function"]["arguments"] for c in wire["tool_calls"]] == ['{"q": "é"}', "{not json"]


def test_the_request_carries_its_context_for_other_providers() -> None:
    ctx = AgentContext("sys", [UserMessage("hi")])
    request = format_msg_for_llm(ctx)
    assert request.context is ctx
    assert request == {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "sys"}]},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ]
    }


def test_a_request_and_a_run_config_pickle_and_copy_without_their_cache() -> None:
    """A request (or the run's config) sent to another process, or deep-copied, reads the same;
    the per-agent cache behind its spec view (and that cache's lock) is not part of it."""
    import copy
    import pickle

    from yiemagent.core import RunConfig
    from yiemagent.core._request import SpecFormatter

    formatter = SpecFormatter()
    # (no tools: a tool's compiled argument validator does not pickle, with or without a cache)
    request = formatter(AgentContext("Be brief.", [UserMessage("hi")], {}))
    expected = request.to_dict()
    for other in (pickle.loads(pickle.dumps(request)), copy.deepcopy(request)):
        assert other.to_dict() == expected and other["messages"] == expected["messages"]
    config = RunConfig(llm_call=print, format_msg_for_llm=formatter)
    config.meter.tokens([UserMessage("counted")])  # the context meter's counts are a cache too
    for other_config in (pickle.loads(pickle.dumps(config)), copy.deepcopy(config)):
        assert other_config.max_turns == 50 and other_config.meter is not config.meter
        assert other_config.meter.tokens([UserMessage("counted")]) == config.meter.tokens(
            [UserMessage("counted")]
        )

"""The runtime end to end: spec section 16, terminate, errors, hooks, max_turns, events."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, call, echo_tool, reply, text

from yiemagent import (
    AbortSignal,
    AgentEvent,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    MessageEndEvent,
    MessageUpdateEvent,
    TextContent,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
)


def weather_tool() -> AgentTool:
    return AgentTool(
        "getWeather",
        "Weather Lookup",
        "Fetch current weather",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        lambda _i, a, _s, _p: AgentToolResult([TextContent(f"Weather in {a['city']}: Sunny, 22°C")]),
    )


def test_spec_section_16_end_to_end() -> None:
    def first(request: dict[str, Any]) -> AssistantMessage:
        assert request["messages"] == [
            {"role": "system", "content": [{"type": "text", "text": "You are a helpful assistant."}]},
            {"role": "user", "content": [{"type": "text", "text": "What's the weather in Tokyo?"}]},
        ]
        assert [t["function"]["name"] for t in request["tools"]] == ["getWeather"]
        return AssistantMessage(
            content=[
                {
                    "type": "tool_calls",
                    "tool_calls": [{"id": "call_1", "name": "getWeather", "arguments": {"city": "Tokyo"}}],
                }
            ]
        )

    def second(request: dict[str, Any]) -> AssistantMessage:
        msgs = request["messages"]
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
        assert msgs[2]["content"] is None
        assert msgs[2]["tool_calls"] == [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "getWeather", "arguments": '{"city": "Tokyo"}'},
            }
        ]
        assert msgs[3] == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": "Weather in Tokyo: Sunny, 22°C"}],
        }
        return reply("The weather in Tokyo is sunny, 22°C.")

    llm = ScriptedLLM(first, second)
    with YiemAgent(
        system_prompt="You are a helpful assistant.", tools=[weather_tool()], llm_call=llm
    ) as agent:
        response = agent.prompt("What's the weather in Tokyo?", timeout=WAIT)
        assert text(response) == "The weather in Tokyo is sunny, 22°C."
        assert len(llm.requests) == 2
        history = agent._state.messages
        assert [type(m).__name__ for m in history] == [
            "UserMessage",
            "AssistantMessage",
            "ToolResultMessage",
            "AssistantMessage",
        ]
        assert isinstance(history[2], ToolResultMessage) and history[2].tool_call_id == "call_1"


def test_default_system_prompt_and_constructor_checks() -> None:
    with pytest.raises(TypeError, match="llm_call"):
        YiemAgent()
    with pytest.raises(TypeError, match="llm_call"):
        YiemAgent(llm_call="not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_execution"):
        YiemAgent(llm_call=ScriptedLLM(), tool_execution="sideways")  # type: ignore[arg-type]
    llm = ScriptedLLM()
    with YiemAgent(llm_call=llm) as agent:
        assert agent.prompt("hi", timeout=WAIT).content == [TextContent("echo: hi")]
        assert llm.requests[0]["messages"][0]["content"][0]["text"] == "You are helpful assistant."
        assert "tools" not in llm.requests[0]


def test_tools_are_copied_at_construction() -> None:
    tools = {"echo": echo_tool()}
    with YiemAgent(llm_call=ScriptedLLM(), tools=tools) as agent:
        tools["other"] = echo_tool("other")
        assert list(agent.tools) == ["echo"]


def test_terminate_builds_final_response() -> None:
    done = AgentTool(
        "finish",
        "Finish",
        "Ends the task",
        {"type": "object"},
        lambda *_: AgentToolResult([TextContent("deployed v2")], terminate=True),
    )
    llm = ScriptedLLM(AssistantMessage(content=[call("finish", {}).content[0]], model="m1"))
    with YiemAgent(llm_call=llm, tools=[done]) as agent:
        response = agent.prompt("deploy", timeout=WAIT)
        assert response.stop_reason == "tool_use_terminated"
        assert [b.text for b in response.content] == ["Tool execution completed.", "deployed v2"]
        assert response.error_message is None and response.model == "m1"
        assert len(llm.requests) == 1
        assert isinstance(agent.messages[-1], ToolResultMessage)  # the made-up response is not history


def test_terminate_with_failed_call_sets_error_message() -> None:
    done = AgentTool(
        "finish",
        "Finish",
        "Ends",
        {"type": "object"},
        lambda *_: AgentToolResult([TextContent("partial")], terminate=True),
    )
    with YiemAgent(
        llm_call=ScriptedLLM(call("finish", {})),
        tools=[done],
        after_tool_call=lambda ctx, sig: {"is_error": True},
    ) as agent:
        response = agent.prompt("go", timeout=WAIT)
        assert response.stop_reason == "tool_use_terminated"
        assert response.error_message == "One or more tool calls failed"


def test_llm_call_raising_gives_error_response_then_agent_answers_again() -> None:
    def boom(_request: dict[str, Any]) -> AssistantMessage:
        raise ConnectionError("provider unreachable")

    with YiemAgent(llm_call=ScriptedLLM(boom)) as agent:
        failed = agent.prompt("first", timeout=WAIT)
        assert failed.stop_reason == "error"
        assert "ConnectionError" in (failed.error_message or "")
        assert "provider unreachable" in (failed.error_message or "")
        assert agent.prompt("second", timeout=WAIT).content == [TextContent("echo: second")]


def test_llm_call_returning_wrong_type_is_an_error_response() -> None:
    with YiemAgent(llm_call=ScriptedLLM(lambda req: "plain text")) as agent:  # type: ignore[arg-type,return-value]
        response = agent.prompt("x", timeout=WAIT)
        assert response.stop_reason == "error"
        assert "AssistantMessage" in (response.error_message or "")


def test_before_hook_raising_gives_error_result_and_run_continues() -> None:
    def hook(ctx: Any, signal: Any) -> None:
        raise PermissionError("policy service down")

    llm = ScriptedLLM(call("echo", {"text": "a"}), reply("done"))
    with YiemAgent(llm_call=llm, tools=[echo_tool()], before_tool_call=hook) as agent:
        assert text(agent.prompt("go", timeout=WAIT)) == "done"
        result = agent.messages[2]
        assert isinstance(result, ToolResultMessage) and result.is_error
        assert "policy service down" in text(result)  # type: ignore[arg-type]
        assert "policy service down" in llm.requests[1]["messages"][-1]["content"][0]["text"]


def test_prepare_context_raising_gives_error_response() -> None:
    def bad_prepare(state: Any) -> Any:
        raise KeyError("missing")

    with YiemAgent(llm_call=ScriptedLLM(), prepare_context=bad_prepare) as agent:
        response = agent.prompt("x", timeout=WAIT)
        assert response.stop_reason == "error"
        assert "prepare_context" in (response.error_message or "")


def test_custom_prepare_context_and_format_are_used() -> None:
    seen: list[Any] = []

    def fmt(ctx: Any) -> dict[str, Any]:
        seen.append(ctx)
        return {"prompt": ctx.system_prompt + "|" + str(len(ctx.messages))}

    llm = ScriptedLLM(lambda req: reply(req["prompt"]))
    with YiemAgent(llm_call=llm, system_prompt="S", format_msg_for_llm=fmt) as agent:
        assert text(agent.prompt("x", timeout=WAIT)) == "S|1"
        assert len(seen) == 1


def test_max_turns_stops_a_runaway_loop_after_running_last_calls() -> None:
    llm = ScriptedLLM(default=lambda req: call("echo", {"text": "again"}))
    with YiemAgent(llm_call=llm, tools=[echo_tool()], max_turns=3) as agent:
        response = agent.prompt("loop", timeout=WAIT)
        assert response.stop_reason == "max_turns"
        assert len(llm.requests) == 3
        assert isinstance(agent.messages[-1], ToolResultMessage)  # the last turn's call ran
        assert sum(isinstance(m, ToolResultMessage) for m in agent.messages) == 3


def test_events_follow_the_documented_order() -> None:
    events: list[AgentEvent] = []
    llm = ScriptedLLM(call("echo", {"text": "a"}), reply("done"))
    with YiemAgent(llm_call=llm, tools=[echo_tool()], agent_event_sink=events.append) as agent:
        agent.prompt("go", timeout=WAIT)
    assert [e.event_type for e in events] == [
        "agent_start",
        "message_start",
        "message_end",  # the user message
        "turn_start",
        "message_start",
        "message_end",  # the assistant reply
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",  # the tool result
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert len(events[-1].messages) == 4  # user, reply, tool result, answer  # type: ignore[attr-defined]


def test_streaming_updates_and_signal_reach_llm_call_when_declared() -> None:
    events: list[AgentEvent] = []
    got: dict[str, Any] = {}

    def streaming(request: dict[str, Any], *, on_update: Any, signal: AbortSignal) -> AssistantMessage:
        got["signal"] = signal
        on_update(MessageUpdateEvent("text", "Hel"))
        on_update(MessageUpdateEvent("text", "lo"))
        return reply("Hello")

    with YiemAgent(llm_call=streaming, agent_event_sink=events.append) as agent:
        assert text(agent.prompt("hi", timeout=WAIT)) == "Hello"
    assert isinstance(got["signal"], AbortSignal)
    kinds = [e.event_type for e in events]
    start = kinds.index("turn_start")
    assert kinds[start : start + 5] == [
        "turn_start",
        "message_start",
        "message_update",
        "message_update",
        "message_end",
    ]
    assert isinstance(events[start + 4], MessageEndEvent)


def test_plain_llm_call_gets_no_keywords() -> None:
    def strict(request: dict[str, Any]) -> AssistantMessage:
        return reply("ok")

    with YiemAgent(llm_call=strict, agent_event_sink=lambda e: None) as agent:
        assert text(agent.prompt("hi", timeout=WAIT)) == "ok"


def test_sink_raising_does_not_break_the_run() -> None:
    def sink(event: AgentEvent) -> None:
        raise RuntimeError("ui crashed")

    with YiemAgent(
        llm_call=ScriptedLLM(call("echo", {"text": "a"}), reply("done")),
        tools=[echo_tool()],
        agent_event_sink=sink,
    ) as agent:
        assert text(agent.prompt("go", timeout=WAIT)) == "done"


def test_messages_in_openai_form_with_images_and_bad_inputs() -> None:
    llm = ScriptedLLM(default=lambda req: reply(str(req["messages"][-1]["content"])))
    with YiemAgent(llm_call=llm) as agent:
        agent.run_agent(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
                ],
            }
        )
        agent.take_response(WAIT)
        assert llm.requests[0]["messages"][-1]["content"][1] == {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64,iVBOR"},
        }
        with pytest.raises(TypeError, match="string, a UserMessage or a dict"):
            agent.run_agent(42)
        with pytest.raises(ValueError, match="role"):
            agent.run_agent({"role": "assistant", "content": "x"})
        with pytest.raises(ValueError, match="content"):
            agent.run_agent({"role": "user"})
        agent.run_agent(UserMessage("typed"))
        assert agent.take_response(WAIT).content == [TextContent("[{'type': 'text', 'text': 'typed'}]")]


def test_written_tool_becomes_callable_next_turn_via_added_tool_names() -> None:
    class Store:
        def __init__(self) -> None:
            self.tools: dict[str, AgentTool] = {}

    store = Store()
    new_tool = echo_tool("fresh")

    def adder(*_: Any) -> AgentToolResult:
        store.tools["fresh"] = new_tool
        return AgentToolResult([TextContent("added fresh")], {"addedToolNames": ["fresh"]})

    maker = AgentTool("maker", "Maker", "Adds a tool", {"type": "object"}, adder)
    llm = ScriptedLLM(call("maker", {}), call("fresh", {"text": "hi"}, "call_2"), reply("ok"))
    with YiemAgent(llm_call=llm, tools=[maker], tool_store=store) as agent:
        assert text(agent.prompt("make", timeout=WAIT)) == "ok"
        assert "fresh" in agent.tools
        assert [t["function"]["name"] for t in llm.requests[1]["tools"]] == ["maker", "fresh"]
        result = agent.messages[4]
        assert isinstance(result, ToolResultMessage) and not result.is_error
        assert text(result) == "fresh: hi"  # type: ignore[arg-type]


def test_parallel_agent_runs_batch_concurrently() -> None:
    barrier = threading.Barrier(3, timeout=WAIT)

    def meet(_i: str, args: dict[str, Any], _s: Any, _p: Any) -> AgentToolResult:
        barrier.wait()  # only passes if all three calls run at once
        return AgentToolResult([TextContent(args["text"])])

    tool = AgentTool(
        "meet", "Meet", "Waits for the others", {"type": "object"}, meet, parallel_tool_execute=True
    )
    batch = AssistantMessage(content=[call("meet", {"text": str(i)}, f"c{i}").content[0] for i in range(3)])
    with YiemAgent(
        llm_call=ScriptedLLM(batch, reply("met")), tools=[tool], tool_execution="parallel"
    ) as agent:
        assert text(agent.prompt("go", timeout=WAIT)) == "met"
        results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
        assert [m.tool_call_id for m in results] == ["c0", "c1", "c2"]
        assert not any(m.is_error for m in results)


def test_the_agents_retry_cap_reaches_an_llm_call_that_declares_it() -> None:
    seen: list[Any] = []

    def capped(request: dict[str, Any], *, max_retry_delay_ms: float | None = None) -> AssistantMessage:
        seen.append(max_retry_delay_ms)
        return reply("ok")

    with YiemAgent(llm_call=capped, max_retry_delay_ms=2500) as agent:
        agent.prompt("x", timeout=WAIT)
    with YiemAgent(llm_call=capped) as agent:  # no cap set: the client's own applies
        agent.prompt("x", timeout=WAIT)
    assert seen == [2500, None]


def test_constructor_checks_tool_options_and_history_up_front() -> None:
    with pytest.raises(ValueError, match="max_parallel_tools"):
        YiemAgent(llm_call=ScriptedLLM(), max_parallel_tools=0)
    with pytest.raises(ValueError, match="tool_timeout_s"):
        YiemAgent(llm_call=ScriptedLLM(), tool_timeout_s=-1)
    with pytest.raises(TypeError, match="AgentMessage"):
        YiemAgent(llm_call=ScriptedLLM(), messages=["hello"])  # type: ignore[list-item]
    history = [UserMessage("hi", timestamp=1), reply("hello")]
    with YiemAgent(llm_call=ScriptedLLM(), messages=[m.to_dict() for m in history]) as agent:
        assert agent.messages == history


def test_state_tracks_pending_calls_and_the_last_error() -> None:
    seen: list[set[str]] = []
    holder: dict[str, YiemAgent] = {}

    def look(*_: Any) -> AgentToolResult:
        seen.append(set(holder["agent"]._state.pending_tool_calls))
        return AgentToolResult([TextContent("ok")])

    def boom(_request: dict[str, Any]) -> AssistantMessage:
        raise RuntimeError("model down")

    tool = AgentTool("look", "Look", "Looks", {"type": "object"}, look)
    llm = ScriptedLLM(call("look", {}, "call_9"), reply("done"), boom)
    with YiemAgent(llm_call=llm, tools=[tool]) as agent:
        holder["agent"] = agent
        agent.prompt("one", timeout=WAIT)
        assert seen == [{"call_9"}] and agent._state.pending_tool_calls == set()
        assert agent._state.error_message is None
        agent.prompt("two", timeout=WAIT)
        assert "model down" in (agent._state.error_message or "")
        agent.prompt("three", timeout=WAIT)
        assert agent._state.error_message is None

"""OpenAIChatClient against the real llama-cpp-python server (``python -m llama_cpp.server``) running
SmolLM2-135M with ``--chat_format chatml-function-calling``: a server we did not write.

The server is started once for the module as a subprocess on a free loopback port, waited for
with a bounded poll of ``/v1/models``, and killed at the end. Nothing is mocked; the ``local``
extra (installed by ``scripts/setup.sh``) must be there, or these tests fail.

What this server does, and the tests pin down: it accepts our wire form (plain-string content,
assistant tool calls with ``content: ""``); it needs ``tool_choice`` to use tools at all; its
reply to a tool call carries ``tool_calls`` and a ``function_call`` copy (read as one call);
and it answers a streamed request with tools with an empty stream when its model calls a tool
(the client then asks again without streaming), or with an empty message when it does not.
Its chat template drops ``tool`` messages, so its model never sees a tool's result: the round
trip below checks that the answer comes, not what it says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yiemagent import AgentTool, AgentToolCall, AgentToolResult, TextContent, YiemAgent
from yiemagent.core._context import format_msg_for_llm
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._tools import AgentContext
from yiemagent.llm import HttpOptions, OpenAIChatClient

CALL_OPTIONS: dict[str, Any] = {
    "api_key_env": None,
    "extra_body": {"temperature": 0, "max_tokens": 48},
    "http": HttpOptions(timeout=120.0, deadline_s=180.0, max_retries=1, retry_base_delay_s=0.01),
}
TIME_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def get_time_tool() -> AgentTool:
    """A getTime with a fixed answer, so the round trip checks the wire, not the clock."""
    return AgentTool(
        "getTime",
        "Time",
        "Get the current local time for a city.",
        TIME_SCHEMA,
        lambda _id, args, _s, _p: AgentToolResult(f"Current time in {args['city']}: 09:41"),
    )


def test_a_full_tool_round_trip_through_the_real_server(server_url: str) -> None:
    forced = OpenAIChatClient(
        "smollm2",
        server_url,
        **CALL_OPTIONS,
        tool_choice={"type": "function", "function": {"name": "getTime"}},
    )
    plain = OpenAIChatClient("smollm2", server_url, **CALL_OPTIONS, tool_choice=None)

    def llm_call(request: Mapping[str, Any]) -> AssistantMessage:
        # Forced on the question, so the call is certain; left free after the result (forcing
        # it then would only call the tool again).
        last = request["messages"][-1]["role"]
        return (forced if last == "user" else plain)(request)

    with YiemAgent(llm_call=llm_call, tools=[get_time_tool()]) as agent:
        reply = agent.prompt("What time is it in Tokyo?", timeout=300)
        history = list(agent.messages)
    assert reply.stop_reason in ("stop", "length"), reply.error_message  # max_tokens is 48
    assert [type(m) for m in history] == [UserMessage, AssistantMessage, ToolResultMessage, AssistantMessage]
    calls = [b for b in history[1].content if isinstance(b, AgentToolCall)]
    assert len(calls) == 1  # the function_call copy beside tool_calls is not a second call
    assert calls[0].name == "getTime" and calls[0].arguments == {"city": "Tokyo"}
    assert history[2].content == [TextContent("Current time in Tokyo: 09:41")]
    assert not history[2].is_error
    assert "".join(b.text for b in reply.content if isinstance(b, TextContent)).strip()


def test_auto_tool_choice_is_accepted_by_the_server(server_url: str) -> None:
    client = OpenAIChatClient("smollm2", server_url, **CALL_OPTIONS)  # tool_choice="auto"
    request = format_msg_for_llm(
        AgentContext("", [UserMessage("What time is it in Tokyo?")], [get_time_tool()])
    )
    reply = client(request)
    # The server's model picks between a call and a message under its own grammar; which one
    # it picks is up to it (its message branch allows only an empty text), but either way the
    # reply is well-formed and holds no made-up second call.
    calls = [b for b in reply.content if isinstance(b, AgentToolCall)]
    assert reply.error_message is None
    assert [c.name for c in calls] in ([], ["getTime"])
    assert reply.stop_reason == ("toolUse" if calls else "stop")


def test_a_streamed_text_reply(server_url: str) -> None:
    client = OpenAIChatClient("smollm2", server_url, stream=True, **CALL_OPTIONS)
    events: list[MessageUpdateEvent] = []
    request = format_msg_for_llm(AgentContext("You are terse.", [UserMessage("Say hello.")], []))
    reply = client(request, on_update=events.append)
    text = "".join(b.text for b in reply.content if isinstance(b, TextContent))
    assert reply.stop_reason in ("stop", "length") and text.strip()
    assert "".join(e.delta for e in events if e.kind == "text") == text
    assert len(events) > 1  # it really came in pieces


def test_a_streamed_request_with_tools_falls_back_to_no_streaming(server_url: str) -> None:
    client = OpenAIChatClient("smollm2", server_url, stream=True, **CALL_OPTIONS)
    # With this prompt the model calls the tool (decoding is greedy: it always does).
    prompt = "You are a helpful assistant. Use the tools when they help; answer briefly."
    request = format_msg_for_llm(
        AgentContext(prompt, [UserMessage("What time is it in Tokyo?")], [get_time_tool()])
    )
    reply = client(request)
    # This server sends no events for a tool call; the client asked again without streaming.
    assert client.stream is False
    calls = [b for b in reply.content if isinstance(b, AgentToolCall)]
    assert [c.name for c in calls] == ["getTime"] and reply.stop_reason == "toolUse"


def test_a_streamed_forced_tool_call_is_assembled(server_url: str) -> None:
    client = OpenAIChatClient(
        "smollm2",
        server_url,
        stream=True,
        **CALL_OPTIONS,
        tool_choice={"type": "function", "function": {"name": "getTime"}},
    )
    events: list[MessageUpdateEvent] = []
    request = format_msg_for_llm(
        AgentContext("", [UserMessage("What time is it in Tokyo?")], [get_time_tool()])
    )
    reply = client(request, on_update=events.append)
    calls = [b for b in reply.content if isinstance(b, AgentToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("getTime", {"city": "Tokyo"})]
    assert reply.stop_reason == "toolUse"
    assert any(e.kind == "tool_call" for e in events)


def test_a_context_overflow_says_what_to_do_and_the_agent_recovers(server_url: str) -> None:
    client = OpenAIChatClient("smollm2", server_url, **CALL_OPTIONS, tool_choice=None)
    with YiemAgent(llm_call=client) as agent:
        overflow = agent.prompt("Summarise this: " + "lorem ipsum dolor " * 3000, timeout=300)
        assert overflow.stop_reason == "error"
        assert "context" in (overflow.error_message or "")  # the server's own words
        assert "agent.reset()" in (overflow.error_message or "")
        # The same history would fail again: the hint's first remedy makes the agent work.
        assert agent.prompt("Hello", timeout=300).stop_reason == "error"
        agent.reset()
        answer = agent.prompt("Hello", timeout=300)
    assert answer.stop_reason in ("stop", "length"), answer.error_message

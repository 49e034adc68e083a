"""OpenAIChatClient against llama.cpp's own server (what people run as ``llama-server``, here
served by xllamacpp on loopback) running SmolLM2-135M: a server we did not write.

The server is started once for the session (``server_url``) as a subprocess on a free loopback
port with ``tests/chatml_tools.jinja`` as its chat template (ChatML with tools in the Hermes
form, as ``--jinja --chat-template-file`` takes it), waited for with a bounded poll of
``/v1/models``, and stopped at the end. Nothing is mocked.

What this server does, and the tests pin down: it takes our wire form (plain-string content,
assistant tool calls, ``tool`` results) and its template shows the model each result (the
llama-cpp-python server this replaces dropped them); it streams text as SSE deltas, also when
tools are offered; it answers ``tool_choice`` and ``response_format`` with a schema; it lists
its context window, which an agent with ``context_window="auto"`` reads; and a request longer
than its context is refused with its own words. A model of 135M parameters does not start a
tool call of its own on this server (it answers in text), so the calls here come from the
scripted half of each conversation: what is checked is what crosses the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import requests

from yiemagent import AgentTool, AgentToolCall, AgentToolResult, TextContent, YiemAgent
from yiemagent.core._context import format_msg_for_llm
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._tools import AgentContext
from yiemagent.llm import HttpOptions, OpenAIChatClient

pytestmark = pytest.mark.needs("local")

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


def server_root(server_url: str) -> str:
    return server_url.removesuffix("/v1")


def test_a_tool_round_trip_reaches_the_server_with_its_result(server_url: str) -> None:
    """The first reply (the call) is scripted; the answer after the tool's result comes from the
    server, which is sent the call and its result in the OpenAI form and shows both to its
    model through its chat template."""
    client = OpenAIChatClient("smollm2", server_url, **CALL_OPTIONS)
    sent: list[dict[str, Any]] = []

    def llm_call(request: Mapping[str, Any]) -> AssistantMessage:
        if request["messages"][-1]["role"] == "user":
            return AssistantMessage(
                [AgentToolCall("call_1", "getTime", {"city": "Tokyo"})], stop_reason="toolUse"
            )
        sent.append(client.build_body(request))
        return client(request)

    with YiemAgent(llm_call=llm_call, tools=[get_time_tool()]) as agent:
        reply = agent.prompt("What time is it in Tokyo?", timeout=300)
        history = list(agent.messages)
    assert reply.stop_reason in ("stop", "length"), reply.error_message  # max_tokens is 48
    assert [type(m) for m in history] == [UserMessage, AssistantMessage, ToolResultMessage, AssistantMessage]
    assert "".join(b.text for b in reply.content if isinstance(b, TextContent)).strip()
    (body,) = sent
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    assert body["messages"][2]["tool_calls"][0]["function"]["name"] == "getTime"
    rendered = requests.post(
        f"{server_root(server_url)}/apply-template",
        json={"messages": body["messages"], "tools": body["tools"]},
        timeout=60,
    ).json()["prompt"]
    assert '{"name": "getTime", "arguments": {"city": "Tokyo"}}' in rendered  # the call, and
    assert "<tool_response>\nCurrent time in Tokyo: 09:41\n</tool_response>" in rendered  # its result


def test_auto_and_forced_tool_choice_are_accepted_by_the_server(server_url: str) -> None:
    request = format_msg_for_llm(
        AgentContext("", [UserMessage("What time is it in Tokyo?")], [get_time_tool()])
    )
    for choice in ("auto", {"type": "function", "function": {"name": "getTime"}}):
        reply = OpenAIChatClient("smollm2", server_url, **CALL_OPTIONS, tool_choice=choice)(request)
        calls = [b for b in reply.content if isinstance(b, AgentToolCall)]
        assert reply.error_message is None
        assert [c.name for c in calls] in ([], ["getTime"])  # the model's choice; well formed either way
        assert reply.stop_reason in (("toolUse",) if calls else ("stop", "length"))


def test_a_streamed_text_reply(server_url: str) -> None:
    client = OpenAIChatClient("smollm2", server_url, stream=True, **CALL_OPTIONS)
    events: list[MessageUpdateEvent] = []
    request = format_msg_for_llm(AgentContext("You are terse.", [UserMessage("Say hello.")], []))
    reply = client(request, on_update=events.append)
    text = "".join(b.text for b in reply.content if isinstance(b, TextContent))
    assert reply.stop_reason in ("stop", "length") and text.strip()
    assert "".join(e.delta for e in events if e.kind == "text") == text
    assert len(events) > 1  # it really came in pieces


def test_a_streamed_request_with_tools_stays_streamed(server_url: str) -> None:
    """llama.cpp streams a reply to a request with tools as it streams any other (the
    llama-cpp-python server sent an empty stream, and the client had to ask again)."""
    client = OpenAIChatClient("smollm2", server_url, stream=True, **CALL_OPTIONS)
    events: list[MessageUpdateEvent] = []
    request = format_msg_for_llm(
        AgentContext("", [UserMessage("What time is it in Tokyo?")], [get_time_tool()])
    )
    reply = client(request, on_update=events.append)
    assert client.stream is True and reply.error_message is None
    streamed = "".join(e.delta for e in events if e.kind == "text")
    assert streamed == "".join(b.text for b in reply.content if isinstance(b, TextContent))


def test_the_server_lists_its_window_and_an_agent_reads_it(server_url: str) -> None:
    client = OpenAIChatClient("smollm2", server_url, **CALL_OPTIONS)
    assert client.listed_context_window() == 4096  # llama.cpp lists meta.n_ctx
    with YiemAgent(llm_call=client, context_window="auto") as agent:
        too_long = agent.prompt("Summarise this: " + "lorem ipsum dolor " * 3000, timeout=300)
        assert too_long.stop_reason == "context_overflow"  # refused before it was sent
        agent.reset()
        assert agent.prompt("Say hello.", timeout=300).stop_reason in ("stop", "length")


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

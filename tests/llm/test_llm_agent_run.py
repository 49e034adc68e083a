"""A full agent run through each provider client against a local server: a tool call, its result
sent back on the next request, and the final answer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from llm_helpers import (
    KEY,
    anthropic_client,
    anthropic_error,
    anthropic_message,
    assert_no_key,
    fast,
    leak_texts,
    openai_chunk,
    openai_client,
    openai_completion,
    openai_tool_call,
    weather_tool,
)
from llm_server import ScriptedServer, split_every, sse_bytes

from yiemagent.agent._agent import YiemAgent
from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._events import AgentEvent, MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage
from yiemagent.llm import LlmClient


def script_openai(server: ScriptedServer, stream: bool) -> None:
    if not stream:
        server.json(
            openai_completion(
                None,
                finish="tool_calls",
                tool_calls=[openai_tool_call("call_1", "getWeather", '{"city": "Paris"}')],
            )
        )
        server.json(openai_completion("It is sunny in Paris."))
        return
    server.sse(
        split_every(
            sse_bytes(
                [
                    openai_chunk(
                        {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "getWeather", "arguments": '{"city": '},
                                }
                            ],
                        }
                    ),
                    openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
                    openai_chunk({}, "tool_calls"),
                ],
                done=True,
            ),
            5,
        )
    )
    server.sse(
        split_every(
            sse_bytes(
                [
                    openai_chunk({"content": "It is sunny "}),
                    openai_chunk({"content": "in Paris."}, "stop"),
                ],
                done=True,
            ),
            5,
        )
    )


def script_anthropic(server: ScriptedServer, stream: bool) -> None:
    tool_use = {"type": "tool_use", "id": "call_1", "name": "getWeather", "input": {"city": "Paris"}}
    if not stream:
        server.json(anthropic_message([tool_use], stop_reason="tool_use"))
        server.json(anthropic_message([{"type": "text", "text": "It is sunny in Paris."}]))
        return
    start = {
        "type": "message_start",
        "message": {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }
    server.sse(
        split_every(
            sse_bytes(
                [
                    start,
                    {"type": "content_block_start", "index": 0, "content_block": {**tool_use, "input": {}}},
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'},
                    },
                    {"type": "content_block_stop", "index": 0},
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "tool_use"},
                        "usage": {"output_tokens": 9},
                    },
                    {"type": "message_stop"},
                ],
                named=True,
            ),
            7,
        )
    )
    server.sse(
        split_every(
            sse_bytes(
                [
                    start,
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "It is sunny in Paris."},
                    },
                    {"type": "content_block_stop", "index": 0},
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": 7},
                    },
                    {"type": "message_stop"},
                ],
                named=True,
            ),
            7,
        )
    )


def tool_result_sent(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    """The tool result in the second request, in the provider's wire form."""
    if provider == "openai":
        assert body["messages"][-2]["tool_calls"][0]["id"] == "call_1"
        return body["messages"][-1]  # type: ignore[no-any-return]
    assert body["messages"][-2]["content"][0]["type"] == "tool_use"
    return body["messages"][-1]["content"][0]  # type: ignore[no-any-return]


EXPECTED_RESULT = {
    "openai": {"role": "tool", "tool_call_id": "call_1", "content": "Sunny in Paris"},
    "anthropic": {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": [{"type": "text", "text": "Sunny in Paris"}],
        "is_error": False,
    },
}

CASES: list[tuple[str, Callable[[ScriptedServer, bool], None], Callable[..., LlmClient]]] = [
    ("openai", script_openai, openai_client),
    ("anthropic", script_anthropic, anthropic_client),
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(("provider", "script", "make_client"), CASES, ids=[c[0] for c in CASES])
def test_tool_call_then_final_answer(
    server: ScriptedServer, provider: str, script: Any, make_client: Any, stream: bool
) -> None:
    script(server, stream)
    events: list[AgentEvent] = []
    agent = YiemAgent(
        llm_call=make_client(server, stream=stream),
        tools=[weather_tool()],
        system_prompt="You are terse.",
        agent_event_sink=events.append,
    )
    try:
        reply = agent.prompt("Weather in Paris?", timeout=10)
    finally:
        agent.shutdown()

    assert reply.content == [TextContent("It is sunny in Paris.")]
    assert reply.stop_reason == "stop"
    assert reply.provider == provider
    assert len(server.requests) == 2
    assert tool_result_sent(provider, server.requests[1].body) == EXPECTED_RESULT[provider]

    history = agent.messages
    assert [type(m).__name__ for m in history] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ]
    first = history[1]
    assert isinstance(first, AssistantMessage)
    assert first.content == [AgentToolCall("call_1", "getWeather", {"city": "Paris"})]
    assert first.stop_reason == "toolUse"
    assert isinstance(history[2], ToolResultMessage) and not history[2].is_error

    updates = [e for e in events if isinstance(e, MessageUpdateEvent)]
    if stream:
        assert "".join(e.delta for e in updates if e.kind == "text") == "It is sunny in Paris."
        assert any(e.kind == "tool_call" and e.tool_call_id == "call_1" for e in updates)
    else:
        assert updates == []


@pytest.mark.parametrize(
    ("provider", "make_client"), [(c[0], c[2]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_provider_error_becomes_an_error_response(
    server: ScriptedServer, provider: str, make_client: Any
) -> None:
    body = (
        anthropic_error("authentication_error", "invalid x-api-key")
        if provider == "anthropic"
        else {
            "error": {
                "message": "Incorrect API key provided",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
    )
    server.json(body, status=401)
    agent = YiemAgent(llm_call=make_client(server), tools=[weather_tool()])
    try:
        reply = agent.prompt("Hello", timeout=10)
    finally:
        agent.shutdown()
    assert reply.stop_reason == "error"
    assert reply.error_message is not None
    assert "LlmError" in reply.error_message and "HTTP 401" in reply.error_message
    assert KEY not in reply.error_message
    assert len(server.requests) == 1


def test_aborting_the_agent_ends_a_slow_llm_call(server: ScriptedServer) -> None:
    release = threading.Event()
    server.json(openai_completion("too late"), wait=release)
    agent = YiemAgent(llm_call=openai_client(server), tools=[weather_tool()])
    try:
        agent.run_agent("Hello")
        assert server.wait_for_requests(1)
        agent.abort()
        reply = agent.take_response(10)
    finally:
        release.set()
        agent.shutdown()
    assert reply.stop_reason == "aborted"
    assert agent.messages[-1].role == "user"  # nothing half-answered entered the history


def test_the_agents_max_retry_delay_caps_the_clients_waits(server: ScriptedServer) -> None:
    server.json(
        {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
        status=429,
        headers={"Retry-After": "30"},
    )
    agent = YiemAgent(llm_call=openai_client(server), tools=[weather_tool()], max_retry_delay_ms=1000)
    try:
        reply = agent.prompt("Hello", timeout=10)
    finally:
        agent.shutdown()
    assert reply.stop_reason == "error"
    assert "HTTP 429" in (reply.error_message or "")
    assert "1000" in (reply.error_message or "")  # the error names the cap it hit
    assert len(server.requests) == 1  # no retry was attempted


@pytest.mark.parametrize("make_client", [c[2] for c in CASES], ids=[c[0] for c in CASES])
def test_a_failing_run_leaks_the_key_nowhere(
    server: ScriptedServer, make_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echoed = {"error": {"message": f"key {KEY} is overloaded", "type": "overloaded_error"}}
    for _ in range(3):  # the first try and both retries fail; each reply echoes the key
        server.json(echoed, status=503)
    events: list[AgentEvent] = []
    agent = YiemAgent(llm_call=make_client(server), tools=[weather_tool()], agent_event_sink=events.append)
    try:
        reply = agent.prompt("Hello", timeout=10)
        saved = tmp_path / "session.json"
        agent.save(saved)
    finally:
        agent.shutdown()
    assert reply.stop_reason == "error"
    assert "HTTP 503" in (reply.error_message or "")
    assert len(server.requests) == 3
    assert any("retrying" in r.getMessage() for r in caplog.records)  # the logs were exercised
    assert_no_key(
        [
            saved.read_text(encoding="utf-8"),
            repr(reply),
            repr(reply.to_dict()),
            *leak_texts(None, caplog.records, events),
        ]
    )


SESSION_FIELD = {
    "openai": lambda body: body.get("prompt_cache_key"),
    "anthropic": lambda body: (body.get("metadata") or {}).get("user_id"),
}


@pytest.mark.parametrize(("provider", "script", "make_client"), CASES, ids=[c[0] for c in CASES])
def test_the_agents_session_id_reaches_the_server(
    server: ScriptedServer, provider: str, script: Any, make_client: Any
) -> None:
    script(server, False)
    with YiemAgent(llm_call=make_client(server), tools=[weather_tool()], session_id="conv-7") as agent:
        assert agent.prompt("Weather in Paris?", timeout=10).stop_reason == "stop"
    field = SESSION_FIELD[provider]
    assert [field(r.body) for r in server.requests] == ["conv-7", "conv-7"]


@pytest.mark.parametrize(("provider", "script", "make_client"), CASES, ids=[c[0] for c in CASES])
def test_a_client_can_keep_the_session_id_to_itself(
    server: ScriptedServer, provider: str, script: Any, make_client: Any
) -> None:
    script(server, False)
    client = make_client(server, http=fast(send_session_id=False))
    with YiemAgent(llm_call=client, tools=[weather_tool()], session_id="conv-7") as agent:
        agent.prompt("Weather in Paris?", timeout=10)
    assert all(SESSION_FIELD[provider](r.body) is None for r in server.requests)
    assert all("metadata" not in r.body for r in server.requests)


@pytest.mark.parametrize(("provider", "script", "make_client"), CASES, ids=[c[0] for c in CASES])
def test_bodies_are_logged_at_debug_only_when_asked_and_never_with_the_key(
    server: ScriptedServer,
    provider: str,
    script: Any,
    make_client: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script(server, False)
    monkeypatch.setenv("YIEM_LOG_BODIES", "1")
    with (
        caplog.at_level(logging.DEBUG, logger="yiemagent.llm"),
        YiemAgent(llm_call=make_client(server), tools=[weather_tool()]) as agent,
    ):
        agent.prompt(f"Weather in Paris? (my key is {KEY})", timeout=10)
    bodies = [r.getMessage() for r in caplog.records if ": {" in r.getMessage()]
    assert any("request to" in b and "Weather in Paris?" in b for b in bodies)
    assert any(" reply: " in b and "sunny" in b for b in bodies)
    assert all(KEY not in r.getMessage() for r in caplog.records)
    caplog.clear()
    script(server, False)
    client = make_client(server, http=fast(log_bodies=False))  # the client's option wins over the variable
    with (
        caplog.at_level(logging.DEBUG, logger="yiemagent.llm"),
        YiemAgent(llm_call=client, tools=[weather_tool()]) as agent,
    ):
        agent.prompt("Weather in Paris?", timeout=10)
    assert not any(" reply: " in r.getMessage() for r in caplog.records)

"""AnthropicMessagesClient against a local HTTP server: conversion, replies, streams, failures."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from llm_helpers import (
    FAST,
    KEY,
    PIXEL,
    WEATHER_SCHEMA,
    Collector,
    anthropic_client,
    anthropic_error,
    anthropic_message,
    assert_no_key,
    error_while_held,
    fast,
    history_request,
    leak_texts,
    simple_request,
    weather_tool,
)
from llm_server import ScriptedServer, split_every, sse_bytes

from yiemagent.core._content import AgentToolCall, TextContent, ThinkingContent
from yiemagent.core._context import format_msg_for_llm
from yiemagent.core._messages import AssistantMessage, LlmUsage, ToolResultMessage, UserMessage
from yiemagent.core._tools import AbortSignal, AgentContext
from yiemagent.llm import (
    AnthropicMessagesClient,
    LlmAbortedError,
    LlmError,
    LlmStreamError,
    LlmTimeoutError,
)

WEATHER_TOOL = {
    "name": "getWeather",
    "description": "Current weather for a city",
    "input_schema": WEATHER_SCHEMA,
}


def assert_sent(server: ScriptedServer, *, stream: bool = False, count: int = 1) -> None:
    """The server received ``count`` identical posts of ``simple_request()`` in the Messages API
    form: method, path, headers (the key among them) and the whole body."""
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
        "tools": [WEATHER_TOOL],
    }
    if stream:
        body["stream"] = True
    assert len(server.requests) == count
    for sent in server.requests:
        assert (sent.method, sent.path) == ("POST", "/v1/messages")
        assert sent.headers["x-api-key"] == KEY
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert sent.headers["content-type"] == "application/json"
        assert sent.headers["accept"] == ("text/event-stream" if stream else "application/json")
        assert sent.body == body


# --- the request sent ---------------------------------------------------------------------------------


def test_plain_reply_and_the_request_the_server_received(server: ScriptedServer) -> None:
    server.json(anthropic_message([{"type": "text", "text": "Hi there!"}]))
    reply = anthropic_client(server, max_tokens=256, extra_body={"temperature": 0})(simple_request("Hello"))

    assert reply.content == [TextContent("Hi there!")]
    assert (reply.api, reply.provider, reply.model) == (
        "anthropic-messages",
        "anthropic",
        "claude-sonnet-4-5",
    )
    assert reply.stop_reason == "stop"
    assert reply.usage == LlmUsage(input=12, output=6, total_tokens=18)

    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers
    assert sent.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
        "tools": [WEATHER_TOOL],
        "temperature": 0,
    }


def test_history_is_converted_from_the_library_messages(server: ScriptedServer) -> None:
    server.json(anthropic_message([{"type": "text", "text": "Rain."}]))
    request = history_request()
    before = json.dumps(request.to_dict())
    anthropic_client(server)(request)
    assert json.dumps(request.to_dict()) == before  # the cached OpenAI dicts are untouched
    assert server.requests[0].body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather in Paris and Rome? See map."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "call_1", "name": "getWeather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "getWeather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [  # both results and the follow-up merged into one turn
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": [{"type": "text", "text": "Sunny, 22°C"}],
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": [{"type": "text", "text": "service down"}],
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks, and tomorrow?"},
            ],
        },
    ]


def test_thinking_dict_tool_calls_and_odd_ids_are_converted(server: ScriptedServer) -> None:
    server.json(anthropic_message([{"type": "text", "text": "ok"}]))
    messages = [
        UserMessage("go"),
        AssistantMessage(
            [
                ThinkingContent("signed thought", "sig-123"),
                ThinkingContent("another provider's reasoning"),
                {"type": "redacted_thinking", "data": "opaque"},
                {
                    "type": "tool_calls",
                    "tool_calls": [
                        {
                            "id": "call|1.x",
                            "type": "function",
                            "function": {"name": "getWeather", "arguments": '{"city": "Oslo"}'},
                        }
                    ],
                },
                AgentToolCall("call_bad", "getWeather", '{"city": "Os'),
            ]
        ),
        ToolResultMessage("call|1.x", "getWeather", []),
        ToolResultMessage("call_bad", "getWeather", "invalid JSON", is_error=True),
    ]
    request = format_msg_for_llm(AgentContext("", messages, [weather_tool()]))
    anthropic_client(server)(request)
    body = server.requests[0].body
    assert "system" not in body
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "signed thought", "signature": "sig-123"},
        {"type": "text", "text": "another provider's reasoning"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "call_1_x", "name": "getWeather", "input": {"city": "Oslo"}},
        {
            "type": "tool_use",
            "id": "call_bad",
            "name": "getWeather",
            "input": {"_raw_arguments": '{"city": "Os'},
        },
    ]
    results = body["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["call_1_x", "call_bad"]
    assert results[0]["content"] == [{"type": "text", "text": "(no output)"}]


def test_a_plain_openai_dict_without_context_is_converted(server: ScriptedServer) -> None:
    server.json(anthropic_message([{"type": "text", "text": "ok"}]))
    request = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "getWeather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Snow"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "getWeather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER_SCHEMA,
                },
            }
        ],
    }
    anthropic_client(server)(request)
    body = server.requests[0].body
    assert body["system"] == "Be brief."
    assert body["tools"] == [WEATHER_TOOL]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "getWeather", "input": {"city": "Oslo"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": [{"type": "text", "text": "Snow"}],
                    "is_error": False,
                }
            ],
        },
    ]


def test_a_request_it_cannot_read_is_refused(server: ScriptedServer) -> None:
    with pytest.raises(ValueError, match="format_msg_for_llm"):
        anthropic_client(server)({"prompt": "hi"})
    assert server.requests == []


def test_base_url_with_v1_and_key_from_environment(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"{server.url}/v1")
    server.json(anthropic_message([{"type": "text", "text": "ok"}]))
    client = AnthropicMessagesClient("claude-haiku-4-5", http=FAST)
    client(simple_request())
    assert server.requests[0].path == "/v1/messages"
    assert server.requests[0].headers["x-api-key"] == KEY
    assert_no_key([repr(client), str(client)])


def test_no_dict_the_client_builds_holds_the_key() -> None:
    client = AnthropicMessagesClient("claude-haiku-4-5", "http://127.0.0.1:9", KEY)
    auth = client._transport.session.auth
    assert_no_key([repr(client.headers()), repr(vars(client)), repr(auth)])
    assert repr(auth) == "ApiKeyAuth(header='x-api-key', key='***')"


# --- replies ------------------------------------------------------------------------------------------


def test_thinking_text_and_several_tool_calls(server: ScriptedServer) -> None:
    server.json(
        anthropic_message(
            [
                {"type": "thinking", "thinking": "Two cities.", "signature": "EqQBCgIYAhIM"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_01", "name": "getWeather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_02", "name": "getWeather", "input": {"city": "Rome"}},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            ],
            stop_reason="tool_use",
            usage={
                "input_tokens": 100,
                "output_tokens": 50,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 300,
            },
        )
    )
    reply = anthropic_client(server)(simple_request())
    assert reply.content == [
        ThinkingContent("Two cities.", "EqQBCgIYAhIM"),
        TextContent("Checking."),
        AgentToolCall("toolu_01", "getWeather", {"city": "Paris"}),
        AgentToolCall("toolu_02", "getWeather", {"city": "Rome"}),
    ]
    assert reply.stop_reason == "toolUse"
    assert reply.usage == LlmUsage(input=100, output=50, cache_read=2000, cache_write=300, total_tokens=2450)
    assert_sent(server)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "toolUse"),
        ("pause_turn", "stop"),
        ("refusal", "error"),
    ],
)
def test_stop_reason_mapping(server: ScriptedServer, reason: str, expected: str) -> None:
    server.json(anthropic_message([{"type": "text", "text": "x"}], stop_reason=reason))
    reply = anthropic_client(server)(simple_request())
    assert reply.stop_reason == expected
    assert (reply.error_message is not None) == (expected == "error")
    assert_sent(server)


def test_a_refusal_is_an_error_that_keeps_the_text(server: ScriptedServer) -> None:
    server.json(anthropic_message([{"type": "text", "text": "I won't"}], stop_reason="refusal"))
    reply = anthropic_client(server)(simple_request())
    assert reply.stop_reason == "error"
    assert reply.error_message == "Anthropic model declined to answer (stop_reason refusal)"
    assert reply.content == [TextContent("I won't")]
    assert_sent(server)


def test_a_streamed_refusal_is_an_error(server: ScriptedServer) -> None:
    events = [
        *STREAM_EVENTS[:1],
        *STREAM_EVENTS[7:11],
        {"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    server.sse([sse_bytes(events, named=True)])
    reply = anthropic_client(server, stream=True)(simple_request())
    assert reply.stop_reason == "error"
    assert reply.error_message is not None and "declined" in reply.error_message
    assert reply.content == [TextContent("Gérons ça.")]
    assert_sent(server, stream=True)


# --- streaming ------------------------------------------------------------------------------------------

STREAM_EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 472,
                "output_tokens": 2,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 0,
            },
        },
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "Zürich is "},
    },
    {"type": "ping"},
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "in Switzerland 🇨🇭."},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"},
    },
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Gérons "}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ça."}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {
            "type": "tool_use",
            "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "name": "getWeather",
            "input": {},
        },
    },
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Zü'},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": 'rich"}'},
    },
    {"type": "content_block_stop", "index": 2},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 89},
    },
    {"type": "message_stop"},
]


@pytest.mark.parametrize("size", [1, 3, 50, 100_000])
def test_stream_split_at_awkward_byte_boundaries(server: ScriptedServer, size: int) -> None:
    server.sse(split_every(sse_bytes(STREAM_EVENTS, named=True), size))
    events = Collector()
    reply = anthropic_client(server, stream=True)(simple_request(), on_update=events)

    assert reply.content == [
        ThinkingContent("Zürich is in Switzerland 🇨🇭.", "EqQBCgIYAhIM1gbcDa9GJwZA"),
        TextContent("Gérons ça."),
        AgentToolCall("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "getWeather", {"city": "Zürich"}),
    ]
    assert reply.stop_reason == "toolUse"
    assert reply.usage == LlmUsage(input=472, output=89, cache_read=100, total_tokens=661)
    assert events.text("thinking") == "Zürich is in Switzerland 🇨🇭."
    assert events.text("text") == "Gérons ça."
    assert events.text("tool_call") == '{"city": "Zürich"}'
    assert {(e.kind, e.content_index) for e in events.events} == {
        ("thinking", 0),
        ("text", 1),
        ("tool_call", 2),
    }
    assert {e.tool_call_id for e in events.events if e.kind == "tool_call"} == {
        "toolu_01T1x1fJ34qAmk2tNTrN7Up6"
    }
    assert_sent(server, stream=True)


def test_error_event_mid_stream(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    broken = [*STREAM_EVENTS[:9], anthropic_error("overloaded_error", "Overloaded")]
    server.sse([sse_bytes(broken, named=True)])
    events = Collector()
    client = anthropic_client(server, stream=True)
    with pytest.raises(LlmError, match=r"overloaded_error.*Overloaded") as info:
        client(simple_request(), on_update=events)
    assert "not retried" in str(info.value)  # deltas already went out
    assert len(server.requests) == 1
    assert_no_key(leak_texts(info.value, caplog.records, events.events, client))
    assert_sent(server, stream=True)


def test_error_event_before_any_delta_is_retried(server: ScriptedServer) -> None:
    server.sse([sse_bytes([STREAM_EVENTS[0], anthropic_error("overloaded_error", "Overloaded")], named=True)])
    server.sse([sse_bytes(STREAM_EVENTS, named=True)])
    reply = anthropic_client(server, stream=True)(simple_request())
    assert len(reply.content) == 3
    assert len(server.requests) == 2
    assert_sent(server, stream=True, count=2)


def test_connection_closed_mid_stream(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.sse(split_every(sse_bytes(STREAM_EVENTS[:10], named=True), 9), finish=False)
    events = Collector()
    client = anthropic_client(server, stream=True)
    with pytest.raises(LlmStreamError, match="stream broke off") as info:
        client(simple_request(), on_update=events)
    assert events.text() == "Gérons ça."
    assert len(server.requests) == 1
    assert_no_key(leak_texts(info.value, caplog.records, events.events, client))
    assert_sent(server, stream=True)


def test_stream_ending_without_message_stop_is_an_error(server: ScriptedServer) -> None:
    server.sse([sse_bytes(STREAM_EVENTS[:-1], named=True)])
    with pytest.raises(LlmStreamError, match=r"broke off.*message_stop"):
        anthropic_client(server, stream=True)(simple_request())
    assert_sent(server, stream=True)


# --- failures -----------------------------------------------------------------------------------------


def test_401_carries_the_provider_text_and_status_and_never_the_key(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.json(anthropic_error("authentication_error", f"invalid x-api-key {KEY}"), status=401)
    client = anthropic_client(server)
    events = Collector()
    with pytest.raises(LlmError) as info:
        client(simple_request(), on_update=events)
    error = info.value
    assert error.status == 401
    assert "HTTP 401, authentication_error" in str(error)
    assert "invalid x-api-key" in str(error)
    assert error.provider_message == "invalid x-api-key ***"
    assert len(server.requests) == 1
    assert_no_key(leak_texts(error, caplog.records, events.events, client))


def test_529_overloaded_then_success(server: ScriptedServer) -> None:
    server.json(anthropic_error("overloaded_error", "Overloaded"), status=529)
    server.json(anthropic_message([{"type": "text", "text": "back"}]))
    reply = anthropic_client(server)(simple_request())
    assert reply.content == [TextContent("back")]
    assert len(server.requests) == 2
    assert_sent(server, count=2)


def test_malformed_json_body(server: ScriptedServer) -> None:
    server.text("<html>502 Bad Gateway</html>", content_type="application/json")
    with pytest.raises(LlmError, match=r"not valid JSON.*502 Bad Gateway"):
        anthropic_client(server)(simple_request())
    assert_sent(server)


def test_an_error_body_with_status_200_is_an_error(server: ScriptedServer) -> None:
    server.json(anthropic_error("api_error", "Internal server error"))
    with pytest.raises(LlmError, match=r"api_error.*Internal server error"):
        anthropic_client(server, http=fast(max_retries=0))(simple_request())
    assert_sent(server)


def test_slow_server_times_out(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = anthropic_client(server, http=fast(timeout=0.3, max_retries=0))
    error = error_while_held(server, anthropic_message([{"type": "text", "text": "late"}]), client)
    assert isinstance(error, LlmTimeoutError) and "timed out" in str(error)
    assert_no_key(leak_texts(error, caplog.records, client=client))


def test_abort_during_a_request_ends_the_call(server: ScriptedServer) -> None:
    error = error_while_held(
        server,
        anthropic_message([{"type": "text", "text": "late"}]),
        anthropic_client(server, http=fast(timeout=30)),
        signal=AbortSignal(),
    )
    assert isinstance(error, LlmAbortedError) and "aborted" in str(error)


def test_blocks_the_message_leaves_out_take_no_place_in_the_content_index(server: ScriptedServer) -> None:
    """A server tool's block (a kind the library does not model) before the text: its deltas are
    not reported, and the text's updates point at where the text sits in the final message."""
    server_tool = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    stream = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": server_tool},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{}"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Found it."}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    server.sse([sse_bytes(stream, named=True)])
    events = Collector()
    reply = anthropic_client(server, stream=True)(simple_request(), on_update=events)
    assert reply.content == [TextContent("Found it.")]
    assert [(e.kind, e.content_index, e.delta) for e in events.events] == [("text", 0, "Found it.")]

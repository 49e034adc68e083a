"""OpenAIChatClient and servers we did not write: the wire form it sends, replies as llama-cpp-python
sends them, and the errors a newcomer meets first (server down, wrong base URL, empty stream).

All against the scripted loopback server; the real llama-cpp-python server is exercised in
``test_llamacpp_server.py``.
"""

from __future__ import annotations

import copy
import json
import logging
import socket
from typing import Any

import pytest
from llm_helpers import (
    FAST,
    KEY,
    PIXEL,
    assert_no_key,
    fast,
    history_request,
    leak_texts,
    openai_client,
    openai_completion,
    openai_tool_call,
    simple_request,
    weather_tool,
)
from llm_server import Reply, ScriptedServer, sse_bytes

from yiemagent.core._content import AgentToolCall, ImageContent, TextContent
from yiemagent.core._context import format_msg_for_llm
from yiemagent.core._messages import AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._tools import AgentContext
from yiemagent.llm import LlmError, OpenAIChatClient
from yiemagent.llm.openai._wire import wire_message


def round_trip_request() -> Any:
    """A conversation after one tool call: system, user, assistant with a call and no text, the
    tool's result."""
    messages = [
        UserMessage("Weather in Paris?"),
        AssistantMessage([AgentToolCall("call_1", "getWeather", {"city": "Paris"})]),
        ToolResultMessage("call_1", "getWeather", [TextContent("Sunny, 22°C")]),
    ]
    return format_msg_for_llm(AgentContext("You are terse.", messages, [weather_tool()]))


# --- the wire form ---------------------------------------------------------------------------------


def test_text_content_goes_as_plain_strings_and_tool_calls_in_the_common_form(server: ScriptedServer) -> None:
    server.json(openai_completion("It is sunny."))
    request = round_trip_request()
    before = copy.deepcopy(dict(request))
    openai_client(server)(request)
    body = server.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "getWeather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 22°C"},
    ]
    assert body["tool_choice"] == "auto"
    assert dict(request) == before  # the formatter's cached dicts are never changed


def test_several_text_parts_keep_a_line_between_them_and_images_keep_their_parts(
    server: ScriptedServer,
) -> None:
    server.json(openai_completion())
    request = format_msg_for_llm(
        AgentContext(
            "",
            [
                UserMessage([TextContent("first"), TextContent("second")]),
                AssistantMessage([TextContent("ok")]),
                UserMessage([TextContent("and this?"), ImageContent(PIXEL, "image/png")]),
            ],
            [],
        )
    )
    openai_client(server)(request)
    sent = server.requests[0].body["messages"]
    assert sent[0] == {"role": "user", "content": "first\nsecond"}
    assert sent[1] == {"role": "assistant", "content": "ok"}
    assert sent[2] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "and this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
        ],
    }
    assert "tool_choice" not in server.requests[0].body  # no tools offered: no choice sent


def test_an_image_returned_by_a_tool_still_travels_in_a_user_message(server: ScriptedServer) -> None:
    server.json(openai_completion())
    openai_client(server)(history_request())
    sent = server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert sent[2]["content"] == "Checking both."
    assert sent[4] == {"role": "tool", "tool_call_id": "call_2", "content": "service down"}


def test_hand_made_messages_are_brought_to_the_common_form() -> None:
    call = {"id": "c1", "function": {"name": "f", "arguments": {"x": 1}}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    wired = wire_message(message)
    assert wired == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}],
    }
    assert message["content"] is None and "type" not in call  # the input is left alone
    ready = {"role": "user", "content": "hi"}
    assert wire_message(ready) is ready  # nothing to change: not even copied


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        (None, None),
        ("required", "required"),
        (
            {"type": "function", "function": {"name": "getWeather"}},
            {"type": "function", "function": {"name": "getWeather"}},
        ),
    ],
    ids=["off", "required", "forced"],
)
def test_tool_choice_is_a_client_option(server: ScriptedServer, choice: Any, sent: Any) -> None:
    server.json(openai_completion())
    openai_client(server, tool_choice=choice)(simple_request())
    assert server.requests[0].body.get("tool_choice") == sent


def test_tool_choice_must_be_a_string_a_dict_or_none() -> None:
    with pytest.raises(ValueError, match="tool_choice"):
        OpenAIChatClient("m", "http://127.0.0.1:9/v1", tool_choice=1)  # type: ignore[arg-type]


def test_extra_body_tool_choice_wins(server: ScriptedServer) -> None:
    server.json(openai_completion())
    openai_client(server, extra_body={"tool_choice": "none"})(simple_request())
    assert server.requests[0].body["tool_choice"] == "none"


# --- replies as servers send them ---------------------------------------------------------------------


def test_a_reply_with_tool_calls_and_function_call_is_read_as_its_tool_calls(server: ScriptedServer) -> None:
    # What llama-cpp-python's chatml-function-calling answers: the legacy field repeats the call.
    body = openai_completion(
        None, finish="tool_calls", tool_calls=[openai_tool_call("call_x", "getTime", '{"city": "Tokyo"}')]
    )
    body["choices"][0]["message"]["function_call"] = {"name": "getTime:", "arguments": '{"city": "Tokyo"}'}
    server.json(body)
    reply = openai_client(server)(simple_request())
    assert reply.content == [AgentToolCall("call_x", "getTime", {"city": "Tokyo"})]
    assert reply.stop_reason == "toolUse"


def test_a_lone_function_call_is_still_read(server: ScriptedServer) -> None:
    body = openai_completion(None, finish="function_call")
    body["choices"][0]["message"]["function_call"] = {"name": "getWeather", "arguments": '{"city": "Oslo"}'}
    server.json(body)
    [call] = openai_client(server)(simple_request()).content
    assert isinstance(call, AgentToolCall) and call.name == "getWeather"


# --- an empty stream ----------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
def test_an_empty_stream_is_asked_again_without_streaming_and_remembered(
    server: ScriptedServer, content_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="yiemagent.llm")
    server.add(Reply(200, {"Content-Type": content_type}, b""))
    server.json(openai_completion("It is 9:41 in Tokyo."))
    server.json(openai_completion("Still 9:41."))
    client = openai_client(server, stream=True)
    reply = client(simple_request())
    assert reply.content == [TextContent("It is 9:41 in Tokyo.")]
    assert [r.body["stream"] for r in server.requests] == [True, False]
    assert "answered a streamed request with no events; asking again without streaming" in caplog.text
    # Remembered for the client: the next call is not streamed at all.
    assert client(simple_request()).content == [TextContent("Still 9:41.")]
    assert [r.body["stream"] for r in server.requests] == [True, False, False]
    assert client.stream is False


def test_an_empty_stream_then_a_failure_reports_the_failure(server: ScriptedServer) -> None:
    server.add(Reply(200, {"Content-Type": "text/event-stream"}, b""))
    server.json({"error": {"message": "model not loaded"}}, status=400)
    with pytest.raises(LlmError, match="model not loaded"):
        openai_client(server, stream=True)(simple_request())
    assert len(server.requests) == 2


def test_a_stream_of_only_comments_is_empty_too(server: ScriptedServer) -> None:
    server.sse([b": ping\n\n", b"\n"])
    server.json(openai_completion("Hi"))
    assert openai_client(server, stream=True)(simple_request()).content == [TextContent("Hi")]
    assert [r.body["stream"] for r in server.requests] == [True, False]


def test_a_stream_with_events_but_no_done_is_still_a_broken_stream(server: ScriptedServer) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
    server.sse([sse_bytes([chunk])])
    with pytest.raises(LlmError, match="broke off") as info:
        openai_client(server, stream=True, http=fast(max_retries=0))(simple_request())
    assert "empty stream" not in str(info.value)


# --- errors a newcomer understands ----------------------------------------------------------------------


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_server_down_says_so_in_plain_words(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port()
    client = OpenAIChatClient("smollm2", f"http://127.0.0.1:{port}/v1", api_key=KEY, http=fast(max_retries=0))
    with pytest.raises(LlmError) as info:
        client(simple_request())
    assert str(info.value) == f"cannot connect to http://127.0.0.1:{port}/v1: connection refused"
    assert info.value.status is None
    assert_no_key(leak_texts(info.value, caplog.records, client=client))


def test_server_down_after_retries_counts_only_our_attempts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    port = free_port()
    client = OpenAIChatClient("smollm2", f"http://127.0.0.1:{port}/v1", api_key_env=None, http=FAST)
    with pytest.raises(LlmError) as info:
        client(simple_request())
    assert str(info.value) == (
        f"cannot connect to http://127.0.0.1:{port}/v1: connection refused (gave up after 3 attempts)"
    )
    logged = " ".join(r.getMessage() for r in caplog.records)
    for internal in (
        "Max retries",
        "HTTPConnection",
        "NewConnectionError",
        "Errno",
        "_Tracked",
        "request failed (OpenAI request failed",
    ):
        assert internal not in logged and internal not in str(info.value)


def test_credentials_in_the_base_url_are_never_shown() -> None:
    port = free_port()
    client = OpenAIChatClient(
        "m", f"http://user:{KEY}@127.0.0.1:{port}/v1?key={KEY}", http=fast(max_retries=0)
    )
    with pytest.raises(LlmError) as info:
        client(simple_request())
    assert str(info.value) == f"cannot connect to http://127.0.0.1:{port}/v1: connection refused"


NOT_FOUND = {"detail": "Not Found"}  # what FastAPI servers (llama-cpp-python, vLLM) answer


def test_a_404_without_v1_says_to_add_it(server: ScriptedServer) -> None:
    server.json(NOT_FOUND, status=404)
    client = OpenAIChatClient("smollm2", server.url, api_key_env=None, http=FAST)
    with pytest.raises(LlmError) as info:
        client(simple_request())
    assert str(info.value) == (
        f"OpenAI API error (HTTP 404): Not Found; check base_url {server.url}: OpenAI-compatible "
        f"servers serve the API under /v1, so it is usually {server.url}/v1"
    )
    assert info.value.status == 404
    assert server.requests[0].path == "/chat/completions"


def test_a_404_with_the_endpoint_in_the_base_url_says_to_drop_it(server: ScriptedServer) -> None:
    server.json(NOT_FOUND, status=404)
    base = f"{server.url}/v1/chat/completions"
    client = OpenAIChatClient("smollm2", base, api_key_env=None, http=FAST)
    with pytest.raises(LlmError) as info:
        client(simple_request())
    assert str(info.value) == (
        f"OpenAI API error (HTTP 404): Not Found; base_url {base} ends with /chat/completions, "
        f"which the client adds itself: use base_url={server.url}/v1"
    )


def test_a_404_at_the_right_path_points_at_the_model_name(server: ScriptedServer) -> None:
    server.json({"error": {"message": 'model "qwen9" not found, try pulling it first'}}, status=404)
    client = OpenAIChatClient("qwen9", f"{server.url}/v1", api_key_env=None, http=FAST)
    with pytest.raises(LlmError) as info:
        client(simple_request())
    assert str(info.value) == (
        f'OpenAI API error (HTTP 404): model "qwen9" not found, try pulling it first; check '
        f"base_url {server.url}/v1 and the model name 'qwen9'"
    )
    assert len(server.requests) == 1  # a 404 is final


def test_other_http_errors_get_no_hint(server: ScriptedServer) -> None:
    server.json({"error": {"message": "bad request"}}, status=400)
    with pytest.raises(LlmError) as info:
        openai_client(server)(simple_request())
    assert str(info.value) == "OpenAI API error (HTTP 400): bad request"
    assert json.dumps(info.value.status) == "400"

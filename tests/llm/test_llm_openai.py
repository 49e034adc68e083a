"""OpenAIChatClient against a local HTTP server: requests sent, replies read, streams, failures."""

from __future__ import annotations

import copy
import inspect
import json
import logging
import threading
from typing import Any

import pytest
from llm_helpers import (
    FAST,
    KEY,
    Collector,
    assert_no_key,
    error_while_held,
    fast,
    history_request,
    leak_texts,
    openai_chunk,
    openai_client,
    openai_completion,
    openai_tool_call,
    simple_request,
)
from llm_server import ScriptedServer, split_every, sse_bytes

from yiemagent.core._content import AgentToolCall, TextContent, ThinkingContent
from yiemagent.core._messages import LlmUsage
from yiemagent.core._tools import AbortSignal
from yiemagent.llm import (
    LlmAbortedError,
    LlmError,
    LlmStreamError,
    LlmTimeoutError,
    OpenAIChatClient,
)
from yiemagent.llm.openai._wire import wire_messages


def expected_body(stream: bool) -> dict[str, Any]:
    """The body the client sends for ``simple_request()``, as JSON on the wire."""
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        **json.loads(json.dumps(dict(simple_request()))),
        "stream": stream,
    }
    body["messages"] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello"},
    ]  # text parts go as plain strings
    body["tool_choice"] = "auto"
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def assert_sent(server: ScriptedServer, *, stream: bool = False, count: int = 1) -> None:
    """The server received ``count`` identical ``simple_request()`` posts: method, path,
    headers (the key among them) and the whole body."""
    assert len(server.requests) == count
    for sent in server.requests:
        assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
        assert sent.headers["authorization"] == f"Bearer {KEY}"
        assert sent.headers["content-type"] == "application/json"
        assert sent.headers["accept"] == ("text/event-stream" if stream else "application/json")
        assert sent.body == expected_body(stream)


# --- plain replies and the request sent -----------------------------------------------------------


def test_plain_reply_and_the_request_the_server_received(server: ScriptedServer) -> None:
    server.json(openai_completion("Hi there!"))
    request = simple_request("Hello")
    reply = openai_client(server, extra_body={"temperature": 0.2})(request)

    assert reply.content == [TextContent("Hi there!")]
    assert (reply.api, reply.provider, reply.model) == ("openai-completions", "openai", "gpt-4o-mini")
    assert reply.stop_reason == "stop"
    assert reply.usage == LlmUsage(input=19, output=10, total_tokens=29)
    assert reply.error_message is None

    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "getWeather",
                    "description": "Current weather for a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
        "tool_choice": "auto",
        "stream": False,
        "temperature": 0.2,
    }


def test_the_request_is_never_changed(server: ScriptedServer) -> None:
    server.json(openai_completion())
    server.json(openai_completion())
    request = history_request()
    before = copy.deepcopy(dict(request))
    messages, first = request["messages"], request["messages"][0]
    client = openai_client(server, stream=False, extra_body={"max_tokens": 5})
    client(request)
    client(request)
    assert dict(request) == before
    assert request["messages"] is messages and request["messages"][0] is first
    assert set(request) == {"messages", "tools"}
    assert server.requests[0].body["messages"] == wire_messages(before["messages"])
    assert server.requests[0].body == server.requests[1].body


def test_history_with_tool_calls_and_results_is_sent_in_wire_form(server: ScriptedServer) -> None:
    server.json(openai_completion("Tomorrow: rain."))
    request = history_request()
    openai_client(server)(request)
    sent = server.requests[0].body["messages"]
    assert sent[1] == json.loads(json.dumps(request["messages"][1]))  # an image: parts kept
    assert sent[3] == {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 22°C"}
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert sent[2]["tool_calls"][1]["function"] == {"name": "getWeather", "arguments": '{"city": "Rome"}'}


def test_no_key_sends_no_authorization_header(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.json(openai_completion())
    OpenAIChatClient("qwen2.5", f"{server.url}/v1", http=FAST)(simple_request())
    assert "authorization" not in server.requests[0].headers


def test_key_and_base_url_come_from_the_environment(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1/")
    server.json(openai_completion())
    client = OpenAIChatClient("gpt-4o-mini", http=FAST)
    client(simple_request())
    assert client.base_url == f"{server.url}/v1"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert_no_key([repr(client), str(client)])
    assert "api_key='***'" in repr(client)


def test_no_dict_the_client_builds_holds_the_key() -> None:
    client = OpenAIChatClient("m", "http://127.0.0.1:9", KEY)
    auth = client._transport.session.auth
    assert_no_key(
        [repr(client.headers()), repr(vars(client)), repr(auth), repr(client._transport.session.headers)]
    )
    assert repr(auth) == "ApiKeyAuth(header='Authorization', key='***')"


def test_the_client_is_a_runtime_llm_call() -> None:
    params = inspect.signature(OpenAIChatClient("m", "http://127.0.0.1:9")).parameters
    assert params["on_update"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["signal"].kind is inspect.Parameter.KEYWORD_ONLY


def test_a_body_holding_nan_is_refused_before_sending(server: ScriptedServer) -> None:
    client = openai_client(server, extra_body={"temperature": float("nan")})
    with pytest.raises(ValueError, match="NaN or infinity"):
        client(simple_request())
    assert server.requests == []


def test_a_request_without_messages_is_refused(server: ScriptedServer) -> None:
    with pytest.raises(ValueError, match="'messages'"):
        openai_client(server)({"prompt": "hi"})
    assert server.requests == []


# --- tool calls, reasoning, usage, finish reasons ---------------------------------------------------


def test_several_tool_calls_in_one_reply(server: ScriptedServer) -> None:
    server.json(
        openai_completion(
            None,
            finish="tool_calls",
            tool_calls=[
                openai_tool_call("call_a", "getWeather", '{"city": "Paris"}'),
                openai_tool_call("call_b", "getWeather", '{"city": "Rome"}'),
                openai_tool_call("call_c", "getWeather", '{"city": "Oslo'),
                openai_tool_call("call_d", "getTime", ""),
            ],
        )
    )
    reply = openai_client(server)(simple_request())
    assert reply.content == [
        AgentToolCall("call_a", "getWeather", {"city": "Paris"}),
        AgentToolCall("call_b", "getWeather", {"city": "Rome"}),
        AgentToolCall("call_c", "getWeather", '{"city": "Oslo'),  # not JSON: kept for the model
        AgentToolCall("call_d", "getTime", {}),
    ]
    assert reply.stop_reason == "toolUse"
    assert_sent(server)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_becomes_thinking_content(server: ScriptedServer, field: str) -> None:
    server.json(openai_completion("42.", reasoning={field: "Six times seven."}))
    reply = openai_client(server)(simple_request())
    assert reply.content == [ThinkingContent("Six times seven."), TextContent("42.")]
    assert_sent(server)


def test_usage_with_cached_prompt_tokens(server: ScriptedServer) -> None:
    server.json(
        openai_completion(
            usage={
                "prompt_tokens": 1200,
                "completion_tokens": 30,
                "total_tokens": 1230,
                "prompt_tokens_details": {"cached_tokens": 1024},
                "completion_tokens_details": {"reasoning_tokens": 12},
            }
        )
    )
    reply = openai_client(server)(simple_request())
    assert reply.usage == LlmUsage(input=176, output=30, cache_read=1024, total_tokens=1230)
    assert_sent(server)


@pytest.mark.parametrize(
    ("finish", "calls", "expected"),
    [
        ("stop", False, "stop"),
        ("length", False, "length"),
        ("tool_calls", True, "toolUse"),
        ("function_call", True, "toolUse"),
        ("content_filter", False, "error"),
        (None, False, "stop"),
        ("stop", True, "toolUse"),
    ],
)
def test_finish_reason_mapping(server: ScriptedServer, finish: Any, calls: bool, expected: str) -> None:
    tool_calls = [openai_tool_call("c1", "getWeather", "{}")] if calls else None
    body = openai_completion("x", tool_calls=tool_calls)
    body["choices"][0]["finish_reason"] = finish
    server.json(body)
    reply = openai_client(server)(simple_request())
    assert reply.stop_reason == expected
    assert (reply.error_message is not None) == (expected == "error")
    assert_sent(server)


def test_a_content_filter_stop_is_an_error_that_keeps_the_text(server: ScriptedServer) -> None:
    server.json(openai_completion("Partial answer", finish="content_filter"))
    reply = openai_client(server)(simple_request())
    assert reply.stop_reason == "error"
    assert reply.error_message is not None and "content filter" in reply.error_message
    assert reply.content == [TextContent("Partial answer")]
    assert_sent(server)


def test_a_refusal_is_an_error_that_says_so(server: ScriptedServer) -> None:
    body = openai_completion(None)
    body["choices"][0]["message"]["refusal"] = "I can't help with that."
    server.json(body)
    reply = openai_client(server)(simple_request())
    assert reply.stop_reason == "error"
    assert reply.error_message == "OpenAI model refused to answer: I can't help with that."
    assert reply.content == []
    assert_sent(server)


def test_a_streamed_refusal_is_an_error_that_says_so(server: ScriptedServer) -> None:
    server.sse(
        [
            sse_bytes(
                [
                    openai_chunk({"role": "assistant", "refusal": ""}),
                    openai_chunk({"refusal": "I can't "}),
                    openai_chunk({"refusal": "help."}),
                    openai_chunk({}, "stop"),
                ],
                done=True,
            )
        ]
    )
    reply = openai_client(server, stream=True)(simple_request())
    assert reply.stop_reason == "error"
    assert reply.error_message == "OpenAI model refused to answer: I can't help."
    assert_sent(server, stream=True)


def test_a_streamed_content_filter_stop_keeps_the_text(server: ScriptedServer) -> None:
    server.sse(
        [sse_bytes([openai_chunk({"content": "Partial"}), openai_chunk({}, "content_filter")], done=True)]
    )
    reply = openai_client(server, stream=True)(simple_request())
    assert (reply.stop_reason, reply.content) == ("error", [TextContent("Partial")])
    assert reply.error_message is not None and "content_filter" in reply.error_message
    assert_sent(server, stream=True)


def test_legacy_function_call_is_read(server: ScriptedServer) -> None:
    body = openai_completion(None, finish="function_call")
    body["choices"][0]["message"]["function_call"] = {"name": "getWeather", "arguments": '{"city": "Oslo"}'}
    server.json(body)
    [call] = openai_client(server)(simple_request()).content
    assert isinstance(call, AgentToolCall)
    assert (call.name, call.arguments) == ("getWeather", {"city": "Oslo"})
    assert call.id.startswith("call_")
    assert_sent(server)


def test_an_error_object_with_status_200_is_an_error(server: ScriptedServer) -> None:
    server.json({"error": {"message": "Upstream provider failed", "code": 502}})
    with pytest.raises(LlmError, match="Upstream provider failed") as info:
        openai_client(server)(simple_request())
    assert info.value.status == 502
    assert_sent(server)


def test_a_reply_without_choices_is_an_error(server: ScriptedServer) -> None:
    server.json({"id": "x", "choices": []})
    with pytest.raises(LlmError, match="no choices"):
        openai_client(server)(simple_request())
    assert_sent(server)


# --- streaming --------------------------------------------------------------------------------------

STREAM_CHUNKS = [
    openai_chunk({"role": "assistant", "content": ""}),
    openai_chunk({"reasoning_content": "Think "}),
    openai_chunk({"reasoning_content": "é日🎉."}),
    openai_chunk({"content": "Héllo, "}),
    openai_chunk({"content": "wörld 日本!"}),
    openai_chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_x",
                    "type": "function",
                    "function": {"name": "getWeather", "arguments": ""},
                }
            ]
        }
    ),
    openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
    openai_chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_y",
                    "type": "function",
                    "function": {"name": "getWeather", "arguments": '{"city": '},
                }
            ]
        }
    ),
    openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Zürich"}'}}]}),
    openai_chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"Rome"}'}}]}),
    openai_chunk({}, "tool_calls"),
    {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
    },
]


@pytest.mark.parametrize("size", [1, 2, 7, 64, 100_000])
def test_stream_split_at_awkward_byte_boundaries(server: ScriptedServer, size: int) -> None:
    server.sse(split_every(sse_bytes(STREAM_CHUNKS, done=True), size))
    events = Collector()
    reply = openai_client(server, stream=True)(simple_request(), on_update=events)

    assert reply.content == [
        ThinkingContent("Think é日🎉."),
        TextContent("Héllo, wörld 日本!"),
        AgentToolCall("call_x", "getWeather", {"city": "Zürich"}),
        AgentToolCall("call_y", "getWeather", {"city": "Rome"}),
    ]
    assert reply.stop_reason == "toolUse"
    assert reply.usage == LlmUsage(input=50, output=20, total_tokens=70)
    assert events.text("thinking") == "Think é日🎉."
    assert events.text("text") == "Héllo, wörld 日本!"
    assert [e.content_index for e in events.events if e.kind == "text"] == [1, 1]
    calls = [e for e in events.events if e.kind == "tool_call"]
    assert "".join(e.delta for e in calls if e.content_index == 2) == '{"city": "Zürich"}'
    assert {(e.content_index, e.tool_call_id, e.tool_name) for e in calls} == {
        (2, "call_x", "getWeather"),
        (3, "call_y", "getWeather"),
    }
    assert_sent(server, stream=True)


def test_a_new_call_id_at_a_used_index_starts_a_new_call(server: ScriptedServer) -> None:
    def call(call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"index": 0, "function": {"arguments": arguments}}
        if call_id is not None:
            entry.update(id=call_id, type="function")
            entry["function"]["name"] = name
        return openai_chunk({"tool_calls": [entry]})

    server.sse(
        [
            sse_bytes(
                [
                    call("call_a", "getWeather", '{"city": '),
                    call(None, None, '"Paris"}'),
                    call("call_b", "getTime", '{"zone": "UTC"}'),  # same index 0, a new id
                    openai_chunk({}, "tool_calls"),
                ],
                done=True,
            )
        ]
    )
    events = Collector()
    reply = openai_client(server, stream=True)(simple_request(), on_update=events)
    assert reply.content == [
        AgentToolCall("call_a", "getWeather", {"city": "Paris"}),
        AgentToolCall("call_b", "getTime", {"zone": "UTC"}),
    ]
    assert [(e.content_index, e.tool_call_id) for e in events.events] == [
        (0, "call_a"),
        (0, "call_a"),
        (1, "call_b"),
    ]
    assert_sent(server, stream=True)


def test_stream_with_comments_blank_lines_and_crlf(server: ScriptedServer) -> None:
    body = (
        b": OPENROUTER PROCESSING\r\n\r\n\r\n"
        + sse_bytes([openai_chunk({"content": "A"})]).replace(b"\n", b"\r\n")
        + b": keep-alive\n\n"
        + sse_bytes([openai_chunk({"content": "B"}, "stop")], done=True)
    )
    server.sse(split_every(body, 3))
    reply = openai_client(server, stream=True)(simple_request())
    assert reply.content == [TextContent("AB")]
    assert reply.stop_reason == "stop"
    assert reply.usage is None
    assert_sent(server, stream=True)


def test_stream_answered_as_whole_json_is_read(server: ScriptedServer) -> None:
    server.json(openai_completion("not streamed"))
    reply = openai_client(server, stream=True)(simple_request(), on_update=Collector())
    assert reply.content == [TextContent("not streamed")]
    assert_sent(server, stream=True)


def test_events_reach_on_update_on_the_calling_thread(server: ScriptedServer) -> None:
    server.sse(split_every(sse_bytes(STREAM_CHUNKS, done=True), 5))
    threads: set[int] = set()
    openai_client(server, stream=True)(
        simple_request(), on_update=lambda _e: threads.add(threading.get_ident())
    )
    assert threads == {threading.get_ident()}
    assert_sent(server, stream=True)


# --- failures -------------------------------------------------------------------------------------


def test_401_carries_the_provider_text_and_status_and_never_the_key(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.json(
        {
            "error": {
                "message": f"Incorrect API key provided: {KEY}.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
        status=401,
    )
    client = openai_client(server)
    events = Collector()
    with pytest.raises(LlmError) as info:
        client(simple_request(), on_update=events)
    error = info.value
    assert error.status == 401
    assert "HTTP 401" in str(error)
    assert "Incorrect API key provided" in str(error)
    assert error.provider_message is not None
    assert error.provider_message.startswith("Incorrect API key provided")
    assert len(server.requests) == 1  # 4xx: not retried
    assert_no_key(leak_texts(error, caplog.records, events.events, client))


def test_malformed_json_body_fails_with_a_clear_error(server: ScriptedServer) -> None:
    server.text('{"choices": [{"message": ')
    with pytest.raises(LlmError, match="not valid JSON") as info:
        openai_client(server)(simple_request())
    assert info.value.status == 200
    assert len(server.requests) == 1
    assert_sent(server)


def test_connection_closed_mid_stream(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    data = sse_bytes(STREAM_CHUNKS[:5])
    server.sse(split_every(data, 11), finish=False)
    events = Collector()
    client = openai_client(server, stream=True)
    with pytest.raises(LlmStreamError, match="stream broke off") as info:
        client(simple_request(), on_update=events)
    assert events.text() == "Héllo, wörld 日本!"  # what arrived was reported
    assert "not retried" in str(info.value)
    assert len(server.requests) == 1
    assert_no_key(leak_texts(info.value, caplog.records, events.events, client))


def test_stream_ending_without_done_is_an_error(server: ScriptedServer) -> None:
    server.sse([sse_bytes(STREAM_CHUNKS[:4])])
    with pytest.raises(LlmStreamError, match=r"broke off.*\[DONE\]"):
        openai_client(server, stream=True, http=fast(max_retries=0))(simple_request())
    assert_sent(server, stream=True)


def test_stream_broken_before_any_delta_is_retried(server: ScriptedServer) -> None:
    server.sse([sse_bytes(STREAM_CHUNKS[:1])], finish=False)
    server.sse([sse_bytes(STREAM_CHUNKS, done=True)])
    reply = openai_client(server, stream=True)(simple_request())
    assert len(reply.content) == 4
    assert len(server.requests) == 2
    assert_sent(server, stream=True, count=2)


def test_slow_server_times_out(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = openai_client(server, http=fast(timeout=0.3, max_retries=0))
    error = error_while_held(server, openai_completion("too late"), client)
    assert isinstance(error, LlmTimeoutError) and "timed out" in str(error)
    assert_no_key(leak_texts(error, caplog.records, client=client))


def test_a_timeout_is_retried(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="yiemagent.llm")
    release = threading.Event()  # the first reply never comes while the client waits
    server.json(openai_completion("too late"), wait=release)
    server.json(openai_completion("second try"))
    client = openai_client(server, http=fast(max_retries=1))
    # Only the first request, whose server stays silent, gets a short timeout: the retry keeps
    # the client's ample one, so a busy machine cannot make the retry time out too.
    session = client._transport.session
    post, short = session.post, [0.3]

    def post_with_a_short_first_timeout(*args: Any, **kwargs: Any) -> Any:
        if short:
            kwargs["timeout"] = short.pop()
        return post(*args, **kwargs)

    monkeypatch.setattr(session, "post", post_with_a_short_first_timeout)
    try:
        reply = client(simple_request())
    finally:
        release.set()
    assert reply.content == [TextContent("second try")]
    assert len(server.requests) == 2
    [retrying] = caplog.records
    assert "timed out" in retrying.getMessage()


def test_abort_during_a_request_ends_the_call(server: ScriptedServer) -> None:
    error = error_while_held(
        server,
        openai_completion("too late"),
        openai_client(server, http=fast(timeout=30)),
        signal=AbortSignal(),
    )
    assert isinstance(error, LlmAbortedError) and "aborted" in str(error)


def http_helpers_since(before: set[threading.Thread]) -> list[threading.Thread]:
    """The transport's request threads started since ``before`` was taken."""
    return [t for t in threading.enumerate() if t.name == "yiemagent-llm-http" and t not in before]


def test_abort_before_the_reply_headers_ends_the_request_thread(server: ScriptedServer) -> None:
    release = threading.Event()  # the server never answers unless the test gives up
    server.json(openai_completion("too late"), wait=release)
    signal = AbortSignal()
    before = set(threading.enumerate())
    workers: list[threading.Thread] = []

    def abort_when_received() -> None:
        server.wait_for_requests(1)
        workers.extend(http_helpers_since(before))
        signal.abort()

    aborter = threading.Thread(target=abort_when_received)
    aborter.start()
    try:
        with pytest.raises(LlmAbortedError):
            openai_client(server, http=fast(timeout=30))(simple_request(), signal=signal)
        aborter.join()
        [worker] = workers
        worker.join(5)  # its socket was shut down: it must not wait for the server or the timeout
        assert not worker.is_alive()
    finally:
        release.set()
        aborter.join()


def test_close_ends_a_request_in_flight(server: ScriptedServer) -> None:
    release = threading.Event()
    server.json(openai_completion("too late"), wait=release)
    client = openai_client(server, http=fast(timeout=30))
    before = set(threading.enumerate())
    failures: list[LlmError] = []

    def call() -> None:
        try:
            client(simple_request())
        except LlmError as error:
            failures.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        assert server.wait_for_requests(1)
        [worker] = http_helpers_since(before)
        client.close()
        caller.join(5)
        worker.join(5)
        assert not caller.is_alive() and not worker.is_alive()
        [error] = failures
        assert "closed" in str(error) and not error.retryable
        assert len(server.requests) == 1  # not retried
    finally:
        release.set()
        caller.join()


def test_one_connection_serves_successive_calls(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="urllib3.connectionpool")
    client = openai_client(server)
    for _ in range(3):  # ending an attempt must not shut the socket it gave back to the pool
        server.json(openai_completion())
        client(simple_request())
    opened = [
        r
        for r in caplog.records
        if "Starting new HTTP connection" in r.getMessage()
        or "Resetting dropped connection" in r.getMessage()
    ]
    assert len(opened) == 1
    assert len(server.requests) == 3


def test_abort_mid_stream_stops_events(server: ScriptedServer) -> None:
    release = threading.Event()
    first, rest = sse_bytes(STREAM_CHUNKS[:3]), sse_bytes(STREAM_CHUNKS[3:], done=True)
    server.sse([first, rest], wait=release, wait_after=1)  # stalls after the first deltas
    signal = AbortSignal()
    events = Collector()

    def on_update(event: Any) -> None:
        events(event)
        signal.abort()

    try:
        with pytest.raises(LlmAbortedError):
            openai_client(server, stream=True, http=fast(timeout=30))(
                simple_request(), on_update=on_update, signal=signal
            )
    finally:
        release.set()
    assert len(events.events) == 1


def test_an_aborted_signal_sends_nothing(server: ScriptedServer) -> None:
    with pytest.raises(LlmAbortedError):
        openai_client(server)(simple_request(), signal=AbortSignal(aborted=True))
    assert server.requests == []

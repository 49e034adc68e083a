"""Issue 10 (hardening), item 19: a reply's size is bounded by ``max_response_bytes`` and a call's
duration by ``deadline_s``, whatever the server sends and however slowly it sends it.

The trickling replies below last up to ``TRICKLE_CHUNKS * TRICKLE_PAUSE_S`` (20 s) and end by
themselves; a client that honours its limits gives up long before, so no test waits for them.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from llm_helpers import (
    Collector,
    anthropic_client,
    anthropic_message,
    error_while_held,
    fast,
    openai_client,
    openai_completion,
    simple_request,
)
from llm_server import Reply, ScriptedServer, sse_bytes

from yiemagent.core._content import TextContent
from yiemagent.llm import HttpOptions, LlmClient, LlmError, LlmTimeoutError
from yiemagent.llm.http._transport import DEFAULT_MAX_RESPONSE_BYTES

ClientFactory = Callable[..., LlmClient]
CLIENTS = [pytest.param(openai_client, id="openai"), pytest.param(anthropic_client, id="anthropic")]
LIMIT = 10_000
TRICKLE_CHUNKS = 400
TRICKLE_PAUSE_S = 0.05
JSON = {"Content-Type": "application/json"}
SSE = {"Content-Type": "text/event-stream"}


def good_reply(make: ClientFactory, padding: int = 0) -> dict[str, Any]:
    """A successful whole reply for the client ``make`` builds, ``padding`` characters longer than
    it needs to be (in a field the clients ignore)."""
    body = (
        openai_completion("fine")
        if make is openai_client
        else anthropic_message([{"type": "text", "text": "fine"}])
    )
    return {**body, "padding": "x" * padding}


def assert_too_large(error: BaseException) -> None:
    """``error`` is the final ``LlmError`` of a reply over ``LIMIT``."""
    assert isinstance(error, LlmError) and not isinstance(error, LlmTimeoutError), error
    assert f"larger than max_response_bytes ({LIMIT} bytes)" in str(error)
    assert not error.retryable


def test_the_default_limit_is_64_mib() -> None:
    assert DEFAULT_MAX_RESPONSE_BYTES == 64 * 2**20


@pytest.mark.parametrize(
    "option",
    [{"max_response_bytes": 0}, {"max_response_bytes": 1.5}, {"deadline_s": 0}, {"deadline_s": -1.0}],
)
def test_limits_must_be_positive(option: dict[str, Any]) -> None:
    # Checked where the options are made, so no client ever starts with them.
    with pytest.raises(ValueError, match=next(iter(option))):
        HttpOptions(**option)


@pytest.mark.parametrize("make", CLIENTS)
def test_a_reply_within_the_limit_is_read(server: ScriptedServer, make: ClientFactory) -> None:
    server.json(good_reply(make, padding=LIMIT - 1_000))
    reply = make(server, http=fast(max_response_bytes=LIMIT, deadline_s=30.0))(simple_request())
    assert reply.content == [TextContent("fine")]


@pytest.mark.parametrize("make", CLIENTS)
def test_a_declared_length_over_the_limit_is_refused_unread(
    server: ScriptedServer, make: ClientFactory
) -> None:
    server.json(good_reply(make, padding=LIMIT))
    with pytest.raises(LlmError) as info:
        make(server, http=fast(max_response_bytes=LIMIT))(simple_request())
    assert_too_large(info.value)
    assert "Content-Length" in str(info.value)
    assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize("make", CLIENTS)
def test_a_body_over_the_limit_fails_while_it_arrives(server: ScriptedServer, make: ClientFactory) -> None:
    # No Content-Length: the body comes in chunks, past the limit, then the server holds the rest
    # and finally hangs up. A client that read the whole body first would see only the hang-up.
    body = json.dumps(good_reply(make, padding=4 * LIMIT)).encode()
    hold = threading.Event()
    server.add(
        Reply(
            200,
            JSON,
            chunks=[body[i : i + 1000] for i in range(0, len(body), 1000)],
            wait=hold,
            wait_after=2 * LIMIT // 1000,
            finish=False,
        )
    )
    try:
        with pytest.raises(LlmError) as info:
            make(server, http=fast(max_response_bytes=LIMIT))(simple_request())
    finally:
        hold.set()
    assert_too_large(info.value)


@pytest.mark.parametrize("make", CLIENTS)
def test_a_stream_over_the_limit_fails_while_it_arrives(server: ScriptedServer, make: ClientFactory) -> None:
    hold = threading.Event()
    server.add(
        Reply(
            200,
            SSE,
            chunks=[b": keep-alive " + b"x" * 990 + b"\n\n"] * 30,
            wait=hold,
            wait_after=20,
            finish=False,
        )
    )
    try:
        with pytest.raises(LlmError) as info:
            make(server, stream=True, http=fast(max_response_bytes=LIMIT))(simple_request())
    finally:
        hold.set()
    assert_too_large(info.value)


@pytest.mark.parametrize("make", CLIENTS)
def test_a_compressed_body_counts_as_it_unpacks(server: ScriptedServer, make: ClientFactory) -> None:
    packed = gzip.compress(json.dumps(good_reply(make, padding=20 * LIMIT)).encode())
    assert len(packed) < LIMIT  # only the unpacked size is over the limit
    server.add(Reply(200, {**JSON, "Content-Encoding": "gzip"}, packed))
    with pytest.raises(LlmError) as info:
        make(server, http=fast(max_response_bytes=LIMIT))(simple_request())
    assert_too_large(info.value)


def trickle(server: ScriptedServer, piece: bytes, content_type: dict[str, str]) -> None:
    """Queue a reply that sends ``piece`` every ``TRICKLE_PAUSE_S`` and never completes: each
    piece arrives well within any read timeout, so only a deadline ends the call."""
    server.add(
        Reply(200, content_type, chunks=[piece] * TRICKLE_CHUNKS, pause_s=TRICKLE_PAUSE_S, finish=False)
    )


def assert_past_deadline(error: BaseException) -> None:
    """``error`` is the final ``LlmTimeoutError`` of a call past its 0.3 s deadline."""
    assert isinstance(error, LlmTimeoutError), error
    assert "did not finish within its deadline_s of 0.3 s" in str(error)
    assert not error.retryable


@pytest.mark.parametrize("make", CLIENTS)
def test_a_trickling_body_ends_at_the_deadline(server: ScriptedServer, make: ClientFactory) -> None:
    trickle(server, b" ", JSON)
    with pytest.raises(LlmError) as info:
        make(server, http=fast(deadline_s=0.3))(simple_request())
    assert_past_deadline(info.value)
    assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize("make", CLIENTS)
def test_a_trickling_stream_ends_at_the_deadline(server: ScriptedServer, make: ClientFactory) -> None:
    first = (
        sse_bytes([{"choices": [{"index": 0, "delta": {"content": "Hel"}}]}])
        if make is openai_client
        else sse_bytes(
            [
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
            ],
            named=True,
        )
    )
    server.add(
        Reply(
            200, SSE, chunks=[first, *[b": tick\n\n"] * TRICKLE_CHUNKS], pause_s=TRICKLE_PAUSE_S, finish=False
        )
    )
    events = Collector()
    with pytest.raises(LlmError) as info:
        make(server, stream=True, http=fast(deadline_s=0.3))(simple_request(), on_update=events)
    assert_past_deadline(info.value)
    assert events.text() == "Hel"  # what arrived in time was reported
    assert len(server.requests) == 1


@pytest.mark.parametrize("make", CLIENTS)
def test_a_silent_server_ends_at_the_deadline(server: ScriptedServer, make: ClientFactory) -> None:
    error = error_while_held(server, good_reply(make), make(server, http=fast(deadline_s=0.3)))
    assert_past_deadline(error)


@pytest.mark.parametrize("make", CLIENTS)
def test_the_deadline_covers_retry_waits(server: ScriptedServer, make: ClientFactory) -> None:
    # The server asks for a 5 s pause (allowed by max_retry_delay_ms); waiting it out would end
    # past the deadline, so the call ends now, saying why and what failed.
    server.json({"error": {"message": "overloaded"}}, status=503, headers={"Retry-After": "5"})
    server.json(good_reply(make))
    with pytest.raises(LlmError) as info:
        make(server, http=fast(deadline_s=0.3))(simple_request())
    assert_past_deadline(info.value)
    assert "HTTP 503" in str(info.value) and "overloaded" in str(info.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("make", CLIENTS)
def test_retries_within_the_deadline_still_happen(server: ScriptedServer, make: ClientFactory) -> None:
    server.json({"error": {"message": "overloaded"}}, status=503)
    server.json(good_reply(make))
    reply = make(server, http=fast(deadline_s=30.0))(simple_request())
    assert reply.content == [TextContent("fine")]
    assert len(server.requests) == 2

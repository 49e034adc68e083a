"""Retries: which failures are retried, server-requested delays, the cap, giving up, abort."""

from __future__ import annotations

import email.utils
import logging
import socket
from typing import Any

import pytest
from llm_helpers import (
    FAST,
    KEY,
    Collector,
    assert_no_key,
    fast,
    leak_texts,
    openai_client,
    openai_completion,
    simple_request,
)
from llm_server import ScriptedServer

from yiemagent.core._content import TextContent
from yiemagent.core._tools import AbortSignal
from yiemagent.llm import LlmAbortedError, LlmError, OpenAIChatClient, RetryPolicy
from yiemagent.llm.http._retry import backoff_delay, call_with_retries, parse_retry_after


def error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "server_error", "code": None}}


# --- parse_retry_after ----------------------------------------------------------------------------

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"Retry-After": "-4"}, 0.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "200", "Retry-After": "9"}, 0.2),  # the precise one wins
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"Retry-After": email.utils.formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"Retry-After": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"Retry-After": "whenever"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_backoff_grows_exponentially_with_bounded_jitter() -> None:
    policy = RetryPolicy(max_retries=5, base_delay_s=1.0, max_backoff_s=6.0)
    for attempt, low in [(1, 1.0), (2, 2.0), (3, 4.0)]:
        assert low <= backoff_delay(policy, attempt) <= min(6.0, low + 1.0)
    assert backoff_delay(policy, 10) == 6.0


# --- call_with_retries on its own -------------------------------------------------------------------


def failing(times: int, error: LlmError, result: str = "ok") -> tuple[list[int], Any]:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return result

    return calls, attempt


def test_retryable_errors_are_retried_until_success() -> None:
    calls, attempt = failing(2, LlmError("busy", status=503, retryable=True, retry_after_s=0))
    assert call_with_retries(attempt, RetryPolicy(max_retries=2)) == "ok"
    assert len(calls) == 3


def test_retries_spent_raise_the_last_error_saying_so() -> None:
    calls, attempt = failing(9, LlmError("busy", status=503, retryable=True, retry_after_s=0))
    with pytest.raises(LlmError, match=r"busy \(gave up after 3 attempts\)") as info:
        call_with_retries(attempt, RetryPolicy(max_retries=2))
    assert info.value.status == 503
    assert not info.value.retryable
    assert len(calls) == 3


def test_non_retryable_errors_and_other_exceptions_are_raised_at_once() -> None:
    calls, attempt = failing(1, LlmError("bad request", status=400))
    with pytest.raises(LlmError, match=r"^bad request$"):
        call_with_retries(attempt, RetryPolicy(max_retries=5))
    assert len(calls) == 1

    def broken() -> str:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        call_with_retries(broken, RetryPolicy(max_retries=5))


@pytest.mark.timeout(20)
def test_abort_during_a_backoff_wait_ends_it_at_once() -> None:
    signal = AbortSignal()

    def attempt() -> str:
        signal.abort()  # the next thing the retry loop does is wait 30 s: it must not
        raise LlmError("busy", status=503, retryable=True, retry_after_s=30)

    with pytest.raises(LlmAbortedError, match="aborted while waiting to retry"):
        call_with_retries(attempt, RetryPolicy(max_retries=3), signal=signal)


# --- over HTTP ------------------------------------------------------------------------------------


def test_429_with_retry_after_then_success(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="yiemagent.llm")
    server.json(error_body("Rate limit reached for gpt-4o-mini"), status=429, headers={"Retry-After": "0.01"})
    server.json(openai_completion("after the wait"))
    reply = openai_client(server)(simple_request())
    assert reply.content == [TextContent("after the wait")]
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    [record] = caplog.records
    assert "retrying in 0.01 s" in record.getMessage()
    assert "HTTP 429" in record.getMessage()


def test_retry_after_ms_is_honoured(server: ScriptedServer) -> None:
    server.json(error_body("slow down"), status=429, headers={"retry-after-ms": "5"})
    server.json(openai_completion())
    openai_client(server)(simple_request())
    assert len(server.requests) == 2


def test_500_then_success(server: ScriptedServer) -> None:
    server.json(error_body("The server had an error while processing your request."), status=500)
    server.json(openai_completion("fine now"))
    assert openai_client(server)(simple_request()).content == [TextContent("fine now")]
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_transient_statuses_are_retried(server: ScriptedServer, status: int) -> None:
    server.json(error_body("transient"), status=status)
    server.json(openai_completion())
    openai_client(server)(simple_request())
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 403, 404, 413, 422])
def test_other_4xx_fail_at_once(server: ScriptedServer, status: int) -> None:
    server.json(error_body("The model `gpt-5o` does not exist"), status=status)
    with pytest.raises(LlmError, match=f"HTTP {status}.*does not exist") as info:
        openai_client(server, http=fast(max_retries=5))(simple_request())
    assert info.value.status == status
    assert len(server.requests) == 1


def test_retry_after_above_the_cap_fails_at_once(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.json(error_body("Rate limit reached"), status=429, headers={"Retry-After": "120"})
    client = openai_client(server, http=fast(max_retries=5, max_retry_delay_ms=1000))
    events = Collector()
    with pytest.raises(LlmError) as info:
        client(simple_request(), on_update=events)
    text = str(info.value)
    assert "retry after 120 s" in text
    assert "max_retry_delay_ms=1000" in text
    assert "Rate limit reached" in text and "HTTP 429" in text
    assert info.value.status == 429
    assert len(server.requests) == 1
    assert_no_key(leak_texts(info.value, caplog.records, events.events, client))


def test_retries_spent_carry_the_provider_text_and_status(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        server.json(error_body(f"Internal error, key {KEY} rejected"), status=503)
    client = openai_client(server, http=fast(max_retries=2))
    with pytest.raises(LlmError) as info:
        client(simple_request())
    text = str(info.value)
    assert "HTTP 503" in text and "Internal error" in text and "gave up after 3 attempts" in text
    assert info.value.status == 503
    assert info.value.provider_message == "Internal error, key *** rejected"
    assert len(server.requests) == 3
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 2
    assert_no_key(leak_texts(info.value, caplog.records, client=client))


def test_connection_refused_is_retried_then_reported(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAIChatClient("m", f"http://127.0.0.1:{port}/v1", api_key=KEY, http=FAST)
    with pytest.raises(LlmError) as info:
        client(simple_request())
    assert str(info.value) == (
        f"cannot connect to http://127.0.0.1:{port}/v1: connection refused (gave up after 3 attempts)"
    )
    assert info.value.status is None
    assert_no_key(leak_texts(info.value, caplog.records, client=client))


@pytest.mark.timeout(20)
def test_abort_during_backoff_over_http(server: ScriptedServer) -> None:
    server.json(error_body("busy"), status=503, headers={"Retry-After": "30"})
    server.json(openai_completion("never asked for"))
    signal = AbortSignal()

    class AbortOnRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "retrying" in record.getMessage():
                signal.abort()

    handler = AbortOnRetry()
    logger = logging.getLogger("yiemagent.llm")
    logger.addHandler(handler)
    try:
        with pytest.raises(LlmAbortedError, match="aborted"):
            openai_client(server, http=fast(max_retries=3))(simple_request(), signal=signal)
    finally:
        logger.removeHandler(handler)
    assert len(server.requests) == 1

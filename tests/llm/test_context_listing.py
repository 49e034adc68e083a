"""The context window read from a server's model listing (``context_window="auto"``): the
shapes servers use, one GET per client, and a listing that cannot be read or gives none never
failing the run. Real HTTP on loopback (``ScriptedServer``) and the real llama-cpp-python server."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from llm_helpers import fast, openai_client, openai_completion
from llm_server import Reply, ScriptedServer

from yiemagent import YiemAgent
from yiemagent.core._content import content_text
from yiemagent.llm import LlmError, OpenAIChatClient
from yiemagent.llm.openai._listing import listed_window

LONG = "word " * 2000  # about 3,400 tokens at any rate from 3 to 6 characters a token


@pytest.mark.parametrize(
    ("entry", "window"),
    [
        ({"id": "m", "max_model_len": 8192}, 8192),  # vLLM
        ({"id": "m", "context_length": 128000}, 128000),  # OpenRouter
        ({"id": "m", "max_context_length": 4096}, 4096),  # LM Studio
        ({"id": "m", "meta": {"n_ctx": 2048, "n_ctx_train": 8192}}, 2048),
        ({"id": "m", "meta": {"n_ctx_train": 8192}}, None),  # training length, not the server's
        ({"id": "m", "max_model_len": True}, None),
        ({"id": "m", "max_model_len": -5}, None),
        ({"id": "m", "max_model_len": "8192"}, None),
        ({"id": "m", "owned_by": "openai"}, None),  # OpenAI's own listing
    ],
)
def test_each_servers_field_is_read_and_nonsense_is_not(entry: dict[str, Any], window: int | None) -> None:
    assert listed_window({"object": "list", "data": [entry]}, "m") == window


def test_the_entry_is_the_models_own_among_several() -> None:
    body = {"data": [{"id": "a", "max_model_len": 100}, {"id": "m", "max_model_len": 200}]}
    assert listed_window(body, "m") == 200
    assert listed_window(body, "other") is None  # several, none of them it: no guess
    assert listed_window({"data": [{"id": "x", "max_model_len": 300}]}, "m") == 300  # the only one
    assert listed_window({"data": "nope"}, "m") is None
    assert listed_window(["not", "a", "listing"], "m") is None


def test_a_listed_window_ends_a_run_that_would_not_fit_before_anything_is_sent() -> None:
    with ScriptedServer() as server:
        server.json({"object": "list", "data": [{"id": "gpt-4o-mini", "max_model_len": 1000}]})
        server.json(openai_completion("should never be asked for"))
        agent = YiemAgent(llm_call=openai_client(server), context_window="auto")
        try:
            response = agent.prompt(LONG, timeout=30)
            agent.reset()  # what the error says to do: the long message is gone
            short = agent.prompt("Hi", timeout=30)  # within the window: sent
        finally:
            agent.shutdown()
    assert response.stop_reason == "context_overflow"
    assert "context window of 1000 tokens" in (response.error_message or "")
    assert short.stop_reason == "stop" and content_text(short.content) == "should never be asked for"
    methods = [(r.method, r.path) for r in server.requests]
    # The listing was read once, for both runs; only the run that fitted was sent.
    assert methods == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    assert "authorization" in server.requests[0].headers  # the key goes with the listing too


def test_without_auto_the_listing_is_never_asked_for() -> None:
    with ScriptedServer() as server:
        server.json(openai_completion("Hello"))
        agent = YiemAgent(llm_call=openai_client(server))
        try:
            assert content_text(agent.prompt("Hi", timeout=30).content) == "Hello"
        finally:
            agent.shutdown()
    assert [r.method for r in server.requests] == ["POST"]


def test_a_listing_that_fails_is_logged_once_and_the_runs_go_on_without_a_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with ScriptedServer() as server:
        server.json({"error": {"message": "no such route"}}, status=404)
        server.json(openai_completion("first"))
        server.json(openai_completion("second"))
        agent = YiemAgent(llm_call=openai_client(server, http=fast(max_retries=0)), context_window="auto")
        try:
            with caplog.at_level(logging.WARNING, logger="yiemagent"):
                first = agent.prompt(LONG, timeout=30)
                second = agent.prompt(LONG, timeout=30)
        finally:
            agent.shutdown()
    assert (content_text(first.content), content_text(second.content)) == ("first", "second")
    warnings = [r.getMessage() for r in caplog.records if "context window" in r.getMessage()]
    assert len(warnings) == 1 and "HTTP 404" in warnings[0] and "no such route" in warnings[0]
    assert [r.method for r in server.requests] == ["GET", "POST", "POST"]


def test_the_client_reads_the_listing_once_and_raises_its_failure_once() -> None:
    with ScriptedServer() as server:
        server.text("this is not json")
        client = openai_client(server, http=fast(max_retries=0))
        with pytest.raises(LlmError, match="not valid JSON"):
            client.listed_context_window()
        assert client.listed_context_window() is None
    assert len(server.requests) == 1


def test_the_real_llama_cpp_server_lists_its_window_and_a_run_reads_it(server_url: str) -> None:
    client = OpenAIChatClient("smollm2", server_url, api_key_env=None, extra_body={"max_tokens": 8})
    assert client.listed_context_window() == 4096  # llama.cpp lists the context it runs (meta.n_ctx)
    agent = YiemAgent(llm_call=client, context_window="auto")
    try:
        response = agent.prompt("Say hello.", timeout=120)
    finally:
        agent.shutdown()
    assert response.stop_reason in ("stop", "length") and response.error_message is None


def test_a_listing_that_may_come_later_is_asked_again_and_a_redirect_is_not_followed() -> None:
    with ScriptedServer() as server:
        server.json({"error": {"message": "warming up"}}, status=503)
        server.json({"data": [{"id": "gpt-4o-mini", "max_model_len": 4096}]})
        client = openai_client(server, http=fast(max_retries=0))
        with pytest.raises(LlmError, match="HTTP 503"):
            client.listed_context_window()
        assert client.listed_context_window() == 4096  # asked again: the server is up now
        assert client.listed_context_window() == 4096  # and kept
    assert len(server.requests) == 2
    with ScriptedServer() as elsewhere, ScriptedServer() as server:
        server.add(Reply(302, {"Location": f"{elsewhere.url}/v1/models"}, b""))
        client = openai_client(server, http=fast(max_retries=0))
        with pytest.raises(LlmError, match="redirected the request"):
            client.listed_context_window()
    assert elsewhere.requests == []  # the key never went where the redirect pointed

"""``HttpOptions``: the provider clients' transport settings in one checked value, and how
``create_llm_call`` sorts plain keywords into it and into the client's own keywords (issue 20).

Every behaviour below goes through a real loopback server: the settings are proven by what the
server receives (how many attempts, which body), not by reading attributes back.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from llm_helpers import KEY, anthropic_message, fast, openai_completion, simple_request
from llm_server import ScriptedServer

from yiemagent.llm import (
    AnthropicMessagesClient,
    HttpOptions,
    LlmClient,
    LlmError,
    OpenAIChatClient,
    create_llm_call,
)

CLIENTS = [OpenAIChatClient, AnthropicMessagesClient]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def error_body() -> dict[str, Any]:
    return {"error": {"message": "overloaded", "type": "server_error"}}


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("timeout", 0),
        ("timeout", -1.0),
        ("timeout", "30"),
        ("timeout", True),
        ("max_retries", -1),
        ("max_retries", 1.5),
        ("max_retries", True),
        ("max_retry_delay_ms", -1),
        ("max_retry_delay_ms", float("nan")),
        ("retry_base_delay_s", float("nan")),
        ("timeout", float("nan")),
        ("retry_base_delay_s", -0.5),
        ("retry_max_backoff_s", "8"),
        ("max_response_bytes", 0),
        ("max_response_bytes", 1.5),
        ("max_response_bytes", True),
        ("deadline_s", 0),
        ("deadline_s", -1.0),
        ("log_bodies", "yes"),
    ],
)
def test_every_setting_is_checked_when_the_options_are_made(field: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=f"^{field} must .*got {bad!r}$"):
        HttpOptions(**{field: bad})


def test_the_defaults_are_the_clients_old_defaults() -> None:
    options = HttpOptions()
    assert (
        options.timeout,
        options.max_retries,
        options.max_retry_delay_ms,
        options.retry_base_delay_s,
        options.retry_max_backoff_s,
        options.max_response_bytes,
        options.deadline_s,
        options.log_bodies,
        options.send_session_id,
    ) == (600.0, 2, 60_000, 0.5, 8.0, 64 * 2**20, None, None, True)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        options.timeout = 5  # type: ignore[misc]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_refuses_settings_that_are_not_http_options(client: type[LlmClient]) -> None:
    with pytest.raises(
        TypeError,
        match=r"http must be an HttpOptions .*got dict; e\.g\. "
        r"http=HttpOptions\(timeout=30\)",
    ):
        client("m", "http://127.0.0.1:9", KEY, http={"timeout": 5})  # type: ignore[arg-type]


@pytest.mark.parametrize("client", CLIENTS)
def test_the_old_transport_keywords_are_gone_from_the_clients(client: type[LlmClient]) -> None:
    with pytest.raises(TypeError, match="timeout"):
        client("m", "http://127.0.0.1:9", KEY, timeout=5)  # type: ignore[call-arg]


def test_one_options_value_serves_two_clients_of_different_providers(server: ScriptedServer) -> None:
    shared = fast(max_retries=0)
    for _ in range(2):
        server.json(error_body(), status=503)
    openai = OpenAIChatClient("gpt-4o-mini", f"{server.url}/v1", KEY, http=shared)
    anthropic = AnthropicMessagesClient("claude-haiku-4-5", server.url, KEY, http=shared)
    for client in (openai, anthropic):
        with pytest.raises(LlmError, match="HTTP 503"):
            client(simple_request())
    assert len(server.requests) == 2  # one attempt each: neither retried
    assert openai.http is anthropic.http is shared


def test_create_llm_call_sorts_transport_keywords_into_http_options(server: ScriptedServer) -> None:
    for _ in range(3):
        server.json(error_body(), status=503)
    client = create_llm_call(
        "ollama:qwen2.5",
        base_url=f"{server.url}/v1",
        stream=False,
        timeout=30.0,
        max_retries=1,
        retry_base_delay_s=0.001,
        retry_max_backoff_s=0.005,
    )
    assert isinstance(client, OpenAIChatClient)
    assert client.http == HttpOptions(
        timeout=30.0, max_retries=1, retry_base_delay_s=0.001, retry_max_backoff_s=0.005
    )
    with pytest.raises(LlmError, match="gave up after 2 attempts"):
        client(simple_request())
    assert len(server.requests) == 2


def test_keywords_are_set_over_the_http_options_given(server: ScriptedServer) -> None:
    server.json(error_body(), status=503)
    client = create_llm_call(
        f"anthropic:claude-haiku-4-5@{server.url}",
        api_key=KEY,
        http=fast(max_retries=4),
        max_retries=0,
        max_tokens=64,
    )
    assert isinstance(client, AnthropicMessagesClient)
    assert client.http == fast(max_retries=0)
    with pytest.raises(LlmError, match="HTTP 503"):
        client(simple_request())
    assert len(server.requests) == 1
    server.json(anthropic_message([{"type": "text", "text": "hi"}]))
    client(simple_request())
    assert server.requests[1].body["max_tokens"] == 64  # the client's own keyword went to it


def test_http_options_alone_reach_the_client(server: ScriptedServer) -> None:
    server.json(openai_completion("fine"))
    client = create_llm_call(f"openai:qwen@{server.url}/v1", api_key=KEY, http=fast(send_session_id=False))
    client(simple_request(), session_id="conv-7")
    assert "prompt_cache_key" not in server.requests[0].body


def test_a_bad_transport_keyword_is_the_options_own_error() -> None:
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds, got 0"):
        create_llm_call("ollama:qwen2.5", timeout=0)


def test_an_unknown_option_names_itself_and_what_is_taken() -> None:
    with pytest.raises(TypeError) as info:
        create_llm_call("openai:gpt-4o-mini", temprature=0.2, timeout=5)
    text = str(info.value)
    assert text.startswith(
        "create_llm_call('openai:gpt-4o-mini') got unknown option(s) 'temprature': OpenAIChatClient takes "
    )
    assert "extra_body" in text and "tool_choice" in text  # the client's own
    assert "HttpOptions takes " in text and "max_retries" in text  # and the transport's
    with pytest.raises(TypeError, match=r"unknown option\(s\) 'model'.*the spec names the model"):
        create_llm_call("openai:gpt-4o-mini", model="gpt-4o")  # the spec names the model


def test_http_options_given_to_the_local_model_are_refused() -> None:
    with pytest.raises(TypeError, match="local model runs in this process and makes no HTTP"):
        create_llm_call("local", http=HttpOptions())
    with pytest.raises(
        TypeError,
        match=r"unknown option\(s\) 'timeout': LlamaCppClient takes "
        r".*max_tokens.*\(it runs in this process: no HTTP",
    ):
        create_llm_call("local", timeout=5)


def test_the_factory_refuses_settings_that_are_not_http_options() -> None:
    with pytest.raises(TypeError, match="http must be an HttpOptions"):
        create_llm_call("ollama:qwen2.5", http={"timeout": 5}, max_retries=0)  # type: ignore[arg-type]

"""create_llm_call: provider strings, base URLs, which key is sent where."""

from __future__ import annotations

import pytest
from llm_helpers import FAST, KEY, anthropic_message, openai_completion, simple_request
from llm_server import ScriptedServer

from yiemagent.core._content import TextContent
from yiemagent.llm import (
    AnthropicMessagesClient,
    LlmClient,
    OpenAIChatClient,
    create_llm_call,
    parse_llm_spec,
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENROUTER_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:gpt-4o-mini", ("openai", "gpt-4o-mini", None)),
        ("Anthropic:claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5", None)),
        ("ollama:qwen2.5:7b", ("ollama", "qwen2.5:7b", None)),
        ("openai:qwen@http://gpu:8000/v1", ("openai", "qwen", "http://gpu:8000/v1")),
        ("anthropic:claude-3@20240229", ("anthropic", "claude-3@20240229", None)),
        ("http://localhost:8080/v1", (None, None, "http://localhost:8080/v1")),
    ],
)
def test_parse_llm_spec(spec: str, expected: tuple[str | None, ...]) -> None:
    assert parse_llm_spec(spec) == expected


@pytest.mark.parametrize("spec", ["", "gpt-4o", "openai:", ":gpt-4o"])
def test_unreadable_specs_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="spec"):
        create_llm_call(spec)


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown LLM provider 'gemini'.*anthropic.*ollama"):
        create_llm_call("gemini:gemini-2.0-flash")


def test_openai_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = create_llm_call("openai:gpt-4o-mini")
    assert isinstance(client, OpenAIChatClient)
    assert (client.model, client.provider, client.base_url) == (
        "gpt-4o-mini",
        "openai",
        "https://api.openai.com/v1",
    )
    assert client.has_api_key
    assert KEY not in repr(client)


def test_openai_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.local/v1")
    assert create_llm_call("openai:gpt-4o-mini").base_url == "http://proxy.local/v1"


def test_anthropic_defaults_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    client = create_llm_call("anthropic:claude-sonnet-4-5", max_tokens=1024, stream=True)
    assert isinstance(client, AnthropicMessagesClient)
    assert (client.model, client.base_url, client.max_tokens, client.stream) == (
        "claude-sonnet-4-5",
        "https://api.anthropic.com",
        1024,
        True,
    )
    assert client.endpoint == "https://api.anthropic.com/v1/messages"
    assert client.has_api_key


def test_ollama_is_the_openai_api_on_localhost_and_never_gets_the_openai_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = create_llm_call("ollama:qwen2.5")
    assert isinstance(client, OpenAIChatClient)
    assert (client.base_url, client.provider, client.model) == (
        "http://localhost:11434/v1",
        "ollama",
        "qwen2.5",
    )
    assert not client.has_api_key
    assert client.endpoint == "http://localhost:11434/v1/chat/completions"


def test_openrouter_uses_its_own_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    client = create_llm_call("openrouter:meta-llama/llama-3.1-8b-instruct")
    assert client.base_url == "https://openrouter.ai/api/v1"
    assert client._api_key.reveal() == KEY


def test_ollama_spec_talks_to_the_given_server(server: ScriptedServer) -> None:
    server.json(openai_completion("local answer"))
    client = create_llm_call("ollama:qwen2.5", base_url=f"{server.url}/v1", http=FAST)
    assert client(simple_request()).content == [TextContent("local answer")]
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "qwen2.5"
    assert "authorization" not in sent.headers


def test_model_at_base_url_form(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.json(openai_completion())
    client = create_llm_call(f"openai:qwen2.5-7b@{server.url}/v1", http=FAST)
    client(simple_request())
    assert server.requests[0].body["model"] == "qwen2.5-7b"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_anthropic_at_base_url_form(server: ScriptedServer) -> None:
    server.json(anthropic_message([{"type": "text", "text": "hi"}]))
    client = create_llm_call(f"anthropic:claude-haiku-4-5@{server.url}", api_key=KEY, http=FAST)
    client(simple_request())
    assert server.requests[0].path == "/v1/messages"
    assert server.requests[0].headers["x-api-key"] == KEY


def test_bare_base_url_needs_a_model_and_sends_no_key(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(ValueError, match="pass the model"):
        create_llm_call(f"{server.url}/v1")
    server.json(openai_completion())
    client = create_llm_call(f"{server.url}/v1", model="llama3", http=FAST)
    assert client.provider == "openai-compatible"
    client(simple_request())
    assert server.requests[0].body["model"] == "llama3"
    assert "authorization" not in server.requests[0].headers


@pytest.mark.parametrize("client", [OpenAIChatClient, AnthropicMessagesClient])
@pytest.mark.parametrize("key", ["messages", "stream"])
def test_extra_body_may_not_replace_what_the_client_builds(client: type[LlmClient], key: str) -> None:
    with pytest.raises(ValueError, match=f"extra_body must not set {key}"):
        client("some-model", "http://127.0.0.1:9", KEY, extra_body={key: True})

"""How the ``yiemagent`` command picks its model (``cli_model.choose_model``): the default from the
environment, ``--base-url`` combinations, and the embedded model, present or not. In-process:
no call is made to any model, only clients are built."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

import yiemagent.cli_model as cli_model
from yiemagent import OpenAIChatClient
from yiemagent.cli_model import INSTALL_LOCAL, CliError, choose_model, default_spec
from yiemagent.scripted import ScriptedModel


@pytest.mark.parametrize(("env", "spec"), [
    ({"OPENAI_API_KEY": "sk-test-key-123", "ANTHROPIC_API_KEY": "a"}, "openai:gpt-4o-mini"),
    ({"ANTHROPIC_API_KEY": "a"}, "anthropic:claude-sonnet-4-5"),
    ({"OPENAI_API_KEY": ""}, "local"),
    ({}, "local"),
])
def test_the_default_model_follows_the_keys_set(env: dict[str, str], spec: str) -> None:
    assert default_spec(env)[0] == spec


def test_a_provider_spec_builds_a_streaming_client() -> None:
    choice = choose_model("openai:gpt-4o-mini", None, {"OPENAI_API_KEY": "sk-test-key-123"})
    try:
        assert isinstance(choice.llm_call, OpenAIChatClient)
        assert choice.llm_call.stream and choice.reason == "--model"
    finally:
        choice.close()


def test_base_url_with_a_bare_name_is_an_openai_compatible_server() -> None:
    choice = choose_model("qwen2.5", "http://localhost:8080/v1", {})
    try:
        client = choice.llm_call
        assert isinstance(client, OpenAIChatClient)
        assert client.model == "qwen2.5" and client.base_url == "http://localhost:8080/v1"
        assert not client.has_api_key
    finally:
        choice.close()


def test_base_url_replaces_a_providers_server_and_needs_no_key_there() -> None:
    choice = choose_model("openai:gpt-4o-mini", "http://gpu-box:8000/v1", {})
    try:
        assert isinstance(choice.llm_call, OpenAIChatClient)
        assert choice.llm_call.base_url == "http://gpu-box:8000/v1"
    finally:
        choice.close()


@pytest.mark.parametrize(("spec", "base_url", "says"), [
    (None, "http://localhost:8080/v1", "--base-url needs --model NAME"),
    ("openai:x@http://a/v1", "http://b/v1", "already names a server"),
    ("anthropic:claude-sonnet-4-5", None, "ANTHROPIC_API_KEY"),
    ("nonsense", None, "cannot read LLM spec"),
    ("madeup:model", None, "unknown LLM provider"),
    ("  ", None, "--model is empty"),
    ("scripted:", None, "needs the path of a JSON file"),
    ("local", "http://localhost:1/v1", "--base-url does not apply"),
    ("local:/no/such/model.gguf", None, "does not exist"),
])
def test_bad_choices_say_what_to_do(spec: str | None, base_url: str | None, says: str) -> None:
    with pytest.raises(CliError) as info:
        choose_model(spec, base_url, {})
    assert says in str(info.value) and info.value.exit_code == 2


def test_scripted_reads_its_file(tmp_path: Path) -> None:
    script = tmp_path / "r.json"
    script.write_text('["hello"]', encoding="utf-8")
    assert isinstance(choose_model(f"scripted:{script}", None, {}).llm_call, ScriptedModel)


def test_without_llama_cpp_the_message_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # importing it raises ImportError
    with pytest.raises(CliError) as info:
        choose_model(None, None, {})
    assert INSTALL_LOCAL in str(info.value) and "--model openai:gpt-4o-mini" in str(info.value)


def test_with_the_local_extra_it_asks_the_factory_for_local(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", types.ModuleType("llama_cpp"))
    monkeypatch.setitem(sys.modules, "yiemagent.llm.llamacpp",
                        types.ModuleType("yiemagent.llm.llamacpp"))
    asked: list[str] = []

    def factory(spec: str, **_options: Any) -> Any:
        asked.append(spec)
        return ScriptedModel(["hi"])

    monkeypatch.setattr(cli_model, "create_llm_call", factory)
    assert choose_model(None, None, {}).spec == "local"
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    choose_model(f"local:{model}", None, {})
    assert asked == ["local", f"local:{model}"]

    def broken(spec: str, **_options: Any) -> Any:
        raise RuntimeError("bad magic number")

    monkeypatch.setattr(cli_model, "create_llm_call", broken)
    with pytest.raises(CliError, match="could not start: RuntimeError: bad magic number"):
        choose_model("local", None, {})

"""How the ``yiemagent`` command picks its model (``cli_model.choose_model``): the default from the
environment, ``--base-url`` combinations, and the embedded model, present or not. In-process:
no call is made to any model, only clients are built."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import yiemagent.cli._model as cli_model
from yiemagent.cli._model import INSTALL_LOCAL, CliError, choose_model, default_spec
from yiemagent.llm import OpenAIChatClient
from yiemagent.testing._scripted import ScriptedModel


@pytest.mark.parametrize(
    ("env", "spec"),
    [
        ({"OPENAI_API_KEY": "sk-test-key-123", "ANTHROPIC_API_KEY": "a"}, "openai:gpt-4o-mini"),
        ({"ANTHROPIC_API_KEY": "a"}, "anthropic:claude-sonnet-4-5"),
        ({"OPENAI_API_KEY": ""}, "local"),
        ({}, "local"),
    ],
)
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


@pytest.mark.parametrize(
    ("spec", "base_url", "says"),
    [
        (None, "http://localhost:8080/v1", "--base-url needs --model NAME"),
        ("openai:x@http://a/v1", "http://b/v1", "already names a server"),
        ("anthropic:claude-sonnet-4-5", None, "ANTHROPIC_API_KEY"),
        ("nonsense", None, "cannot read LLM spec"),
        ("madeup:model", None, "unknown LLM provider"),
        ("  ", None, "--model is empty"),
        ("scripted:", None, "needs the path of a JSON file"),
        ("local", "http://localhost:1/v1", "--base-url does not apply"),
        ("local:/no/such/model.gguf", None, "does not exist"),
        ("local:", None, "the path after 'local:' is empty"),
        ("local:  ", None, "the path after 'local:' is empty"),
        ("qwen2.5", "", "--base-url '' is not a server URL"),
        ("qwen2.5", "nonsense", "--base-url 'nonsense' is not a server URL"),
        ("openai:gpt-4o-mini", "http://gpu-box:99999/v1", "is not a server URL"),
        ("openai:gpt-4o-mini", "ftp://gpu-box/v1", "is not a server URL"),
        ("openai:gpt-4o-mini@http://", None, "the server 'http://' is not a server URL"),
        ("http://:8080/v1", None, "is not a server URL"),
    ],
)
def test_bad_choices_say_what_to_do(spec: str | None, base_url: str | None, says: str) -> None:
    with pytest.raises(CliError) as info:
        choose_model(spec, base_url, {})
    assert says in str(info.value) and info.value.exit_code == 2


def test_scripted_reads_its_file(tmp_path: Path) -> None:
    script = tmp_path / "r.json"
    script.write_text('["hello"]', encoding="utf-8")
    assert isinstance(choose_model(f"scripted:{script}", None, {}).llm_call, ScriptedModel)


def test_without_xllamacpp_the_message_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # importing it raises ImportError
    with pytest.raises(CliError) as info:
        choose_model(None, None, {})
    assert INSTALL_LOCAL in str(info.value) and "--model openai:gpt-4o-mini" in str(info.value)


def test_with_the_local_extra_it_asks_the_factory_for_local(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", types.ModuleType("xllamacpp"))
    monkeypatch.setitem(
        sys.modules, "yiemagent.llm.llamacpp._client", types.ModuleType("yiemagent.llm.llamacpp._client")
    )
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


# -- scripted files, fuzzed -------------------------------------------------------------------
# JSON text built from pieces, so that it can hold what json.dumps never writes (1e400).


def _obj(fields: dict[str, str]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in fields.items()) + "}"


def _arr(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


_WORDS = [
    "assistant",
    "user",
    "text",
    "thinking",
    "toolCall",
    "image",
    "stop",
    "toolUse",
    "error",
    "aborted",
    "",
    "x",
    "yiemagent.session",
]
_LEAF = st.one_of(
    st.sampled_from(
        ["0", "-1", "1.5", "1e400", "-1e400", "1e300", "9" * 40, "-0.0", "null", "true", "false", "{}", "[]"]
    ),
    st.sampled_from(_WORDS).map(json.dumps),
    st.text(max_size=4).map(json.dumps),
)
_VALUE = st.recursive(
    _LEAF,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3).map(_arr),
        st.dictionaries(
            st.sampled_from(["name", "arguments", "id", "type", "text", "input_tokens"]), kids, max_size=3
        ).map(_obj),
    ),
    max_leaves=8,
)
_BLOCK = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(["text", "thinking", "toolCall", "image"]).map(json.dumps), _VALUE)},
    optional={k: _VALUE for k in ("text", "thinking", "id", "name", "arguments", "data", "mime_type")},
).map(_obj)
_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.one_of(st.just('"assistant"'), _VALUE),
        "content": st.one_of(st.lists(st.one_of(_BLOCK, _VALUE), max_size=3).map(_arr), _VALUE),
    },
    optional={
        k: _VALUE for k in ("timestamp", "usage", "stop_reason", "error_message", "api", "provider", "model")
    },
).map(_obj)
_CALL = st.fixed_dictionaries({}, optional={k: _VALUE for k in ("name", "arguments", "id")}).map(_obj)
_SHORTHAND = st.fixed_dictionaries(
    {},
    optional={
        "text": _VALUE,
        "thinking": _VALUE,
        "stop_reason": _VALUE,
        "error_message": _VALUE,
        "tool_calls": st.one_of(st.lists(st.one_of(_CALL, _VALUE), max_size=3).map(_arr), _VALUE),
    },
).map(_obj)
_SCRIPT = st.lists(st.one_of(_MESSAGE, _SHORTHAND, _VALUE), min_size=1, max_size=3).map(_arr)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=st.one_of(_SCRIPT, _SCRIPT.map(lambda replies: _obj({"replies": replies}))))
def test_a_scripted_file_is_a_model_or_one_line_exit_2(tmp_path: Path, text: str) -> None:
    """Whatever a script file holds, ``--model scripted:FILE`` gives a model, or a ``CliError``
    (exit 2) on one line: nothing else escapes to become a traceback."""
    script = tmp_path / "fuzzed.json"
    script.write_text(text, encoding="utf-8")
    try:
        choose_model(f"scripted:{script}", None, {}).close()
    except CliError as exc:
        assert exc.exit_code == 2 and len(str(exc).splitlines()) == 1, str(exc)

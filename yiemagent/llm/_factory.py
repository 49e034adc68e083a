"""``create_llm_call``: a provider client from one string such as ``"openai:gpt-4o-mini"``."""

from __future__ import annotations

import inspect
import ipaddress
import re
from typing import Any

import attrs

from yiemagent.llm._base import LlmClient
from yiemagent.llm.anthropic._client import AnthropicMessagesClient
from yiemagent.llm.http._options import HttpOptions, http_options
from yiemagent.llm.llamacpp._client import LlamaCppClient
from yiemagent.llm.openai._client import OpenAIChatClient

__all__ = ["PROVIDERS", "ProviderPreset", "create_llm_call", "parse_llm_spec"]

_URL_PREFIXES = ("http://", "https://")
# A server address without its scheme: a host (a name, an IPv4 address or a bracketed IPv6 one)
# with an optional numeric port and path.
_ADDRESS = re.compile(
    r"(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?P<port>:[0-9]+)?(?P<path>/.*)?", re.DOTALL
)
_DOMAIN_END = re.compile(r"\.[A-Za-z]{2,}\.?$")  # a dotted name ending in a top-level domain


def _looks_like_address(text: str) -> bool:
    """Whether ``text`` (what follows the last ``@`` of a spec) reads as a server address rather
    than the end of a model name.

    It does when it is host[:port][/path] with a port, a path, ``localhost``, an IP address or
    a domain (a dotted name ending in letters) as its host.
    ``claude-3-5-sonnet@20240620``, ``@latest``, ``@sha256:9f8e`` (no numeric port) and ``@v1.2``
    (not a domain) stay model names: a bare name like ``gpu-box`` cannot be told from one.
    """
    match = _ADDRESS.fullmatch(text)
    if match is None:
        return False
    host = match["host"]
    if match["port"] or match["path"] or host.lower() == "localhost" or host.startswith("["):
        return True
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return bool(_DOMAIN_END.search(host))
    return True


@attrs.define(frozen=True)
class ProviderPreset:
    """What a provider name stands for: the client class, its base URL (``None``: the client's
    default, which honours ``OPENAI_BASE_URL``/``ANTHROPIC_BASE_URL``) and the environment
    variable holding its key (``None``: send no key unless one is given)."""

    client: type[LlmClient]
    base_url: str | None
    api_key_env: str | None


PROVIDERS: dict[str, ProviderPreset] = {
    "openai": ProviderPreset(OpenAIChatClient, None, "OPENAI_API_KEY"),
    "anthropic": ProviderPreset(AnthropicMessagesClient, None, "ANTHROPIC_API_KEY"),
    "ollama": ProviderPreset(OpenAIChatClient, "http://localhost:11434/v1", None),
    "openrouter": ProviderPreset(OpenAIChatClient, "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "vllm": ProviderPreset(OpenAIChatClient, "http://localhost:8000/v1", None),
    "llamacpp": ProviderPreset(OpenAIChatClient, "http://localhost:8080/v1", None),
    "lmstudio": ProviderPreset(OpenAIChatClient, "http://localhost:1234/v1", None),
}

_COMPATIBLE = ProviderPreset(OpenAIChatClient, None, None)


def parse_llm_spec(spec: str) -> tuple[str | None, str | None, str | None]:
    """Split a spec into ``(provider, model, base_url)``; raise ``ValueError`` if it is not one.

    Forms: ``"provider:model"``, ``"provider:model@https://host/v1"`` and a bare
    ``"http://host:port/v1"`` (an OpenAI-compatible server; the model comes as an option). A
    model name may hold ``@`` (Vertex's ``claude-3-5-sonnet@20240620``), but a part after the
    last ``@`` that looks like a server address (see ``_looks_like_address``) must start with
    ``http://`` or ``https://``: read as part of the model name, it would send the provider's
    key to the provider's default server, so it is refused with the spec to write instead.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"an LLM spec must be a non-empty string, got {spec!r}")
    spec = spec.strip()
    if spec.startswith(_URL_PREFIXES):
        return None, None, spec
    provider, colon, rest = spec.partition(":")
    if not colon or not provider or not rest:
        raise ValueError(
            f"cannot read LLM spec {spec!r}: expected 'provider:model' (e.g. "
            "'openai:gpt-4o-mini'), 'provider:model@base_url' or a base URL"
        )
    model, at, url = rest.rpartition("@")
    if not at:
        return provider.lower(), rest, None
    if url.startswith(_URL_PREFIXES):
        if not model:
            raise ValueError(
                f"cannot read LLM spec {spec!r}: no model before '@' (e.g. '{provider}:qwen2.5@{url}')"
            )
        return provider.lower(), model, url
    if "://" in url:
        raise ValueError(
            f"cannot read LLM spec {spec!r}: the base URL after '@' must start with http:// or https://"
        )
    if _looks_like_address(url):
        raise ValueError(
            f"cannot read LLM spec {spec!r}: the part after '@' ({url!r}) looks like a server "
            f"address but has no http:// or https://; write {f'{provider}:{model}@http://{url}'!r} "
            "(or https://). Read as part of the model name, it would go to the provider's "
            "default server, with the provider's key"
        )
    return provider.lower(), rest, None


LOCAL = "local"


def _accepted(client: type[Any]) -> frozenset[str]:
    """The names ``client``'s constructor takes by keyword, but the model (the spec gives it)
    and ``http`` (passed on its own)."""
    parameters = inspect.signature(client).parameters.values()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in named) - {"model", "model_path", "http"}


def _check_options(
    spec: str, client: type[Any], options: dict[str, Any], http_fields: frozenset[str]
) -> None:
    """Raise ``TypeError`` naming every option neither ``client`` nor ``HttpOptions`` (its
    ``http_fields``, none for a client that sends no HTTP) takes, and the names they do take."""
    takes = _accepted(client)
    unknown = sorted(set(options) - takes - http_fields)
    if not unknown:
        return
    said = ", ".join(repr(name) for name in unknown)
    where = f"{client.__name__} takes {', '.join(sorted(takes))}"
    if http_fields:
        where += f"; HttpOptions takes {', '.join(sorted(http_fields))}"
    else:
        where += " (it runs in this process: no HTTP options)"
    if "model" in unknown:
        where += "; the spec names the model"
    raise TypeError(f"create_llm_call({spec!r}) got unknown option(s) {said}: {where}")


def _sorted_options(
    spec: str, client: type[LlmClient], http: HttpOptions | None, options: dict[str, Any]
) -> dict[str, Any]:
    """``options`` as ``client``'s keywords: those named after ``HttpOptions`` fields are set on
    ``http`` (or on the defaults), which goes as ``http=``; ``TypeError`` for an unknown one,
    ``ValueError`` (from ``HttpOptions``) for a transport setting that makes no sense."""
    base = http_options(http)
    fields = HttpOptions.field_names()
    _check_options(spec, client, options, fields)
    transport = {name: options.pop(name) for name in sorted(fields & set(options))}
    options["http"] = attrs.evolve(base, **transport) if transport else base
    return options


def create_llm_call(
    spec: str, *, http: HttpOptions | None = None, **options: Any
) -> LlmClient | LlamaCppClient:
    """Return a ready ``llm_call`` client for ``spec``, set up by ``http`` and ``options``.

    ``"local"`` is the embedded default model (``LlamaCppClient``: SmolLM2-135M from the
    ``local`` extra, in this process, no server) and ``"local:/path/model.gguf"`` any GGUF file
    run the same way; a missing extra raises ``ImportError`` with the install command.

    ``"openai:gpt-4o-mini"``, ``"anthropic:claude-sonnet-4-5"``, ``"ollama:qwen2.5"`` (OpenAI API at
    ``http://localhost:11434/v1``), ``"openrouter:..."``, ``"vllm:..."``, ``"llamacpp:..."``,
    ``"lmstudio:..."``; ``"openai:model@http://host/v1"`` for any OpenAI-compatible server (it
    sends ``$OPENAI_API_KEY``; pass ``api_key=`` or ``api_key_env=None`` to change that); or a bare
    base URL with ``model=...``, which sends no key unless ``api_key`` is given. Raises
    ``ValueError`` for an unknown provider, a spec without a model, or a server address after
    ``@`` without ``http://``/``https://`` (see ``parse_llm_spec``).

    For a provider, ``http`` (an ``HttpOptions``) sets the transport, and an option named after
    one of its fields (``timeout=30``, ``max_retries=0``, ...) is set on it, over ``http`` when
    both are given; the other options are the client's own (``stream``, ``extra_body``,
    ``max_tokens``, ...). An option that neither takes raises ``TypeError`` listing the names
    that are taken.
    """
    if isinstance(spec, str) and spec.strip().partition(":")[0].lower() == LOCAL:
        if http is not None:
            raise TypeError(
                f"create_llm_call({spec!r}) got http=: the local model runs in this "
                "process and makes no HTTP requests"
            )
        _check_options(spec, LlamaCppClient, options, frozenset())
        path = spec.strip().partition(":")[2].strip()
        return LlamaCppClient(path or None, **options)
    provider, model, url = parse_llm_spec(spec)
    if provider is None:
        preset, provider = _COMPATIBLE, "openai-compatible"
        model = options.pop("model", None)
        if not model:
            raise ValueError(
                f"{spec!r} is a base URL: pass the model too, e.g. create_llm_call({spec!r}, model='qwen2.5')"
            )
    elif provider in PROVIDERS:
        preset = PROVIDERS[provider]
    else:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(
            f"unknown LLM provider {provider!r} in {spec!r}; known: {known} (or give a base URL)"
        )
    assert model is not None
    options = _sorted_options(spec, preset.client, http, options)
    options.setdefault("base_url", url or preset.base_url)
    options.setdefault("api_key_env", preset.api_key_env)
    options.setdefault("provider", provider)
    return preset.client(model, **options)

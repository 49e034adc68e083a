"""``OpenAIChatClient``: the chat-completions API of OpenAI and of the servers that copy it.

Ollama, vLLM, llama.cpp's server, LM Studio and OpenRouter all speak it; point ``base_url`` at
them. The client sends the formatted request's ``messages`` in the narrow form all of them accept
(``openai_wire``: text as plain strings, parts only for images), its ``tools`` with
``tool_choice``, plus ``model``, ``stream`` and ``extra_body``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import Any, Literal

import requests

from yiemagent.core._messages import AssistantMessage
from yiemagent.core._output_request import OutputRequest
from yiemagent.core._request import LlmRequest
from yiemagent.core._tools import AbortSignal
from yiemagent.llm._base import KEY_FROM_ENV, LlmClient
from yiemagent.llm.http._errors import LlmError, LlmStreamError
from yiemagent.llm.http._options import HttpOptions
from yiemagent.llm.http._redact import excerpt
from yiemagent.llm.http._transport import (
    Emit,
    iter_response_sse,
    read_json_body,
    shown_url,
)
from yiemagent.llm.openai._listing import listed_window
from yiemagent.llm.openai._parse import OpenAIStreamAssembler, parse_chat_completion
from yiemagent.llm.openai._wire import WireForm, wire_messages

__all__ = ["OpenAIChatClient"]

logger = logging.getLogger("yiemagent.llm")
LISTING_TIMEOUT_S = 10.0  # the model listing is a small reply: a server slower than this has none

_ENDPOINT_PATH = "/chat/completions"


class _EmptyStream(LlmError):
    """A streamed request answered with nothing at all: what llama-cpp-python's server does when
    asked to stream with ``tool_choice="auto"`` and its model calls a tool. Asking again the same
    way would get the same nothing; the client asks once more without streaming instead."""


def _empty_stream_error(label: str) -> LlmError:
    return _EmptyStream(f"{label} server sent an empty stream (HTTP 200 and no events)")


def _response_format(output: OutputRequest, kind: str) -> dict[str, Any]:
    """The ``response_format`` of a run's output: OpenAI's ``json_schema`` form (llama.cpp's own
    server and vLLM take it too), or with ``kind="json_object"`` the form llama-cpp-python's
    server takes (``{"type": "json_object", "schema": ...}``); ``LlmError`` for the ``grammar``
    mode, which only the embedded model has."""
    if output.mode == "grammar":
        raise LlmError(
            "output_mode='grammar' constrains decoding on the embedded model (LlamaCppClient); "
            "an OpenAI-compatible server takes output_mode='native' (response_format) or 'tool'"
        )
    if kind == "json_object":
        return {"type": "json_object", "schema": output.schema}
    return {"type": "json_schema", "json_schema": {"name": output.name, "schema": output.schema}}


def not_found_hint(base_url: str, model: str) -> str:
    """Return what to check after an HTTP 404 from ``{base_url}/chat/completions``: the ``/v1``
    that OpenAI-compatible servers serve their API under, a ``/chat/completions`` the client adds
    itself, or else the base URL and the model name (Ollama answers 404 for an unknown model)."""
    shown = shown_url(base_url)
    if base_url.endswith(_ENDPOINT_PATH):
        fixed = shown_url(base_url[: -len(_ENDPOINT_PATH)])
        return (
            f"base_url {shown} ends with {_ENDPOINT_PATH}, which the client adds itself: use base_url={fixed}"
        )
    if not base_url.rstrip("/").endswith("/v1"):
        return (
            f"check base_url {shown}: OpenAI-compatible servers serve the API under /v1, "
            f"so it is usually {shown}/v1"
        )
    return f"check base_url {shown} and the model name {model!r}"


class OpenAIChatClient(LlmClient):
    """A callable ``llm_call`` for ``{base_url}/chat/completions`` (OpenAI-compatible servers).

    ``api_key`` defaults to ``$OPENAI_API_KEY`` (pass ``api_key_env=None`` to never read it, e.g.
    for a local server), ``base_url`` to ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
    ``stream=True`` streams the reply (with ``stream_options.include_usage``) and reports text,
    reasoning and tool-call deltas to ``on_update``. ``extra_body`` is merged into every request
    body (``temperature``, ``max_tokens``, ``reasoning_effort``, ...). ``tool_choice`` is sent
    whenever tools are offered (default ``"auto"``; ``"required"``, ``"none"`` or a
    ``{"type": "function", "function": {"name": ...}}`` object force a choice; ``None`` sends
    none). ``http`` (an ``HttpOptions``) sets timeouts, retries and the other transport
    settings. ``response_format_type`` is the form a run's output goes out in, in the
    ``native`` output mode: ``"json_schema"`` (OpenAI's, the default) or ``"json_object"``
    (with the schema beside it: what llama-cpp-python's server takes). The request passed in
    is never changed: its dicts are cached and reused by the caller.
    """

    default_base_url = "https://api.openai.com/v1"
    default_api_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        stream: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        tool_choice: str | Mapping[str, Any] | None = "auto",
        provider: str = "openai",
        api_key_env: str | None = KEY_FROM_ENV,
        http: HttpOptions | None = None,
        response_format_type: Literal["json_schema", "json_object"] = "json_schema",
    ) -> None:
        if response_format_type not in ("json_schema", "json_object"):
            raise ValueError(
                f"response_format_type must be 'json_schema' or 'json_object', got {response_format_type!r}"
            )
        self.response_format_type = response_format_type
        if tool_choice is not None and not isinstance(tool_choice, (str, Mapping)):
            raise ValueError(f"tool_choice must be a string, a dict or None, got {tool_choice!r}")
        self.tool_choice = tool_choice
        self._wire = WireForm()
        self._listing_lock = threading.Lock()
        self._listing: tuple[int | None] | None = None  # the listed window, once asked
        super().__init__(
            model,
            base_url,
            api_key,
            api_key_env=api_key_env,
            provider=provider,
            stream=stream,
            extra_body=extra_body,
            http=http,
        )

    @property
    def endpoint(self) -> str:
        """``{base_url}/chat/completions``."""
        return f"{self.base_url}/chat/completions"

    def listed_context_window(self) -> int | None:
        """The model's context window as the server's ``{base_url}/models`` lists it (vLLM,
        OpenRouter, LM Studio and others give one; OpenAI does not), or ``None``. Read once per
        client, once it gave an answer (an agent asks at the start of each run with
        ``context_window="auto"``). ``LlmError`` when the listing cannot be read: a server that
        refuses it (an HTTP error that asking again would not change) is not asked again and
        gives ``None`` from then on; a failure that may pass (a timeout, a 5xx) is asked again
        at the next call. Waits at most ``LISTING_TIMEOUT_S`` for each piece of the reply."""
        with self._listing_lock:
            if self._listing is not None:
                return self._listing[0]
            try:
                body = self._transport.get_json(
                    f"{self.base_url}/models",
                    {"Accept": "application/json"},
                    self.base_url,
                    timeout=LISTING_TIMEOUT_S,
                )
            except LlmError as exc:
                if not exc.retryable:
                    self._listing = (None,)
                raise
            self._listing = (listed_window(body, self.model),)
            return self._listing[0]

    def headers(self) -> dict[str, str]:
        """JSON content type and SSE accept when streaming; ``Authorization: Bearer`` with the key
        is added by the session's auth as the request is sent."""
        return {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if self.stream else "application/json",
        }

    def build_body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``{"model", "messages", "tools"?, "tool_choice"?, "stream", ...extra_body}``.

        An ``LlmRequest`` is converted from its typed fields (``WireForm``: each message once,
        then reused); a plain dict in the spec's shape (a custom ``format_msg_for_llm``) is sent
        with its messages narrowed to the wire form (``wire_message``) and its other fields as
        they are. ``tool_choice`` goes with tools only (a request's own choice wins); an empty
        ``tools`` is left out. The request and its cached dicts are never changed."""
        if isinstance(request, LlmRequest):
            body: dict[str, Any] = {
                "model": self.model,
                "messages": self._wire.messages(request.system_prompt, request.messages),
            }
            if request.tools:
                body["tools"] = self._wire.tools(request.tools)
            if request.output is not None:
                body["response_format"] = _response_format(request.output, self.response_format_type)
        elif isinstance(request, Mapping) and isinstance(request.get("messages"), list):
            body = {"model": self.model, **request}
            body["messages"] = wire_messages(request["messages"])
        else:
            raise ValueError(
                "the OpenAI client needs the LlmRequest of format_msg_for_llm, or "
                "a request dict with a 'messages' list"
            )
        if not body.get("tools"):
            body.pop("tools", None)
            body.pop("tool_choice", None)  # servers reject a choice among no tools
        elif self.tool_choice is not None:
            body.setdefault("tool_choice", self.tool_choice)
        body["stream"] = self.stream
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        body.update(self.extra_body)
        return body

    def add_session_id(self, body: dict[str, Any], session_id: str) -> None:
        """Send the session id as ``prompt_cache_key``, OpenAI's key for routing requests that
        share a prefix to the same prompt cache (servers that do not know it ignore it)."""
        body.setdefault("prompt_cache_key", session_id)

    def parse_reply(self, body: Any) -> AssistantMessage:
        """Return the first choice of a whole chat completion."""
        return parse_chat_completion(body, label=self.label, provider=self.provider, model=self.model)

    def __call__(
        self,
        request: Mapping[str, Any],
        *,
        on_update: Emit | None = None,
        signal: AbortSignal | None = None,
        max_retry_delay_ms: float | None = None,
        session_id: str | None = None,
    ) -> AssistantMessage:
        """Send one turn and return the model's reply (see ``LlmClient.__call__``); an HTTP 404
        raises an ``LlmError`` that also says what to check (``not_found_hint``). A server that
        answers a streamed request with no events at all is asked once more without streaming,
        and the client streams no more (said at DEBUG on ``yiemagent.llm``)."""
        try:
            try:
                return super().__call__(
                    request,
                    on_update=on_update,
                    signal=signal,
                    max_retry_delay_ms=max_retry_delay_ms,
                    session_id=session_id,
                )
            except _EmptyStream:
                logger.debug(
                    "%s server at %s answered a streamed request with no events; asking "
                    "again without streaming, and not streaming from now on",
                    self.label,
                    shown_url(self.base_url),
                )
                self.stream = False
                return super().__call__(
                    request,
                    on_update=on_update,
                    signal=signal,
                    max_retry_delay_ms=max_retry_delay_ms,
                    session_id=session_id,
                )
        except LlmError as error:
            if error.status != 404:
                raise
            raise type(error)(
                f"{error.message}; {not_found_hint(self.base_url, self.model)}",
                status=error.status,
                provider_message=error.provider_message,
            ) from None

    def read_reply(self, response: requests.Response, emit: Emit) -> AssistantMessage:
        """Read a successful reply (see ``LlmClient.read_reply``); a streamed request answered
        with an empty body, whatever its content type, raises the empty-stream ``LlmError``."""
        if self.stream and "json" in response.headers.get("content-type", ""):
            raw = response.content
            if not raw.strip():
                raise _empty_stream_error(self.label)
            return self.parse_reply(read_json_body(response, self.label))
        return super().read_reply(response, emit)

    def read_stream(self, response: requests.Response, emit: Emit) -> AssistantMessage:
        """Assemble ``chat.completion.chunk`` events until ``[DONE]``; a stream that ends with no
        event at all raises the empty-stream ``LlmError`` (not retried)."""
        assembler = OpenAIStreamAssembler(emit, label=self.label, provider=self.provider, model=self.model)
        seen = False
        for event in iter_response_sse(response, self.label):
            seen = True
            data = event.data.strip()
            if data == "[DONE]":
                return assembler.finish()
            try:
                chunk = json.loads(data)
            except (ValueError, RecursionError):
                raise LlmStreamError(
                    f"{self.label} stream sent a chunk that is not JSON: {excerpt(data, 200)}"
                ) from None
            assembler.add_chunk(chunk)
        if not seen:
            raise _empty_stream_error(self.label)
        raise LlmStreamError(f"{self.label} stream broke off: the reply ended before [DONE]", retryable=True)

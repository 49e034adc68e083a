"""``OpenAIChatClient``: the chat-completions API of OpenAI and of the servers that copy it.

Ollama, vLLM, llama.cpp's server, LM Studio and OpenRouter all speak it; point ``base_url`` at
them. The client sends the formatted request's ``messages`` and ``tools`` as they are (the
default ``format_msg_for_llm`` already produces OpenAI's shapes) plus ``model``, ``stream`` and
``extra_body``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import requests

from yiemagent.llm.base import KEY_FROM_ENV, LlmClient
from yiemagent.llm.errors import LlmStreamError
from yiemagent.llm.openai_parse import OpenAIStreamAssembler, parse_chat_completion
from yiemagent.llm.redact import excerpt
from yiemagent.llm.transport import DEFAULT_MAX_RESPONSE_BYTES, Emit, iter_response_sse
from yiemagent.messages import AssistantMessage

__all__ = ["OpenAIChatClient"]


class OpenAIChatClient(LlmClient):
    """A callable ``llm_call`` for ``{base_url}/chat/completions`` (OpenAI-compatible servers).

    ``api_key`` defaults to ``$OPENAI_API_KEY`` (pass ``api_key_env=None`` to never read it, e.g.
    for a local server), ``base_url`` to ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
    ``stream=True`` streams the reply (with ``stream_options.include_usage``) and reports text,
    reasoning and tool-call deltas to ``on_update``. ``extra_body`` is merged into every request
    body (``temperature``, ``max_tokens``, ``reasoning_effort``, ...). The request passed in is
    never changed: its dicts are cached and reused by the caller.
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
        timeout: float = 600.0,
        stream: bool = False,
        max_retries: int = 2,
        max_retry_delay_ms: float = 60_000,
        retry_base_delay_s: float = 0.5,
        retry_max_backoff_s: float = 8.0,
        extra_body: Mapping[str, Any] | None = None,
        provider: str = "openai",
        api_key_env: str | None = KEY_FROM_ENV,
        send_session_id: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        deadline_s: float | None = None,
    ) -> None:
        self.send_session_id = bool(send_session_id)
        super().__init__(
            model, base_url=base_url, api_key=api_key, api_key_env=api_key_env,
            provider=provider, timeout=timeout, stream=stream, max_retries=max_retries,
            max_retry_delay_ms=max_retry_delay_ms, retry_base_delay_s=retry_base_delay_s,
            retry_max_backoff_s=retry_max_backoff_s, extra_body=extra_body,
            max_response_bytes=max_response_bytes, deadline_s=deadline_s,
        )

    @property
    def endpoint(self) -> str:
        """``{base_url}/chat/completions``."""
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        """JSON content type and SSE accept when streaming; ``Authorization: Bearer`` with the key
        is added by the session's auth as the request is sent."""
        return {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if self.stream else "application/json",
        }

    def build_body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``{"model", **request, "stream", ...extra_body}``; a new top-level dict, so the
        request and its cached message dicts are never changed. An empty ``tools`` is left out."""
        if not isinstance(request, Mapping) or not isinstance(request.get("messages"), list):
            raise ValueError("the OpenAI client needs a request dict with a 'messages' list "
                             "(what format_msg_for_llm returns)")
        body: dict[str, Any] = {"model": self.model, **request}
        if not body.get("tools"):
            body.pop("tools", None)
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
        return parse_chat_completion(body, label=self.label, provider=self.provider,
                                     model=self.model)

    def read_stream(self, response: requests.Response, emit: Emit) -> AssistantMessage:
        """Assemble ``chat.completion.chunk`` events until ``[DONE]``."""
        assembler = OpenAIStreamAssembler(emit, label=self.label, provider=self.provider,
                                          model=self.model)
        for event in iter_response_sse(response, self.label):
            data = event.data.strip()
            if data == "[DONE]":
                return assembler.finish()
            try:
                chunk = json.loads(data)
            except ValueError:
                raise LlmStreamError(f"{self.label} stream sent a chunk that is not JSON: "
                                     f"{excerpt(data, 200)}") from None
            assembler.add_chunk(chunk)
        raise LlmStreamError(f"{self.label} stream broke off: the reply ended before [DONE]",
                             retryable=True)

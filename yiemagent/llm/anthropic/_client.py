"""``AnthropicMessagesClient``: Anthropic's Messages API (``POST {base_url}/v1/messages``).

It takes the same formatted request as ``OpenAIChatClient`` and converts from the library's own
messages, which the request carries as ``request.context``; switching provider is one argument.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import requests

from yiemagent.core._messages import AssistantMessage
from yiemagent.core._tools import AgentContext
from yiemagent.llm._base import KEY_FROM_ENV, LlmClient
from yiemagent.llm.anthropic._parse import AnthropicStreamAssembler, parse_message
from yiemagent.llm.anthropic._wire import context_to_anthropic, openai_request_to_anthropic
from yiemagent.llm.http._errors import LlmError, LlmStreamError
from yiemagent.llm.http._options import HttpOptions
from yiemagent.llm.http._redact import excerpt
from yiemagent.llm.http._transport import Emit, iter_response_sse

__all__ = ["ANTHROPIC_VERSION", "AnthropicMessagesClient"]

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicMessagesClient(LlmClient):
    """A callable ``llm_call`` for Anthropic's Messages API.

    ``api_key`` defaults to ``$ANTHROPIC_API_KEY`` (sent as ``x-api-key``), ``base_url`` to
    ``$ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com`` (a base URL ending in ``/v1`` works
    too). ``max_tokens`` is required by the API. The request is converted from
    ``request.context`` (the ``AgentContext`` that ``format_msg_for_llm`` attaches); a plain
    OpenAI-format dict without one is converted from its ``messages`` and ``tools`` instead.
    ``extra_body`` is merged into every body (``temperature``, ``thinking``, ``tool_choice``, ...);
    ``http`` (an ``HttpOptions``) sets timeouts, retries and the other transport settings.
    """

    auth_header = "x-api-key"
    auth_prefix = ""
    default_base_url = "https://api.anthropic.com"
    default_api_key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_tokens: int = 4096,
        stream: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        anthropic_version: str = ANTHROPIC_VERSION,
        provider: str = "anthropic",
        api_key_env: str | None = KEY_FROM_ENV,
        http: HttpOptions | None = None,
    ) -> None:
        if not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
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
        self.max_tokens = max_tokens
        self.anthropic_version = anthropic_version

    @property
    def endpoint(self) -> str:
        """``{base_url}/v1/messages`` (or ``{base_url}/messages`` when it ends in ``/v1``)."""
        if self.base_url.endswith("/v1"):
            return f"{self.base_url}/messages"
        return f"{self.base_url}/v1/messages"

    def headers(self) -> dict[str, str]:
        """``anthropic-version`` and the JSON/SSE content headers; ``x-api-key`` is added by the
        session's auth as the request is sent."""
        return {
            "content-type": "application/json",
            "accept": "text/event-stream" if self.stream else "application/json",
            "anthropic-version": self.anthropic_version,
        }

    def build_body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Return the Messages API body: ``model``, ``max_tokens``, ``system`` (when set),
        ``messages``, ``tools`` (when any), ``stream`` (when streaming), then ``extra_body``."""
        if getattr(request, "output", None) is not None or (
            isinstance(request, dict) and "response_format" in request
        ):
            raise LlmError(
                "the Anthropic client has no JSON-schema response format; give the run's output "
                "with output_mode='tool' (the default), which every tools-capable model takes"
            )
        context = getattr(request, "context", None)
        if isinstance(context, AgentContext):
            system, messages, tools = context_to_anthropic(context)
        elif isinstance(request, Mapping) and isinstance(request.get("messages"), list):
            system, messages, tools = openai_request_to_anthropic(request)
        else:
            raise ValueError(
                "the Anthropic client needs the request of format_msg_for_llm (with "
                "its .context) or an OpenAI-format dict with a 'messages' list"
            )
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if system:
            body["system"] = system
        body["messages"] = messages
        if tools:
            body["tools"] = tools
        if self.stream:
            body["stream"] = True
        body.update(self.extra_body)
        return body

    def add_session_id(self, body: dict[str, Any], session_id: str) -> None:
        """Send the session id as ``metadata.user_id``, Anthropic's opaque id of the end user or
        conversation a request belongs to (a ``user_id`` from ``extra_body`` is kept)."""
        metadata = body.get("metadata")
        metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
        metadata.setdefault("user_id", session_id)
        body["metadata"] = metadata

    def parse_reply(self, body: Any) -> AssistantMessage:
        """Return the message of a whole Messages API reply."""
        return parse_message(body, label=self.label, provider=self.provider, model=self.model)

    def read_stream(self, response: requests.Response, emit: Emit) -> AssistantMessage:
        """Assemble Messages API stream events until ``message_stop``."""
        assembler = AnthropicStreamAssembler(emit, label=self.label, provider=self.provider, model=self.model)
        for event in iter_response_sse(response, self.label):
            try:
                data = json.loads(event.data)
            except (ValueError, RecursionError):
                raise LlmStreamError(
                    f"{self.label} stream sent an event that is not JSON: {excerpt(event.data, 200)}"
                ) from None
            if assembler.handle(data):
                return assembler.finish()
        raise LlmStreamError(
            f"{self.label} stream broke off: the reply ended before message_stop", retryable=True
        )

"""What every provider client shares: settings, the api key kept secret, and the ``llm_call`` front.

A client is a callable with the runtime's ``llm_call`` protocol::

    client(request, *, on_update=None, signal=None) -> AssistantMessage

It builds the provider's request body from the formatted request, posts it through an
``HttpTransport`` (one ``requests.Session`` per client, retries, abort) and reads the reply.
"""

from __future__ import annotations

import abc
import json
import logging
import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any, ClassVar

import attrs
import requests

from yiemagent.core._messages import AssistantMessage
from yiemagent.core._tools import AbortSignal
from yiemagent.llm.http._options import HttpOptions, http_options
from yiemagent.llm.http._redact import ApiKeyAuth, Secret
from yiemagent.llm.http._reply_scrub import DeltaScrubber, scrub_reply
from yiemagent.llm.http._transport import Emit, HttpTransport, read_json_body

__all__ = ["KEY_FROM_ENV", "LlmClient"]

KEY_FROM_ENV: Any = object()  # "read the key from the class's environment variable"
body_logger = logging.getLogger("yiemagent.llm")

_LABELS = {"openai": "OpenAI", "anthropic": "Anthropic", "ollama": "Ollama", "openrouter": "OpenRouter"}


class LlmClient(abc.ABC):
    """Base of the provider clients: one model, one endpoint, one session.

    The api key comes from ``api_key`` or the environment variable ``api_key_env``; the base URL
    from ``base_url``, the class's base-URL variable, or the provider default. ``http`` (an
    ``HttpOptions``) says how requests travel: timeouts, retries, the size of a reply, a
    deadline, body logging and whether the session id is sent. ``stream`` asks for replies as
    server-sent events; ``extra_body`` is merged into every request body. The key is held as a
    ``Secret`` and added to each request by the session's ``ApiKeyAuth`` (header
    ``auth_header``, value ``auth_prefix + key``), so it never appears in ``repr``, errors,
    logs, events, or the headers the client builds.
    """

    auth_header: ClassVar[str] = "Authorization"
    auth_prefix: ClassVar[str] = "Bearer "
    default_base_url: ClassVar[str] = ""
    default_api_key_env: ClassVar[str] = ""
    base_url_env: ClassVar[str] = ""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        api_key_env: str | None = KEY_FROM_ENV,
        provider: str,
        stream: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        http: HttpOptions | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty string, got {model!r}")
        http = http_options(http)
        reserved = [k for k in ("messages", "stream") if k in (extra_body or {})]
        if reserved:
            raise ValueError(
                f"extra_body must not set {', '.join(reserved)}: the client builds "
                "the messages from the request and uses its own stream argument"
            )
        env = self.default_api_key_env if api_key_env is KEY_FROM_ENV else api_key_env
        self.model = model
        self.provider = provider
        self.stream = bool(stream)
        self.http = http
        self.base_url = (
            base_url or os.environ.get(self.base_url_env or "", "") or self.default_base_url
        ).rstrip("/")
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        # None: follow $YIEM_LOG_BODIES at each call, so it can be switched on in a live process.
        self.log_bodies = http.log_bodies
        self.send_session_id = http.send_session_id
        self._api_key = Secret(api_key or (os.environ.get(env) if env else None))
        self.retry = http.retry
        self.label = _LABELS.get(provider, provider)
        self._transport = HttpTransport(
            self.label,
            http,
            secret=self._api_key,
            auth=ApiKeyAuth(self._api_key, self.auth_header, self.auth_prefix),
        )

    @property
    def timeout(self) -> float:
        """Seconds to wait for a connection, and for each next piece of a reply."""
        return self._transport.timeout

    @property
    def has_api_key(self) -> bool:
        """Whether a key is set (the key itself is never exposed)."""
        return bool(self._api_key)

    @property
    @abc.abstractmethod
    def endpoint(self) -> str:
        """The URL requests are posted to."""

    @abc.abstractmethod
    def build_body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Return the provider's JSON body for a formatted request; never changes ``request``."""

    @abc.abstractmethod
    def headers(self) -> dict[str, str]:
        """Return the request headers; never the api key (the session's auth adds it)."""

    @abc.abstractmethod
    def parse_reply(self, body: Any) -> AssistantMessage:
        """Return the ``AssistantMessage`` of a whole reply's decoded JSON ``body``; raise
        ``LlmError`` when it is an error object or not a reply."""

    @abc.abstractmethod
    def read_stream(self, response: requests.Response, emit: Emit) -> AssistantMessage:
        """Assemble a streamed reply until its terminator, reporting each delta to ``emit``;
        raise ``LlmStreamError`` when the stream breaks off first."""

    def read_reply(self, response: requests.Response, emit: Emit) -> AssistantMessage:
        """Read a successful reply: an event stream when streaming, else (also when a server
        ignores ``stream`` and answers with JSON) the whole body."""
        whole = "json" in response.headers.get("content-type", "")
        if self.stream and not whole:
            return self.read_stream(response, emit)
        return self.parse_reply(read_json_body(response, self.label))

    @abc.abstractmethod
    def add_session_id(self, body: dict[str, Any], session_id: str) -> None:
        """Put the agent's session id in ``body`` where the provider has a field for it (a
        field ``extra_body`` already set is kept)."""

    def __call__(
        self,
        request: Mapping[str, Any],
        *,
        on_update: Emit | None = None,
        signal: AbortSignal | None = None,
        max_retry_delay_ms: float | None = None,
        session_id: str | None = None,
    ) -> AssistantMessage:
        """Send one turn and return the model's reply; the runtime's ``llm_call``.

        Streamed deltas go to ``on_update`` on the calling thread while they arrive;
        ``max_retry_delay_ms`` (passed by an agent that sets one) overrides the client's cap for
        this call; ``session_id`` (passed by every agent) goes where the provider keeps one,
        unless the client was made with ``http=HttpOptions(send_session_id=False)``. Raises
        ``LlmError`` when the provider fails after retries (``LlmAbortedError`` when ``signal``
        fires); the error text carries the provider's message and the HTTP status, never the
        key; a reply that holds the key (a server echoed it) has it masked in its deltas and in
        the reply returned (``reply_scrub``).
        """
        body = self.build_body(request)
        if session_id is not None and self.send_session_id:
            self.add_session_id(body, session_id)
        retry = (
            self.retry
            if max_retry_delay_ms is None
            else attrs.evolve(self.retry, max_retry_delay_ms=max_retry_delay_ms)
        )
        logging_bodies = self._logs_bodies()
        if logging_bodies:
            self._log_body("request to " + self.endpoint, body)
        # A server may echo the key: it is masked in the deltas and the reply, so it reaches
        # neither the events nor the history.
        deltas = None if on_update is None else DeltaScrubber(on_update, self._api_key)
        reply = self._transport.post(
            self.endpoint,
            self.headers(),
            body,
            self.read_reply,
            on_update=deltas,
            signal=signal,
            retry=retry,
            server=self.base_url,
        )
        if deltas is not None:
            deltas.finish()
        reply = scrub_reply(reply, self._api_key)
        if logging_bodies:
            self._log_body("reply", reply.to_dict())
        return reply

    def _logs_bodies(self) -> bool:
        """Whether to log bodies: the client's ``log_bodies``, else ``$YIEM_LOG_BODIES=1``; only
        when the ``yiemagent.llm`` logger shows DEBUG."""
        wanted = self.log_bodies
        if wanted is None:
            wanted = os.environ.get("YIEM_LOG_BODIES", "") not in ("", "0")
        return wanted and body_logger.isEnabledFor(logging.DEBUG)

    def _log_body(self, what: str, data: Any) -> None:
        """Log ``data`` as JSON at DEBUG, with the key scrubbed out of it."""
        text = json.dumps(data, ensure_ascii=False, default=repr)
        body_logger.debug("%s %s: %s", self.label, what, self._api_key.scrub(text))

    def close(self) -> None:
        """End the calls in flight (they raise ``LlmError`` saying the client was closed) and
        close the session's pooled connections."""
        self._transport.close()

    def __enter__(self) -> LlmClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, "
            f"provider={self.provider!r}, stream={self.stream!r}, api_key={self._api_key!r})"
        )

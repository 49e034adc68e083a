"""The HTTP side of the provider clients: one session, retries, abort, and errors without secrets.

Each attempt runs on a short-lived helper thread while the calling thread waits on a queue. The
helper posts the request and reads the reply; streamed deltas travel back through the queue, so
``on_update`` is always called on the caller's own thread. An abort (or ``close()``) puts a marker
in the same queue: the caller returns at once, and the helper's socket is shut down (see
``abortable``), so the helper ends too, whether it was waiting for the reply's headers or reading
its body; its results are dropped and it never calls ``on_update`` again. A call's optional
deadline ends it the same way, and a reply is read only up to ``max_response_bytes``.

Replies may come compressed: the session asks for ``ACCEPT_ENCODING`` (gzip and deflate), and
both whole and streamed bodies are unpacked as they are read, a piece at a time (urllib3 2.6 and
later unpack no more than each read asks for), so a small compressed body that unpacks to
gigabytes (a "bomb") never sits in memory whole. The limit counts the unpacked bytes: they are
what the client holds and parses, and what a bomb multiplies.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from http.client import RemoteDisconnected
from typing import Any

import requests
import urllib3.exceptions
import urllib3.response

from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage
from yiemagent.core._tools import AbortSignal
from yiemagent.llm.http._abortable import RequestInterrupter, interruptible_session
from yiemagent.llm.http._errors import (
    LlmAbortedError,
    LlmError,
    LlmStreamError,
    LlmTimeoutError,
    provider_error_text,
)
from yiemagent.llm.http._options import DEFAULT_MAX_RESPONSE_BYTES, HttpOptions
from yiemagent.llm.http._redact import Secret, excerpt
from yiemagent.llm.http._retry import (
    Deadline,
    RetryPolicy,
    call_with_retries,
    is_retryable_status,
    parse_retry_after,
)
from yiemagent.llm.http._sse import SSEEvent, SSEParser

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "Emit",
    "HttpTransport",
    "Reader",
    "connection_problem",
    "iter_response_sse",
    "read_json_body",
    "shown_url",
]

logger = logging.getLogger("yiemagent.llm")

Emit = Callable[[MessageUpdateEvent], None]
Reader = Callable[[requests.Response, Emit], AssistantMessage]

# What the session asks for, and what every test proves is unpacked on both the whole and the
# streamed path. requests would otherwise also ask for br and zstd whenever their packages happen
# to be installed, making what a server sends depend on the machine.
ACCEPT_ENCODING = "gzip, deflate"
_DECODABLE = frozenset({"identity", *urllib3.response.HTTPResponse.CONTENT_DECODERS})
_READ_SIZE = 64 * 1024
_BROKEN = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)


class _BoundedBody:
    """``response.raw`` that counts the bytes read through it, after decompression, and raises
    ``LlmError`` once they pass ``limit``: a huge or endless reply, or a compressed one that
    unpacks to more, fails as it arrives, whether it is read by ``response.content``,
    ``iter_content`` or ``read1``. A body that is not the data its Content-Encoding says raises
    ``LlmError`` too. Everything else is the wrapped object's own."""

    def __init__(self, raw: Any, limit: int, label: str, status: int) -> None:
        self._raw = raw
        self._limit = limit
        self._label = label
        self._status = status
        self._seen = 0

    def _count(self, data: bytes) -> bytes:
        """Return ``data`` once it is counted; raise ``LlmError`` when it takes the total past
        the limit."""
        self._seen += len(data)
        if self._seen > self._limit:
            raise _too_large(self._label, self._limit, self._status)
        return data

    def _read(self, read: Callable[..., bytes], *args: Any, **kwargs: Any) -> bytes:
        """Return what ``read(*args, **kwargs)`` unpacks, counted; corrupt data is ``LlmError``."""
        try:
            return self._count(read(*args, **kwargs))
        except urllib3.exceptions.DecodeError as exc:
            raise _corrupt(self._label, self._raw, exc, self._status) from None

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        """The wrapped ``read``, counted."""
        return self._read(self._raw.read, *args, **kwargs)

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        """The wrapped ``stream``, each chunk counted as it comes."""
        try:
            for chunk in self._raw.stream(*args, **kwargs):
                yield self._count(chunk)
        except urllib3.exceptions.DecodeError as exc:
            raise _corrupt(self._label, self._raw, exc, self._status) from None

    def __getattr__(self, name: str) -> Any:
        """The wrapped object's attribute; its ``read1``, where it has one, counted."""
        value = getattr(self._raw, name)
        if name == "read1":  # only where urllib3 has it (2.x): _byte_chunks looks for it
            return lambda *args, **kwargs: self._read(value, *args, **kwargs)
        return value


def _too_large(label: str, limit: int, status: int, declared: str = "") -> LlmError:
    """Return the final ``LlmError`` of a reply over ``max_response_bytes`` (a retry would get
    the same reply); ``declared`` is the length its headers gave, if that was what told."""
    said = f" (its Content-Length says {declared})" if declared else ""
    return LlmError(
        f"{label} reply is larger than max_response_bytes ({limit} bytes){said}; not read any further",
        status=status,
    )


def _corrupt(label: str, raw: Any, exc: urllib3.exceptions.DecodeError, status: int) -> LlmError:
    """Return the final ``LlmError`` of a body that does not unpack as its Content-Encoding says
    (a retry would get the same mislabelled body), in the decompressor's own words (urllib3's
    when it refused the encodings themselves, such as too long a chain of them)."""
    coding = excerpt(raw.headers.get("content-encoding", "").strip(), 100)
    detail = exc.args[1] if len(exc.args) > 1 else exc.args[0] if exc.args else "no details"
    return LlmError(
        f"{label} reply cannot be decompressed as its Content-Encoding ({coding}) "
        f"says: {detail}; the server, or a proxy on the way, labels its replies "
        "wrongly",
        status=status,
    )


def _check_encoding(response: requests.Response, label: str) -> None:
    """Raise the final ``LlmError`` of a reply compressed in a way the client cannot unpack (a
    server that ignored ``Accept-Encoding``): read as it is, it would only look like garbage."""
    codings = response.headers.get("content-encoding", "").lower().split(",")
    unknown = [c.strip() for c in codings if c.strip() and c.strip() not in _DECODABLE]
    if unknown:
        shown = excerpt(", ".join(unknown), 100)
        raise LlmError(
            f"{label} reply is compressed with {shown}, which the client cannot "
            f"decompress (it asks for {ACCEPT_ENCODING}); the server, or a proxy on "
            "the way, ignored the request's Accept-Encoding",
            status=response.status_code,
        )


def _bound(response: requests.Response, limit: int, label: str) -> None:
    """Make ``response``'s body readable only up to ``limit`` bytes (see ``_BoundedBody``); raise
    ``LlmError`` at once when the body is not compressed and its Content-Length is already more."""
    declared = response.headers.get("content-length", "").strip()
    plain = response.headers.get("content-encoding", "identity").strip().lower() == "identity"
    if plain and declared.isdigit() and int(declared) > limit:
        raise _too_large(label, limit, response.status_code, f"{declared} bytes")
    # Duck-typed: _BoundedBody offers what requests and the readers here use of the raw body.
    response.raw = _BoundedBody(response.raw, limit, label, response.status_code)


def _byte_chunks(response: requests.Response) -> Iterator[bytes]:
    read1 = getattr(response.raw, "read1", None)
    if read1 is None:  # urllib3 1.x: iter_content yields chunked bodies as they arrive
        yield from response.iter_content(chunk_size=None)
        return
    while True:
        # requests leaves the raw body's own decoding off (it unpacks in iter_content), so read1
        # must ask for it: without it a compressed stream arrives as its packed bytes.
        data = read1(_READ_SIZE, decode_content=True)
        if not data:
            return
        yield data


def iter_response_sse(response: requests.Response, label: str) -> Iterator[SSEEvent]:
    """Yield the server-sent events of a streamed reply while its bytes arrive.

    A connection that breaks (reset, truncated chunked body, read timeout) raises a retryable
    ``LlmStreamError`` saying the stream broke off; a clean end just ends the iteration, and the
    caller decides whether the terminator was seen.
    """
    parser = SSEParser()
    try:
        for chunk in _byte_chunks(response):
            yield from parser.feed(chunk)
    except _BROKEN as exc:
        raise LlmStreamError(
            f"{label} stream broke off: the connection failed mid-stream ({type(exc).__name__})",
            retryable=True,
        ) from None
    yield from parser.finish()


def read_json_body(response: requests.Response, label: str) -> Any:
    """Return the decoded JSON body of a successful reply; raise ``LlmError`` if it is not JSON
    (or, through the transport's bound, larger than ``max_response_bytes``)."""
    raw = response.content
    try:
        return json.loads(raw)
    except ValueError as exc:
        text, _ = provider_error_text(raw)
        raise LlmError(
            f"{label} reply (HTTP {response.status_code}) is not valid JSON ({exc}): {text}",
            status=response.status_code,
        ) from None


def _http_error(response: requests.Response, label: str, secret: Secret) -> LlmError:
    """Return the ``LlmError`` for an HTTP error reply, its text already scrubbed of the key (a
    server may echo it back)."""
    status = response.status_code
    try:
        body = response.raw.read(_READ_SIZE, decode_content=True) or b""
    except _BROKEN:
        body = b""
    # Scrubbed before provider_error_text shortens it; this first cut, at _READ_SIZE, may split
    # the key too, and scrub masks a piece of it at the text's end.
    message, kind = provider_error_text(secret.scrub(body.decode("utf-8", "replace")))
    message = secret.scrub(message or response.reason or "no error text")
    where = f"HTTP {status}, {kind}" if kind else f"HTTP {status}"
    return LlmError(
        f"{label} API error ({where}): {message}",
        status=status,
        provider_message=message,
        retryable=is_retryable_status(status),
        retry_after_s=parse_retry_after(response.headers),
    )


def _redirect_error(response: requests.Response, label: str) -> LlmError:
    """Return the ``LlmError`` for a redirect, which the transport never follows: the request
    would carry the key to wherever the server points, another host included."""
    location = excerpt(response.headers.get("location") or "(no Location header)", 500)
    return LlmError(
        f"{label} server redirected the request (HTTP {response.status_code}) to {location}; "
        "API requests do not follow redirects, so set base_url to the final URL",
        status=response.status_code,
    )


def shown_url(url: str) -> str:
    """Return ``url`` fit for an error text: without user name, password, query or fragment,
    where a secret could hide (``http://user:key@host/v1?key=...``); the text as it is when it
    is not a URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return url
    if not parts.scheme or host is None:
        return url
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """Yield ``exc`` and every exception it wraps (``requests`` and ``urllib3`` nest them in
    ``args``, ``reason``, ``__cause__`` and ``__context__``), outermost first, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        inner = [*current.args, getattr(current, "reason", None), current.__cause__, current.__context__]
        todo.extend(e for e in inner if isinstance(e, BaseException))


def _reason(exc: BaseException) -> str:
    """The plain words for the innermost cause of a connection failure (no class names, no
    urllib3 pool or retry talk)."""
    causes = list(_causes(exc))
    for cause in causes:
        if isinstance(cause, socket.gaierror):
            return "host name not found"
    for cause in reversed(causes):  # innermost first: the socket error says what really happened
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ConnectionResetError):
            return "connection reset by the server"
        if isinstance(cause, RemoteDisconnected):
            return "the server closed the connection without replying"
        if isinstance(cause, ssl.SSLError):
            return f"TLS failed ({cause.reason or cause.strerror or 'handshake error'})"
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror[:1].lower() + cause.strerror[1:]
    return "the connection failed"


def connection_problem(exc: BaseException, server: str, timeout: float) -> LlmError | None:
    """Return the retryable ``LlmError`` for a request that failed at the connection level, in
    words a newcomer understands (``cannot connect to http://127.0.0.1:8799/v1: connection
    refused``), naming ``server`` (shown without credentials); ``None`` for other failures.

    A connect timeout is an ``LlmTimeoutError``. Read timeouts are not handled here."""
    where = shown_url(server)
    causes = list(_causes(exc))
    connecting = any(isinstance(c, urllib3.exceptions.NewConnectionError) for c in causes)
    if isinstance(exc, requests.ConnectTimeout) or any(
        isinstance(c, urllib3.exceptions.ConnectTimeoutError) and not connecting for c in causes
    ):
        return LlmTimeoutError(
            f"cannot connect to {where}: no connection within {timeout:g} s", retryable=True
        )
    if isinstance(exc, requests.Timeout):
        return None
    if connecting or isinstance(exc, requests.exceptions.SSLError):
        return LlmError(f"cannot connect to {where}: {_reason(exc)}", retryable=True)
    if isinstance(exc, (requests.ConnectionError, urllib3.exceptions.ProtocolError)):
        return LlmError(f"connection to {where} failed: {_reason(exc)}", retryable=True)
    return None


def _encode(body: Mapping[str, Any], label: str) -> bytes:
    """Return ``body`` as strict JSON in UTF-8: NaN and infinity, which ``json.dumps`` would write
    as bare tokens no provider parses, raise ``ValueError`` instead; text with a lone surrogate
    is sent with JSON escapes."""
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (half an emoji from a model, a file name decoded with
        # surrogateescape) has no UTF-8 form; as a JSON escape it still travels.
        return json.dumps(body, ensure_ascii=True, allow_nan=False).encode("ascii")
    except ValueError:
        json.dumps(body)  # re-raises any other problem (a cycle) as it is
        raise ValueError(
            f"{label} request not sent: its body holds NaN or infinity, which JSON "
            "cannot carry (check extra_body, tool schemas and tool-call arguments)"
        ) from None


def _scrubbed(error: LlmError, secret: Secret) -> LlmError:
    """Return a fresh copy of ``error`` (same class) with the key scrubbed from its texts.

    Always a copy: the caller raises it on its own thread, so no traceback of the helper thread,
    whose frames may hold a reply the server echoed the key into, travels with it.
    """
    return type(error)(
        secret.scrub(error.message),
        status=error.status,
        provider_message=None if error.provider_message is None else secret.scrub(error.provider_message),
        retryable=error.retryable,
        retry_after_s=error.retry_after_s,
    )


def _final_if_streamed(error: BaseException, emitted: bool) -> BaseException:
    """Make a retryable failure final once deltas went out: retrying would repeat them."""
    if emitted and isinstance(error, LlmError) and error.retryable:
        return error.final("not retried: part of the reply was already streamed")
    return error


class _Attempt:
    """One HTTP request on a helper thread; results come back to the caller through a queue."""

    def __init__(
        self,
        transport: HttpTransport,
        url: str,
        headers: Mapping[str, str],
        payload: bytes,
        read: Reader,
        server: str,
    ) -> None:
        self._transport = transport
        self._url = url
        self._server = server
        self._headers = dict(headers)
        self._payload = payload
        self._read = read
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._interrupter = RequestInterrupter()
        self._abandoned = False

    def run(
        self, on_update: Emit | None, signal: AbortSignal | None, deadline: Deadline | None = None
    ) -> AssistantMessage:
        """Start the helper and relay its events until it finishes, fails, ``signal`` fires,
        ``deadline`` passes (``LlmTimeoutError``) or the transport is closed."""
        if deadline is not None and not deadline.remaining():
            raise deadline.error(self._transport.label)
        unregister = signal.on_abort(lambda: self._inbox.put(("abort", None))) if signal is not None else None
        self._transport._in_flight(self, True)
        threading.Thread(target=self._work, name="yiemagent-llm-http", daemon=True).start()
        emitted = False
        try:
            while True:
                try:
                    kind, value = self._inbox.get(timeout=None if deadline is None else deadline.remaining())
                except queue.Empty:  # the finally's abandon() ends the helper's request
                    assert deadline is not None  # get() has a timeout only with a deadline
                    raise deadline.error(self._transport.label) from None
                if signal is not None and signal.aborted:
                    kind = "abort"  # nothing more reaches the caller once the signal fired
                if kind == "event":
                    emitted = True
                    if on_update is not None:
                        on_update(value)
                elif kind == "done":
                    return value  # type: ignore[no-any-return]
                elif kind == "error":
                    raise _final_if_streamed(value, emitted) from None
                elif kind == "closed":
                    raise LlmError(f"{self._transport.label} client was closed during the request")
                else:
                    raise LlmAbortedError(f"{self._transport.label} request aborted")
        finally:
            if unregister is not None:
                unregister()
            self._transport._in_flight(self, False)
            self.abandon()

    def close(self) -> None:
        """End the attempt because its transport is closing: the caller raises at once."""
        self._inbox.put(("closed", None))
        self.abandon()

    def abandon(self) -> None:
        """Drop whatever the helper still produces and shut its socket, so it ends now."""
        self._abandoned = True
        self._interrupter.interrupt()

    def _emit(self, event: MessageUpdateEvent) -> None:
        if not self._abandoned:
            self._inbox.put(("event", event))

    def _work(self) -> None:
        outcome: tuple[str, Any]
        try:
            with (
                self._transport.secret.active(),  # excerpt() scrubs the key from reply texts
                self._interrupter.active(),
                self._transport.session.post(
                    self._url,
                    data=self._payload,
                    headers=self._headers,
                    timeout=self._transport.timeout,
                    stream=True,
                    allow_redirects=False,  # a redirect could take the key to another host
                ) as response,
            ):
                if 300 <= response.status_code < 400:
                    raise _redirect_error(response, self._transport.label)
                if response.status_code >= 400:
                    raise _http_error(response, self._transport.label, self._transport.secret)
                _check_encoding(response, self._transport.label)
                _bound(response, self._transport.max_response_bytes, self._transport.label)
                outcome = ("done", self._read(response, self._emit))
        except BaseException as exc:  # converted here, so only a fresh, scrubbed error travels
            outcome = ("error", self._transport.as_llm_error(exc, self._server))
        # Put only once the interrupter let go of the connection: the caller's abandon() that
        # follows must not shut a connection that went back to the pool for the next request.
        self._inbox.put(outcome)


class HttpTransport:
    """Posts JSON to a provider with one ``requests.Session``, as ``options`` say.

    ``options.timeout`` bounds the wait to connect and for each next piece of the reply;
    ``options.deadline_s`` (when set) a whole call, retries and their waits included;
    ``options.max_response_bytes`` the size of a reply, unpacked when it comes compressed,
    counted as it arrives; failed attempts are retried as ``options.retry`` says. Errors are
    ``LlmError`` subclasses whose text never holds the api key; nothing here logs headers.
    """

    def __init__(
        self, label: str, options: HttpOptions, *, secret: Secret, auth: requests.auth.AuthBase | None = None
    ) -> None:
        self.label = label
        self.timeout = options.timeout
        self.max_response_bytes = options.max_response_bytes
        self.deadline_s = options.deadline_s
        self.retry = options.retry
        self.secret = secret
        self.session = interruptible_session()
        self.session.auth = auth  # adds the key to each request; no header dict ever holds it
        self.session.headers["Accept-Encoding"] = ACCEPT_ENCODING
        self._lock = threading.Lock()
        self._attempts: set[_Attempt] = set()

    def post(
        self,
        url: str,
        headers: Mapping[str, str],
        body: Mapping[str, Any],
        read: Reader,
        *,
        on_update: Emit | None = None,
        signal: AbortSignal | None = None,
        retry: RetryPolicy | None = None,
        server: str | None = None,
    ) -> AssistantMessage:
        """Send ``body`` to ``url`` and return what ``read`` makes of the reply, with retries
        (as ``retry`` says, else the transport's policy). ``server`` (default ``url``) is the
        address connection errors name: the client's base URL, which the user wrote.

        ``read`` runs on the helper thread and reports deltas through its ``emit`` argument; they
        reach ``on_update`` on this thread. Raises ``LlmError`` (``LlmAbortedError`` on abort,
        ``LlmTimeoutError`` past ``deadline_s``), or ``ValueError`` before sending when ``body``
        holds NaN or infinity.
        """
        if signal is not None and signal.aborted:
            raise LlmAbortedError(f"{self.label} request aborted before it was sent")
        payload = _encode(body, self.label)
        deadline = Deadline.start(self.deadline_s)

        def attempt() -> AssistantMessage:
            logger.debug("%s request: POST %s", self.label, url)
            return _Attempt(self, url, headers, payload, read, server or url).run(on_update, signal, deadline)

        return call_with_retries(
            attempt, retry or self.retry, signal=signal, label=self.label, logger=logger, deadline=deadline
        )

    def get_json(
        self, url: str, headers: Mapping[str, str], server: str | None = None, timeout: float | None = None
    ) -> Any:
        """The decoded JSON body of one GET of ``url`` (no retries, no redirects, waiting at
        most ``timeout`` seconds, else the transport's, for each piece; the reply bounded by
        ``max_response_bytes``); ``LlmError`` for anything but a JSON 2xx reply, its text
        scrubbed of the key (``retryable`` where asking again may help)."""
        wait = self.timeout if timeout is None else min(timeout, self.timeout)
        try:
            response = self.session.get(
                url, headers=dict(headers), timeout=wait, allow_redirects=False, stream=True
            )
        except Exception as exc:
            raise self.as_llm_error(exc, server or url) from None
        with response:
            if response.is_redirect:
                raise _redirect_error(response, self.label)
            if not 200 <= response.status_code < 300:
                raise _http_error(response, self.label, self.secret)
            _check_encoding(response, self.label)
            _bound(response, self.max_response_bytes, self.label)
            return read_json_body(response, self.label)

    def as_llm_error(self, exc: BaseException, server: str = "the server") -> BaseException:
        """Return a fresh ``LlmError``, scrubbed of the key, for a failed attempt (other exceptions
        are returned as they are); connection failures name ``server`` (``connection_problem``)."""
        error: LlmError
        problem = None if isinstance(exc, LlmError) else connection_problem(exc, server, self.timeout)
        if isinstance(exc, LlmError):
            error = exc
        elif problem is not None:
            error = problem
        elif isinstance(exc, requests.Timeout):
            error = LlmTimeoutError(
                f"{self.label} request timed out: no reply within {self.timeout:g} s", retryable=True
            )
        elif isinstance(exc, (requests.RequestException, urllib3.exceptions.HTTPError)):
            error = LlmError(f"{self.label} request failed: {exc}", retryable=True)
        else:
            return exc
        return _scrubbed(error, self.secret)

    def _in_flight(self, attempt: _Attempt, running: bool) -> None:
        with self._lock:
            if running:
                self._attempts.add(attempt)
            else:
                self._attempts.discard(attempt)

    def close(self) -> None:
        """End the requests in flight (their callers raise ``LlmError`` saying the client was
        closed; nothing is retried) and close the session's pooled connections. The transport
        may still be used afterwards: a new request opens a new connection."""
        with self._lock:
            attempts, self._attempts = list(self._attempts), set()
        for attempt in attempts:
            attempt.close()
        self.session.close()

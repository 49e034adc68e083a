"""The HTTP client of an MCP connection over streamable HTTP: the SDK's own (its timeouts, the
caller's headers), with every response read only up to ``max_result_bytes`` per message.

The SDK reads a JSON response whole (``aread``) and bounds an event stream only at 1 MiB per
event, failing it as if the connection were lost. Here a response hook wraps each body before
the SDK reads it: a JSON body is held up to the limit, an event stream is passed on one whole
event at a time, each held up to the limit. A message over the limit is dropped unread. When it
is the answer of the request that opened the stream, that request gets a ``RESULT_TOO_LARGE``
error instead (``mcp_bounds``), so the call fails at once and the session stays usable; any other
(a notification, a request of the server's) is skipped with a warning and the stream goes on.
Bodies are asked for uncompressed, so that the bytes counted are the bytes the SDK will hold.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping

import httpx2
from mcp.shared._httpx_utils import create_mcp_http_client

from yiemagent.tools.mcp._bounds import EDGE_BYTES, is_answer, too_large

__all__ = ["SSE_FRAMING_BYTES", "bounded_http_client"]

logger = logging.getLogger("yiemagent")

# What an event stream adds around a message (``event: message``, an ``id:`` line, ``data: ``,
# line ends): an event may be this much over the limit, so a message within it always gets through.
SSE_FRAMING_BYTES = 1024


def bounded_http_client(headers: Mapping[str, str] | None, limit: int, label: str) -> httpx2.AsyncClient:
    """The SDK's HTTP client with ``headers``, asking for uncompressed bodies (unless ``headers``
    say otherwise) and reading each response message only up to ``limit`` bytes; ``label``
    names the server in the warning about a dropped message no request was waiting for."""
    sent = dict(headers or {})
    if not any(key.lower() == "accept-encoding" for key in sent):
        sent["Accept-Encoding"] = "identity"
    client = create_mcp_http_client(headers=sent)
    client.event_hooks = {"request": [], "response": [_Bound(limit, label)]}
    return client


class _Bound:
    """The response hook: wrap a JSON or event-stream body in its bounded reader."""

    def __init__(self, limit: int, label: str) -> None:
        self._limit = limit
        self._label = label

    async def __call__(self, response: httpx2.Response) -> None:
        """Replace the body stream of ``response`` (before anything reads it) by its bounded
        reader: JSON and event streams only; other bodies are left as they are."""
        kind = response.headers.get("content-type", "").lower()
        inner = response.stream
        if not isinstance(inner, httpx2.AsyncByteStream):
            return
        request_id = _request_id(response.request)
        if kind.startswith("application/json"):
            declared = response.headers.get("content-length", "")
            size = int(declared) if declared.isdigit() else None
            response.stream = _JsonBody(inner, self._limit, request_id, size)
        elif kind.startswith("text/event-stream"):
            response.stream = _EventStreamBody(inner, self._limit, request_id, self._label)


def _request_id(request: httpx2.Request) -> str | int | None:
    """The JSON-RPC id of the request ``request`` posted, if it posted one (the SDK posts one
    message per request, as JSON)."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    return request_id if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None


def _error_body(request_id: str | int | None, limit: int, size: int | None) -> bytes:
    """The JSON text of the error that stands in for an answer over ``limit``."""
    return too_large(request_id, limit, size).model_dump_json(by_alias=True).encode()


class _JsonBody(httpx2.AsyncByteStream):
    """A JSON response body, held up to ``limit`` bytes and then given whole, or replaced by the
    error for ``request_id`` (without reading further) when it is longer."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, limit: int, request_id: str | int | None, declared: int | None
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._request_id = request_id
        self._declared = declared

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._declared is not None and self._declared > self._limit:
            await self._inner.aclose()
            yield _error_body(self._request_id, self._limit, self._declared)
            return
        body = bytearray()
        async for chunk in self._inner:
            body += chunk
            if len(body) > self._limit:
                del body[:]
                await self._inner.aclose()
                yield _error_body(self._request_id, self._limit, None)
                return
        yield bytes(body)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _EventStreamBody(httpx2.AsyncByteStream):
    """An event-stream body passed on one whole event at a time. An event over the limit that
    answers the stream's request (or may: its start does not tell) ends the stream with the error
    for it; any other, and any on a stream of no request (the session's GET stream), is skipped
    with a warning."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, limit: int, request_id: str | int | None, label: str
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._request_id = request_id
        self._label = label

    async def __aiter__(self) -> AsyncIterator[bytes]:
        events = _Events(self._limit + SSE_FRAMING_BYTES)
        async for chunk in self._inner:
            for event in events.feed(chunk):
                if not isinstance(event, _Dropped):
                    yield event
                elif self._request_id is not None and is_answer(event.data_head) is not False:
                    await self._inner.aclose()
                    error = _error_body(self._request_id, self._limit, None)
                    yield b"event: message\ndata: " + error + b"\n\n"
                    return
                else:
                    logger.warning(
                        'MCP server "%s": dropped a message larger than '
                        "max_result_bytes (%d bytes) that answered no call",
                        self._label,
                        self._limit,
                    )
        rest = events.flush()
        if rest:
            yield rest

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Dropped:
    """An event that grew over the limit; ``data_head`` is the start of its ``data``."""

    def __init__(self, start: bytes) -> None:
        found = start.find(b"data:")
        head = start[found + 5 :] if found >= 0 else b""
        self.data_head = head[1:] if head.startswith(b" ") else head


class _Events:
    """Splits event-stream bytes into whole events, each ending with its blank line.

    Line ends are written as ``\\n`` whatever the server used (``\\r\\n`` and ``\\r`` end lines
    too), which the SDK's parser reads the same. ``feed`` returns the events completed, in
    order, with a ``_Dropped`` where an event grew over ``limit``: its bytes are skipped up to its
    end.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._event = bytearray()
        self._skipping = False
        self._held_cr = False  # the last piece ended with "\r", which may start a "\r\n"
        self._at_line_end = False  # the last byte passed was a line end

    def feed(self, chunk: bytes) -> list[bytes | _Dropped]:
        """Take the next ``chunk``; return the events it completed or began to drop."""
        if self._held_cr:
            chunk, self._held_cr = b"\r" + chunk, False
        if chunk.endswith(b"\r"):
            chunk, self._held_cr = chunk[:-1], True
        text = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        done: list[bytes | _Dropped] = []
        start = 0
        while (end := self._event_end(text, start)) >= 0:
            self._take(text[start:end], done)
            if not self._skipping:
                done.append(bytes(self._event))
            self._event, self._skipping = bytearray(), False
            start = end
        self._take(text[start:], done)
        if text:
            self._at_line_end = text.endswith(b"\n")
        return done

    def flush(self) -> bytes:
        """What is left of an event the stream did not finish (nothing, if it was being skipped)."""
        rest = b"" if self._skipping else bytes(self._event) + (b"\n" if self._held_cr else b"")
        self._event = bytearray()
        return rest

    def _event_end(self, text: bytes, start: int) -> int:
        """Where the event going on at ``start`` ends in ``text`` (after its blank line), or -1."""
        if start == 0 and self._at_line_end and text.startswith(b"\n"):
            return 1
        found = text.find(b"\n\n", start)
        return -1 if found < 0 else found + 2

    def _take(self, piece: bytes, done: list[bytes | _Dropped]) -> None:
        """Add ``piece`` to the event going on, or start skipping it when it grows over the limit."""
        if self._skipping or not piece:
            return
        if len(self._event) + len(piece) > self._limit:
            start = (bytes(self._event[:EDGE_BYTES]) + piece[:EDGE_BYTES])[:EDGE_BYTES]
            self._event, self._skipping = bytearray(), True
            done.append(_Dropped(start))
            return
        self._event += piece

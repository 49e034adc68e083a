"""A scriptable HTTP server on loopback for the provider-client tests.

``ScriptedServer`` runs the standard library's ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) in a
thread. It records every request (method, path, headers, JSON body) and answers from a queue of
scripted ``Reply`` objects: a status, headers and a whole body (fixed, or made from the request,
for a server that echoes what it was sent), or SSE bytes sent as HTTP chunks
with a flush after each, optionally stopping without the final chunk (a connection closed
mid-stream) or waiting on a ``threading.Event`` first (a slow server) or part-way (a stalled
stream), or pausing between chunks (a trickling server); ``compressed`` packs SSE pieces the way a
compressing server streams them (``Content-Encoding: gzip`` or ``deflate``). Flushing each piece
makes odd splits likely, not certain: TCP may still merge or split them on the way, so the
client's reads need not end where the pieces do. That the parser handles every byte split is
proven without a network by ``test_sse.py``.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

BLOCK_LIMIT_S = 10.0  # a blocked reply never waits longer than this, whatever the test does


@dataclass
class Recorded:
    """One request as the server received it; ``headers`` keys are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any = None


@dataclass
class Reply:
    """One scripted answer: ``body`` with a Content-Length, or ``chunks`` sent chunked.

    ``render``, when set, makes the body from the request as it arrived (a server that echoes
    what it was sent) in place of ``body``.
    ``finish=False`` closes the connection without the final zero-length chunk. ``wait`` makes the
    handler wait for the event before answering; with ``wait_after`` it waits after sending that
    many chunks instead; with ``strict_wait`` too, an event still unset after ``BLOCK_LIMIT_S``
    ends the reply there (the connection closed, nothing more sent), so that a test can tell a
    client that released the server by what it did from one that merely outwaited it.
    ``pause_s`` makes it pause that long before each chunk (a trickle that lasts as long as the
    chunks do; the pauses end once the server is stopped).
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    chunks: list[bytes] | None = None
    finish: bool = True
    wait: threading.Event | None = None
    wait_after: int | None = None
    strict_wait: bool = False
    pause_s: float = 0.0
    render: Callable[[Recorded], bytes] | None = None


def sse_bytes(events: Iterable[Any], *, named: bool = False, done: bool = False) -> bytes:
    """Encode events as an SSE body: ``data: <json>`` (strings are sent as they are).

    ``named`` adds an ``event:`` line from each event's ``type`` (Anthropic's style); ``done`` ends
    with ``data: [DONE]`` (OpenAI's).
    """
    out = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
        name = f"event: {event['type']}\n" if named and isinstance(event, Mapping) else ""
        out.append(f"{name}data: {data}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode("utf-8")


_WBITS = {"gzip": 31, "deflate": 15, "raw-deflate": -15}


def compressed(pieces: Iterable[bytes], coding: str, level: int = 9) -> list[bytes]:
    """Pack ``pieces`` as one body in ``coding``: ``gzip``, ``deflate`` (zlib data, as RFC 9110
    defines it) or ``raw-deflate`` (bare deflate data, which some servers send as ``deflate``).
    Each piece is flushed (``Z_SYNC_FLUSH``), as a streaming server does, so each result unpacks
    to its piece as soon as it arrives; a last result ends the data. ``level`` 0 stores the
    pieces unpacked, which makes the body a few bytes longer than what it unpacks to."""
    packer = zlib.compressobj(level, zlib.DEFLATED, _WBITS[coding])
    out = [packer.compress(piece) + packer.flush(zlib.Z_SYNC_FLUSH) for piece in pieces]
    out.append(packer.flush())
    return out


def content_encoding(coding: str) -> str:
    """The ``Content-Encoding`` a server sends with a body packed by ``compressed(..., coding)``."""
    return "deflate" if coding == "raw-deflate" else coding


def split_every(data: bytes, size: int) -> list[bytes]:
    """Split ``data`` into pieces of ``size`` bytes (the last may be shorter)."""
    return [data[i : i + size] for i in range(0, len(data), size)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: test output is for the tests."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = Recorded(self.command, self.path, headers, raw, body)
        reply = self.server.owner._record(request)
        try:
            self._answer(reply, request)
        except OSError:  # the client went away (abort, timeout): nothing left to say
            self.close_connection = True

    do_GET = do_POST

    def _answer(self, reply: Reply, request: Recorded) -> None:
        if reply.wait is not None and reply.wait_after is None:
            reply.wait.wait(BLOCK_LIMIT_S)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.chunks is None:
            body = reply.render(request) if reply.render is not None else reply.body or b""
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for number, chunk in enumerate(reply.chunks):
            if (
                reply.wait is not None
                and reply.wait_after == number
                and not reply.wait.wait(BLOCK_LIMIT_S)
                and reply.strict_wait
            ):
                self.close_connection = True
                return
            if reply.pause_s:
                self.server.owner.stopped.wait(reply.pause_s)
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        if reply.finish:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        else:
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that hang up."""


class ScriptedServer:
    """A loopback HTTP server answering from a queue of ``Reply`` objects; a context manager.

    ``requests`` lists what was received, in order; ``wait_for_requests(n)`` blocks until ``n``
    requests arrived. Leaving the context releases every blocked reply and stops the server.
    """

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._cond = threading.Condition()
        self.requests: list[Recorded] = []
        self._waits: list[threading.Event] = []
        self.stopped = threading.Event()  # set on leaving the context: trickling replies hurry
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stopped.set()
        with self._cond:
            events = list(self._waits)
        for event in events:
            event.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def add(self, reply: Reply) -> Reply:
        """Queue ``reply`` for the next request that has none yet."""
        with self._cond:
            self._replies.append(reply)
            if reply.wait is not None:
                self._waits.append(reply.wait)
        return reply

    def json(
        self,
        body: Any,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        wait: threading.Event | None = None,
    ) -> Reply:
        """Queue a JSON reply (sent once ``wait`` is set, when given)."""
        return self.add(
            Reply(
                status,
                {"Content-Type": "application/json", **(headers or {})},
                json.dumps(body).encode("utf-8"),
                wait=wait,
            )
        )

    def echo(self, make: Callable[[Recorded], Any]) -> Reply:
        """Queue a JSON reply made by ``make`` from the request it answers (with its headers: a
        server that echoes what a client sent, its api key say)."""
        return self.add(
            Reply(
                200,
                {"Content-Type": "application/json"},
                render=lambda request: json.dumps(make(request)).encode("utf-8"),
            )
        )

    def text(self, body: str, content_type: str = "application/json") -> Reply:
        """Queue a successful reply with a raw body (for bodies that are not the JSON they claim)."""
        return self.add(Reply(200, {"Content-Type": content_type}, body.encode("utf-8")))

    def sse(
        self,
        chunks: list[bytes],
        *,
        finish: bool = True,
        wait: threading.Event | None = None,
        wait_after: int | None = None,
        coding: str | None = None,
        strict_wait: bool = False,
    ) -> Reply:
        """Queue an event stream sent as the given byte pieces, one HTTP chunk and flush each
        (TCP may still regroup the bytes on their way to the client); with ``coding``, each piece
        is packed as ``compressed`` does and the reply says so in its ``Content-Encoding`` (a
        last chunk ends the packed data)."""
        headers = {"Content-Type": "text/event-stream"}
        if coding is not None:
            chunks = compressed(chunks, coding)
            headers["Content-Encoding"] = content_encoding(coding)
        return self.add(
            Reply(
                200,
                headers,
                chunks=chunks,
                finish=finish,
                wait=wait,
                wait_after=wait_after,
                strict_wait=strict_wait,
            )
        )

    def _record(self, request: Recorded) -> Reply:
        with self._cond:
            self.requests.append(request)
            self._cond.notify_all()
            if self._replies:
                return self._replies.popleft()
        error = {"error": {"message": "the test scripted no reply for this request"}}
        return Reply(400, {"Content-Type": "application/json"}, json.dumps(error).encode())

    def wait_for_requests(self, count: int) -> bool:
        """Block until ``count`` requests arrived (at most ``BLOCK_LIMIT_S``); return whether they
        did."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.requests) >= count, BLOCK_LIMIT_S)

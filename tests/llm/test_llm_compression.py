"""Issue 18, item 4: compressed replies. The clients ask for gzip and deflate, and unpack what they
get, streamed or whole, as it arrives; ``max_response_bytes`` counts the unpacked bytes, so a small
body that unpacks to a gigabyte is refused by the same limit on both paths, without ever being
unpacked whole. A body that is not what its Content-Encoding says, or that is packed in a way the
client cannot unpack, is a clear error, not garbage read as a reply.
"""

from __future__ import annotations

import gzip
import json
import struct
import threading
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from llm_helpers import (
    Collector,
    anthropic_client,
    anthropic_message,
    fast,
    openai_client,
    openai_completion,
    simple_request,
)
from llm_server import Reply, ScriptedServer, compressed, content_encoding, split_every, sse_bytes

from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._messages import AssistantMessage
from yiemagent.llm import LlmClient, LlmError

ClientFactory = Callable[..., LlmClient]
CLIENTS = [pytest.param(openai_client, id="openai"), pytest.param(anthropic_client, id="anthropic")]
CODINGS = ["gzip", "deflate", "raw-deflate"]
SSE = {"Content-Type": "text/event-stream"}
JSON = {"Content-Type": "application/json"}
LIMIT = 10_000
MIB = 2**20

OPENAI_EVENTS: list[dict[str, Any]] = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Héllo "}}]},
    {"choices": [{"index": 0, "delta": {"content": "日本"}}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "getWeather", "arguments": '{"city": '},
                        }
                    ]
                },
            }
        ]
    },
    {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"Zürich"}'}}]},
                "finish_reason": "tool_calls",
            }
        ]
    },
]
ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Héllo "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "日本"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "call_1", "name": "getWeather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": '},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '"Zürich"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}},
    {"type": "message_stop"},
]
EXPECTED = [TextContent("Héllo 日本"), AgentToolCall("call_1", "getWeather", {"city": "Zürich"})]


def stream_pieces(make: ClientFactory) -> list[bytes]:
    """The SSE body of a reply of text and a tool call for the client ``make`` builds, one piece
    per event (as a server writes them)."""
    if make is openai_client:
        return [*(sse_bytes([e]) for e in OPENAI_EVENTS), b"data: [DONE]\n\n"]
    return [sse_bytes([e], named=True) for e in ANTHROPIC_EVENTS]


def assert_whole_reply(reply: AssistantMessage, events: Collector) -> None:
    """``reply`` and the deltas reported are those of ``stream_pieces``."""
    assert reply.content == EXPECTED
    assert reply.stop_reason == "toolUse"
    assert events.text() == "Héllo 日本"
    assert events.text("tool_call") == '{"city": "Zürich"}'


def packed(pieces: list[bytes], coding: str, level: int = 9) -> bytes:
    """``pieces`` packed as one body in ``coding`` (see ``llm_server.compressed``)."""
    return b"".join(compressed(pieces, coding, level))


def packed_zeros(coding: str, mib: int) -> bytes:
    """``mib`` MiB of zero bytes packed in ``coding`` (``gzip`` or ``deflate``), built without
    packing them all: gzip as one member per MiB (a gzip body may hold several, read one after
    another); deflate as one flushed MiB repeated (after a full flush the packer turns the same
    input into the same bytes), closed by the checksum of ``n`` zero bytes, which is
    ``(n mod 65521) << 16 | 1``."""
    if coding == "gzip":
        return gzip.compress(bytes(MIB)) * mib
    packer = zlib.compressobj(9)
    first = packer.compress(bytes(MIB)) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(bytes(MIB)) + packer.flush(zlib.Z_FULL_FLUSH)
    end = packer.flush()[:-4]  # the final block, without the checksum of what was really packed
    checksum = ((mib * MIB) % 65521) << 16 | 1
    return first + again * (mib - 1) + end + struct.pack(">I", checksum)


def good_body(make: ClientFactory) -> bytes:
    """A whole successful reply for the client ``make`` builds."""
    body = (
        openai_completion("fine")
        if make is openai_client
        else anthropic_message([{"type": "text", "text": "fine"}])
    )
    return json.dumps(body).encode()


def assert_final(error: LlmError, server: ScriptedServer) -> None:
    """``error`` is final: not retryable, and the server saw one request only (the clients
    retry twice by default)."""
    assert not error.retryable
    assert len(server.requests) == 1


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize("make", CLIENTS)
def test_a_compressed_stream_is_unpacked(
    server: ScriptedServer, make: ClientFactory, coding: str, framing: str
) -> None:
    body = packed(stream_pieces(make), coding)
    headers = {**SSE, "Content-Encoding": content_encoding(coding)}
    if framing == "chunked":  # packed bytes cut at odd places: a piece may end mid-code
        server.add(Reply(200, headers, chunks=split_every(body, 7)))
    else:
        server.add(Reply(200, headers, body))
    events = Collector()
    reply = make(server, stream=True)(simple_request(), on_update=events)
    assert_whole_reply(reply, events)
    # What the client asks for is exactly what these cases just proved it unpacks.
    assert server.requests[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize("make", CLIENTS)
def test_each_delta_is_reported_while_the_compressed_stream_is_still_open(
    server: ScriptedServer, make: ClientFactory, coding: str
) -> None:
    # The server sends the first event, then holds the rest until the client has reported that
    # event's delta; a client that unpacked only at the end would never release it, and the
    # server would cut the reply off (strict_wait) instead of finishing it.
    first_seen = threading.Event()
    pieces = stream_pieces(make)
    opening = 1 if make is openai_client else 3  # Anthropic's first text delta is its third event
    server.sse(
        [b"".join(pieces[:opening]), *pieces[opening:]],
        coding=coding,
        wait=first_seen,
        wait_after=1,
        strict_wait=True,
    )
    events = Collector()

    def on_update(event: Any) -> None:
        events(event)
        first_seen.set()

    reply = make(server, stream=True)(simple_request(), on_update=on_update)
    assert_whole_reply(reply, events)
    assert len(server.requests) == 1


@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize("make", CLIENTS)
def test_the_limit_counts_unpacked_bytes_not_packed_ones(
    server: ScriptedServer, make: ClientFactory, coding: str
) -> None:
    # Stored (level 0), the packed body is a few bytes longer than what it unpacks to: exactly
    # LIMIT unpacked bytes are read, though more than LIMIT bytes came over the wire.
    pieces = stream_pieces(make)
    padding = LIMIT - len(b"".join(pieces)) - len(b":\n\n")
    pieces = [b":" + b"p" * padding + b"\n\n", *pieces]  # an SSE comment, which clients skip
    assert len(b"".join(pieces)) == LIMIT
    body = packed(pieces, coding, level=0)
    assert len(body) > LIMIT
    server.add(Reply(200, {**SSE, "Content-Encoding": content_encoding(coding)}, chunks=[body]))
    events = Collector()
    reply = make(server, stream=True, http=fast(max_response_bytes=LIMIT))(simple_request(), on_update=events)
    assert_whole_reply(reply, events)


@pytest.mark.parametrize("coding", CODINGS)
@pytest.mark.parametrize("make", CLIENTS)
def test_a_compressed_stream_over_the_limit_once_unpacked_is_refused(
    server: ScriptedServer, make: ClientFactory, coding: str
) -> None:
    pieces = [b": keep-alive\n\n" * (LIMIT // 10), *stream_pieces(make)]
    body = packed(pieces, coding)
    assert len(body) < LIMIT < len(b"".join(pieces))  # only the unpacked stream is too large
    server.sse(pieces, coding=coding)
    with pytest.raises(LlmError) as info:
        make(server, stream=True, http=fast(max_response_bytes=LIMIT))(simple_request())
    assert f"reply is larger than max_response_bytes ({LIMIT} bytes); not read any further" in str(info.value)
    assert_final(info.value, server)


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("make", CLIENTS)
def test_a_bomb_is_refused_by_the_same_limit_streamed_or_not(
    server: ScriptedServer, make: ClientFactory, stream: bool, coding: str
) -> None:
    bomb = packed_zeros(coding, 1024)  # about 1 MB that unpacks to 1 GiB
    limit = 4 * MIB
    assert len(bomb) < limit  # only its unpacked bytes are over the limit
    server.add(
        Reply(
            200,
            {**(SSE if stream else JSON), "Content-Encoding": coding},
            chunks=split_every(bomb, 64 * 1024),
        )
    )
    client = make(server, stream=stream, http=fast(max_response_bytes=limit))
    tracemalloc.start()
    try:
        with pytest.raises(LlmError) as info:
            client(simple_request())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value).endswith(
        f"reply is larger than max_response_bytes ({limit} bytes); not read any further"
    )
    assert_final(info.value, server)
    # Unpacked a piece at a time: never much more than the limit in memory, far from the 1 GiB
    # the bomb holds (a single unbounded read of what has arrived already takes over 16 MiB).
    assert peak < 2 * limit, f"{peak} bytes allocated while reading the bomb"


@pytest.mark.parametrize(
    ("coding", "detail"),
    [
        ("gzip", "Error -3 while decompressing data: incorrect header check"),
        (", ".join(["gzip"] * 6), "Too many content encodings in the chain: 6 > 5"),  # urllib3's cap
    ],
    ids=["mislabelled", "too-many-codings"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("make", CLIENTS)
def test_a_body_that_is_not_what_its_encoding_says_is_a_clear_error(
    server: ScriptedServer, make: ClientFactory, stream: bool, coding: str, detail: str
) -> None:
    body = b"".join(stream_pieces(make)) if stream else good_body(make)
    server.add(Reply(200, {**(SSE if stream else JSON), "Content-Encoding": coding}, chunks=[body]))
    with pytest.raises(LlmError) as info:
        make(server, stream=stream)(simple_request())
    assert str(info.value) == (
        f"{client_label(make)} reply cannot be decompressed as its Content-Encoding ({coding}) "
        f"says: {detail}; the server, or a proxy on the way, labels its replies wrongly"
    )
    assert_final(info.value, server)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("make", CLIENTS)
def test_a_coding_the_client_cannot_unpack_is_a_clear_error(
    server: ScriptedServer, make: ClientFactory, stream: bool
) -> None:
    # Read as it is, a body packed with LZW ("compress") would only look like garbage.
    body = b"".join(stream_pieces(make)) if stream else good_body(make)
    server.add(Reply(200, {**(SSE if stream else JSON), "Content-Encoding": "compress"}, body))
    with pytest.raises(LlmError) as info:
        make(server, stream=stream)(simple_request())
    assert str(info.value) == (
        f"{client_label(make)} reply is compressed with compress, which the client cannot "
        "decompress (it asks for gzip, deflate); the server, or a proxy on the way, ignored the "
        "request's Accept-Encoding"
    )
    assert_final(info.value, server)


def client_label(make: ClientFactory) -> str:
    """The name the client ``make`` builds gives its provider in error texts."""
    return "OpenAI" if make is openai_client else "Anthropic"

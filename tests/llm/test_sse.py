"""The incremental SSE parser: byte splits anywhere, line endings, comments, multi-line data."""

from __future__ import annotations

import pytest

from yiemagent.llm.http._sse import SSEEvent, SSEParser, iter_sse

STREAM = (
    ": keep-alive comment\n"
    "\n"
    "event: message_start\n"
    'data: {"text": "héllo 日本 🎉"}\n'
    "\n"
    "data: line one\n"
    "data: line two\n"
    "id: 7\n"
    "\n"
    "retry: 1000\n"
    "unknown: field\n"
    "\n"
    "data:no-space\n"
    "\n"
    "data: [DONE]\n"
    "\n"
).encode()

EXPECTED = [
    SSEEvent('{"text": "héllo 日本 🎉"}', "message_start"),
    SSEEvent("line one\nline two", "message", "7"),
    SSEEvent("no-space", "message", "7"),
    SSEEvent("[DONE]", "message", "7"),
]


def feed_all(pieces: list[bytes]) -> list[SSEEvent]:
    return list(iter_sse(pieces))


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, 10_000])
def test_any_split_gives_the_same_events(size: int) -> None:
    pieces = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert feed_all(pieces) == EXPECTED


def test_every_two_way_split_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        assert feed_all([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut


@pytest.mark.parametrize("newline", [b"\r\n", b"\r", b"\n"])
def test_every_line_ending_style(newline: bytes) -> None:
    data = STREAM.replace(b"\n", newline)
    assert feed_all([data[i : i + 1] for i in range(len(data))]) == EXPECTED


def test_crlf_split_between_chunks_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n\r") == []
    assert parser.feed(b"\ndata: b\r\n\r\n") == [SSEEvent("a"), SSEEvent("b")]


def test_events_come_out_as_soon_as_they_complete() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: one\n") == []
    assert parser.feed(b"\ndata: tw") == [SSEEvent("one")]
    assert parser.feed(b"o\n\n") == [SSEEvent("two")]


def test_leading_bom_is_ignored() -> None:
    assert feed_all([b"\xef\xbb", b"\xbfdata: x\n\n"]) == [SSEEvent("x")]


def test_event_without_data_is_not_dispatched_and_name_resets() -> None:
    assert feed_all([b"event: ping\n\ndata: x\n\n"]) == [SSEEvent("x")]


def test_finish_dispatches_complete_lines_and_drops_a_cut_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: whole\n") == []
    assert parser.finish() == [SSEEvent("whole")]
    cut = SSEParser()
    assert cut.feed(b'data: {"trunc') == []
    assert cut.finish() == []


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert feed_all([b"data: \xff\xfe\n\n"]) == [SSEEvent("\ufffd\ufffd")]

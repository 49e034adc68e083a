"""The pieces of the bound on MCP messages that real servers reach only in part: telling which
request a dropped message answered from its two ends whatever order its members come in (the
TypeScript SDK writes ``id`` after ``result``), and splitting an event stream into whole events
whatever its line ends and however it is cut."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tiers import absent

pytest.importorskip("mcp.types", reason=absent("mcp"))  # not "mcp": tests/tools/mcp is one too

from yiemagent.tools.mcp._bounds import EDGE_BYTES, answer_id, is_answer
from yiemagent.tools.mcp._http import _Dropped, _Events

BIG = {
    "content": [{"type": "text", "text": 'x "id": 4 }, \\"id\\": 5' * 2000}],
    "structuredContent": {"id": 9, "items": [{"id": 1}] * 500},
}


@pytest.mark.parametrize(
    ("message", "answers", "request_id"),
    [
        ({"jsonrpc": "2.0", "id": 3, "result": BIG}, True, 3),  # the Python SDK's order
        ({"result": BIG, "jsonrpc": "2.0", "id": "req-7"}, True, "req-7"),  # the TypeScript SDK's
        ({"jsonrpc": "2.0", "error": {"code": 1, "message": "x" * 9000}, "id": 8}, True, 8),
        (
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"id": 5, "result": BIG}},
            False,
            None,
        ),
        (
            {"params": {"id": 5, "result": BIG}, "jsonrpc": "2.0", "method": "notifications/message"},
            False,
            None,
        ),
        ({"params": BIG, "jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage"}, False, None),
        ({"jsonrpc": "2.0", "id": None, "result": BIG}, True, None),  # an answer to no request
        ({"jsonrpc": "2.0", "id": True, "result": BIG}, True, None),
    ],
)
@pytest.mark.parametrize("indent", [None, 1])
def test_the_request_a_dropped_message_answered(
    message: dict[str, Any], answers: bool, request_id: Any, indent: int | None
) -> None:
    line = json.dumps(message, indent=indent).encode()
    assert len(line) > 2 * EDGE_BYTES  # the middle is never looked at
    assert answer_id(line[:EDGE_BYTES], line[-EDGE_BYTES:]) == request_id
    assert is_answer(line[:EDGE_BYTES]) is answers


def feed_all(events: _Events, data: bytes, step: int) -> list[bytes | str]:
    out: list[bytes | str] = []
    for start in range(0, len(data), step):
        out += ["dropped" if isinstance(e, _Dropped) else e for e in events.feed(data[start : start + step])]
    rest = events.flush()
    return out + ([rest] if rest else [])


@pytest.mark.parametrize("step", [1, 2, 3, 5, 1000])
@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_an_event_stream_is_passed_on_in_whole_events(step: int, end: str) -> None:
    stream = (
        f': ping{end}{end}event: message{end}data: {{"a": 1}}{end}{end}'
        f'data: {"x" * 200}{end}{end}id: 3{end}data: {{"b": 2}}{end}{end}'
    ).encode()
    assert feed_all(_Events(100), stream, step) == [
        b": ping\n\n",
        b'event: message\ndata: {"a": 1}\n\n',
        "dropped",
        b'id: 3\ndata: {"b": 2}\n\n',
    ]


def test_a_dropped_event_shows_the_start_of_its_data() -> None:
    [dropped] = _Events(10).feed(b'event: message\ndata: {"jsonrpc": "2.0", "method": "x"}')
    assert isinstance(dropped, _Dropped) and dropped.data_head.startswith(b'{"jsonrpc"')
    assert is_answer(dropped.data_head) is False

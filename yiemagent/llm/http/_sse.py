"""An incremental server-sent-events parser that accepts bytes split anywhere.

It follows the WHATWG event-stream rules: lines end in CRLF, LF or CR; lines starting with ``:``
are comments; ``data`` lines of one event are joined with ``\\n``; a blank line dispatches the
event; an event without data is not dispatched. Lines are split on bytes and decoded whole, so a
multi-byte UTF-8 character split between two chunks is read correctly. What the data means
(``[DONE]`` for OpenAI, ``message_stop`` for Anthropic) is left to the provider clients.

One deliberate deviation: at the end of the stream, WHATWG discards an event whose blank line
never came; ``finish()`` dispatches it when its lines were complete, because some servers end
the body right after the last ``data:`` line. The clients still require their terminator, so a
truncated stream is reported all the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import attrs

__all__ = ["SSEEvent", "SSEParser", "iter_sse"]

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = "\ufeff"


@attrs.define(frozen=True)
class SSEEvent:
    """One dispatched event: its ``data`` (data lines joined by ``\\n``), ``event`` name and ``id``."""

    data: str
    event: str = "message"
    id: str | None = None


class SSEParser:
    """Turns a byte stream into ``SSEEvent`` objects, one ``feed`` at a time.

    ``feed`` returns the events completed by a chunk; ``finish`` returns what is left at the end of
    the stream. Never raises on malformed input: unknown fields are ignored and invalid UTF-8 is
    replaced. Not thread-safe: one parser belongs to one stream.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of _buffer known to hold no line end
        self._first_line = True
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add ``chunk`` and return every event it completes, in order."""
        self._buffer += chunk
        events: list[SSEEvent] = []
        start = 0
        while True:
            match = _LINE_END.search(self._buffer, max(start, self._scanned))
            if match is None:
                break
            if match.group() == b"\r" and match.end() == len(self._buffer):
                break  # may be the first half of a CRLF split between chunks
            self._line(bytes(self._buffer[start : match.start()]), events)
            start = match.end()
            self._scanned = start
        del self._buffer[:start]
        self._scanned = max(0, len(self._buffer) - 1 if self._buffer.endswith(b"\r") else len(self._buffer))
        return events

    def finish(self) -> list[SSEEvent]:
        """End the stream: a trailing lone CR ends its line; an event whose lines were all complete
        is dispatched even without the final blank line (WHATWG would discard it); an
        unterminated last line is dropped.
        """
        events: list[SSEEvent] = []
        if self._buffer.endswith(b"\r"):
            self._line(bytes(self._buffer[:-1]), events)
        self._buffer.clear()
        self._scanned = 0
        self._line(b"", events)
        return events

    def _line(self, raw: bytes, events: list[SSEEvent]) -> None:
        line = raw.decode("utf-8", "replace")
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return  # comment, e.g. ": keep-alive" or OpenRouter's ": OPENROUTER PROCESSING"
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._last_id = value

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._data:
            events.append(SSEEvent("\n".join(self._data), self._event or "message", self._last_id))
        self._data = []
        self._event = ""


def iter_sse(chunks: Iterable[bytes]) -> Iterator[SSEEvent]:
    """Yield the events of a byte stream given as chunks of any size, as soon as each completes."""
    parser = SSEParser()
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.finish()

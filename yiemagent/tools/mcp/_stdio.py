"""The stdio transport of an MCP connection: the server as a child process in a process group of
its own, spoken to in lines of JSON, each read only up to ``max_result_bytes``, and the whole group
ended when the connection closes.

It follows the SDK's ``stdio_client`` (spawn in a new session, one task per pipe, the spec's
shutdown: stdin closed, a grace period, then SIGTERM and SIGKILL), with two differences. The SDK
joins each line from 64 KiB pieces by copying it again for every piece (a 50 MB line took minutes)
and keeps it whole whatever its size; here a line grows in one buffer up to the limit, and a longer
one is skipped to its end, keeping only its first and last bytes to tell which request it answered
(``mcp_bounds``). And the SDK kills the process group only when the server outlives the grace
period; here the group is always ended, so a process the server started and left behind when it
exited does not outlive the connection (a process that left the group on purpose still does).
On Windows, where the SDK puts the server in a job object, its ``stdio_client`` is used as it is.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

from yiemagent.tools.mcp._bounds import EDGE_BYTES, answer_id, too_large

__all__ = ["stdio_transport"]

logger = logging.getLogger("yiemagent")

_EXIT_WAIT_S = 2.0  # the server's grace period to exit once its stdin is closed (the SDK's)
_TERM_WAIT_S = 2.0  # between SIGTERM and SIGKILL to the group (the SDK's)
_REAP_WAIT_S = 2.0  # for the loop to see a killed server go; only an unkillable one runs it out
_FLUSH_WAIT_S = 0.5  # for messages already accepted to be written before stdin closes
_POLL_S = 0.01  # how often the process's state is looked at while waiting for it to exit

Incoming = SessionMessage | Exception


@asynccontextmanager
async def stdio_transport(
    argv: list[str], *, env: Mapping[str, str] | None, cwd: str | None, errlog: TextIO, limit: int, label: str
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``argv`` and yield the (read, write) streams of its session; on leaving, stop the
    server and every process of its group. ``limit`` bounds each message read; ``label`` names
    the server in warnings."""
    if sys.platform == "win32":  # pragma: no cover - the tests run on POSIX
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(env or {}), cwd=cwd)
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
        return
    process = await anyio.open_process(
        argv, env=get_default_environment() | dict(env or {}), stderr=errlog, cwd=cwd, start_new_session=True
    )
    # No await until the task group is entered: a cancellation there would leak the process.
    to_session, from_server = anyio.create_memory_object_stream[Incoming](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    written = anyio.Event()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read, process, to_session, _Lines(limit, label))
        tasks.start_soon(_write, process, from_session, to_session, written)
        try:
            yield from_server, to_server
        finally:
            # Shielded and bounded: a cancelled caller must neither leak the server nor hang on it.
            with anyio.CancelScope(shield=True):
                from_server.close()  # the reader stops delivering and drains the pipe instead
                to_server.close()
                with anyio.move_on_after(_FLUSH_WAIT_S):
                    await written.wait()
                await stop_process_group(process)
                for stream in (from_server, to_server, to_session, from_session):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


async def _read(process: Process, sink: MemoryObjectSendStream[Incoming], lines: _Lines) -> None:
    """Hand each message the server writes to the session; at the end, drain the pipe."""
    assert process.stdout is not None
    try:
        async with sink:
            async for chunk in process.stdout:
                for item in lines.feed(chunk):
                    await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass  # the session is gone, or the pipe closed under the read: the session sees the end
    finally:
        # A server stuck writing cannot read its closed stdin and exit: read on, discarding.
        with (
            anyio.CancelScope(shield=True),
            contextlib.suppress(
                anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
            ),
        ):
            while True:
                await process.stdout.receive()


async def _write(
    process: Process,
    source: MemoryObjectReceiveStream[SessionMessage],
    session: MemoryObjectSendStream[Incoming],
    written: anyio.Event,
) -> None:
    """Write each message of the session to the server's stdin, one JSON line each."""
    assert process.stdin is not None
    try:
        async with source:
            async for message in source:
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(line.encode())
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: end the session's stream, or a request would wait forever.
        await session.aclose()
    finally:
        written.set()


async def stop_process_group(process: Process) -> None:
    """Close the server's stdin, give it ``_EXIT_WAIT_S`` to exit, then end its process group
    (SIGTERM, and SIGKILL after ``_TERM_WAIT_S``) whether or not it exited by itself; close its
    stdout. Every wait is bounded."""
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    await _exited(process, _EXIT_WAIT_S)
    # The group id is the server's pid (a new session); it stays taken while any member lives,
    # so this reaches the server's children even after the server itself is gone.
    await terminate_posix_process_tree(process, _TERM_WAIT_S)
    if not await _exited(process, _REAP_WAIT_S):
        logger.warning("MCP server process %d is still alive after SIGKILL; leaving it", process.pid)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


async def _exited(process: Process, wait_s: float) -> bool:
    """Whether the process exited within ``wait_s`` seconds (its return code is polled: waiting
    on the process would also wait for its pipes, which a child may hold open)."""
    with anyio.move_on_after(wait_s):
        while process.returncode is None:
            await anyio.sleep(_POLL_S)
    return process.returncode is not None


class _Lines:
    """Splits what the server writes into lines and parses each as a JSON-RPC message.

    A line grows in one buffer (no copy per piece) up to ``limit`` bytes. A longer one is skipped
    to its end, keeping its first and last ``EDGE_BYTES``; when those show it answers a request,
    an error for that request stands in for it, else it is dropped with a warning.
    """

    def __init__(self, limit: int, label: str) -> None:
        self._limit = limit
        self._label = label
        self._line = bytearray()
        self._skipped: int | None = None  # bytes so far of a line over the limit
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[Incoming]:
        """Take the next ``chunk``; return the messages of the lines it completed."""
        out: list[Incoming] = []
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            self._take(chunk[start:newline])
            item = self._end_line()
            if item is not None:
                out.append(item)
            start = newline + 1
        self._take(chunk[start:])
        return out

    def _take(self, piece: bytes) -> None:
        """Add ``piece`` to the line going on, or to the count of one being skipped."""
        if self._skipped is not None:
            self._skipped += len(piece)
            self._tail = (self._tail + piece[-EDGE_BYTES:])[-EDGE_BYTES:]
        elif len(self._line) + len(piece) > self._limit:
            self._head = (bytes(self._line[:EDGE_BYTES]) + piece[:EDGE_BYTES])[:EDGE_BYTES]
            self._tail = (bytes(self._line[-EDGE_BYTES:]) + piece[-EDGE_BYTES:])[-EDGE_BYTES:]
            self._skipped = len(self._line) + len(piece)
            self._line = bytearray()  # give the memory back now, not at the line's end
        else:
            self._line += piece

    def _end_line(self) -> Incoming | None:
        """The message of the line just ended (``None`` for a blank or dropped line)."""
        if self._skipped is not None:
            size, self._skipped = self._skipped, None
            request_id = answer_id(self._head, self._tail)
            self._head = self._tail = b""
            if request_id is not None:
                return SessionMessage(too_large(request_id, self._limit, size))
            logger.warning(
                'MCP server "%s": dropped a message of %d bytes, over max_result_bytes '
                "(%d bytes), that answered no call",
                self._label,
                size,
                self._limit,
            )
            return None
        line, self._line = bytes(self._line), bytearray()
        if not line.strip():
            return None
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:  # pydantic's ValidationError is one
            logger.warning(
                'MCP server "%s" wrote a line that is not a JSON-RPC message: %s',
                self._label,
                str(exc).splitlines()[0],
            )
            return exc

"""Tools from MCP servers (the ``mcp`` extra): connect to a server and register its tools in a store.

``load_mcp_tools(store, server)`` opens an ``McpConnection`` to a Model Context Protocol server
with the official ``mcp`` SDK, over stdio (a command line) or streamable HTTP (a URL), lists the
server's tools and registers each as an ``AgentTool`` whose ``execute`` calls the server. The SDK
is asyncio-based, so each connection runs its session on an event loop in a background thread of
its own and callers stay synchronous. A call can be aborted and has a timeout; progress
notifications become partial results; a server that dies gives error results and is reconnected
on the next call; a server's notice that its tool list changed refreshes the store. Tool names
providers would refuse are mapped to ones they accept (``mcp_names``); each message from the
server is read only up to ``max_result_bytes`` (``mcp_stdio``, ``mcp_http``). The connection's
settings come in one ``McpOptions`` (``mcp_options``). ``close()`` (the connection's, or the
store's) ends it all and leaves no thread or process behind: a stdio server's whole process
group is ended.

Importing this module imports the SDK; ``import yiemagent`` does not.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import json
import logging
import os
import queue
import shlex
import sys
import threading
import time
import urllib.parse
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

try:
    import mcp.types as mcp_types
except ModuleNotFoundError as exc:  # pragma: no cover - the extra is installed for the tests
    raise ImportError("MCP tools need the official MCP SDK: pip install 'yiemagent[mcp]'") from exc
import anyio
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError

from yiemagent.core._content import ContentBlock, ImageContent, TextContent
from yiemagent.core._tools import AbortSignal, AgentTool, AgentToolResult, NeedsApproval, check_needs_approval
from yiemagent.errors import McpToolError, describe_error
from yiemagent.tools._store import ToolStore, register_tool, unregister_tool
from yiemagent.tools.mcp._bounds import RESULT_TOO_LARGE
from yiemagent.tools.mcp._http import SSE_FRAMING_BYTES, bounded_http_client
from yiemagent.tools.mcp._names import check_prefix, tool_name
from yiemagent.tools.mcp._options import McpOptions
from yiemagent.tools.mcp._output import OutputSchemas
from yiemagent.tools.mcp._stdio import stdio_transport

if TYPE_CHECKING:
    from mcp.client import Transport
    from mcp.client.session import IncomingMessage
    from mcp.shared._stream_protocols import ReadStream
    from mcp.shared.message import SessionMessage

__all__ = ["McpConnection", "load_mcp_tools"]

logger = logging.getLogger("yiemagent")

# How long close() waits for a session to end: the SDK's own stdio shutdown waits at most about
# six seconds for a server process (stdin closed, then SIGTERM, then SIGKILL).
_CLOSE_WAIT_S = 15.0
# Beyond a call's own timeout, how long its caller waits for the event loop to report back; only
# a wedged loop ever uses it, and the caller must not hang with it.
_CALLER_GRACE_S = 5.0
_MAX_LIST_PAGES = 100  # a server whose tools/list pages never end must not hang a refresh
# JSON-RPC codes after which the session is not worth keeping: the connection is gone, or the
# server no longer knows the session (a streamable HTTP server that restarted answers 404, which
# the SDK reports as INVALID_REQUEST; the SDK itself never sends a malformed request).
_SESSION_LOST = frozenset({mcp_types.CONNECTION_CLOSED, mcp_types.INVALID_REQUEST})

ToolsChanged = Callable[[list[str]], None]
_NEEDS_APPROVAL: contextvars.ContextVar[NeedsApproval] = contextvars.ContextVar(
    "needs_approval", default=False
)


def load_mcp_tools(
    store: ToolStore,
    server: str | Sequence[str],
    *,
    prefix: str | None = None,
    strict: bool = True,
    name: str | None = None,
    on_tools_changed: ToolsChanged | None = None,
    options: McpOptions | None = None,
    needs_approval: NeedsApproval = False,
) -> McpConnection:
    """Connect to the MCP server ``server``, register its tools in ``store`` and return the open
    connection (a context manager; the store's ``close()`` closes it too).

    ``server`` is a command line (a list of strings, or one string split like a shell would) run
    as a child process spoken to over stdio, or an ``http://``/``https://`` URL of a streamable
    HTTP endpoint. ``options`` (an ``McpOptions``) holds the connection settings: timeouts, the
    size limit, ``env``/``cwd``/``errlog`` of a command, ``headers`` of a URL, ...; see
    ``McpConnection`` for the rest. ``needs_approval`` (``True`` or ``fn(args, context) ->
    bool``) is given to every tool of the server: its calls wait for a decision. Raises
    ``McpToolError`` when the server cannot be reached or listed within ``connect_timeout_s``,
    or (with ``strict``) when a tool cannot be registered; nothing is left registered or
    running then.
    """
    check_needs_approval(None, None, needs_approval)
    token = _NEEDS_APPROVAL.set(needs_approval)
    try:
        return McpConnection(
            store,
            server,
            prefix=prefix,
            strict=strict,
            name=name,
            on_tools_changed=on_tools_changed,
            options=options,
        )
    finally:
        _NEEDS_APPROVAL.reset(token)


class _Session:
    """One live SDK client on the connection's loop, with the task that owns it.

    The owner task enters and leaves the client (anyio's structured concurrency wants both in one
    task). ``stop`` ends it gracefully; ``scope`` abandons it at once. Touched on the loop only.
    """

    def __init__(self) -> None:
        self.client: Client | None = None
        self.ready = anyio.Event()
        self.error: BaseException | None = None
        self.stop = anyio.Event()
        self.scope = anyio.CancelScope()
        self.ended = False
        self.done = anyio.Event()
        self.owner: asyncio.Task[None] | None = None  # referenced, or asyncio may collect it

    def end(self) -> None:
        """Mark the session unusable and ask its owner to close it."""
        self.ended = True
        self.stop.set()


class _EndWatch:
    """The transport's read stream, passed through, marking the session ended at end of stream.

    The SDK fails the requests in flight when the stream ends (a stdio server exited, an HTTP
    transport broke) but keeps the dead session; watching the stream lets the next call
    reconnect instead of failing too.
    """

    def __init__(self, inner: ReadStream[SessionMessage | Exception], session: _Session) -> None:
        self._inner = inner
        self._session = session

    def __getattr__(self, name: str) -> Any:  # e.g. ``last_context`` of the HTTP transport's stream
        return getattr(self._inner, name)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._session.end()
            raise

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _EndWatch:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Call:
    """One ``tools/call`` in flight: its cancel scope (set on the loop) and whether it was cancelled."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.cancelled = False

    def cancel(self) -> None:
        """Cancel the call (on the loop thread); one not started yet never starts."""
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()


class _SessionRefused(Exception):
    """Internal: the server refused a request for its session (JSON-RPC ``INVALID_REQUEST``)."""


def _root_cause(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups, the one worth showing."""
    # Duck-typed: ``BaseExceptionGroup`` is a builtin only from Python 3.11.
    inner = getattr(exc, "exceptions", None)
    while isinstance(inner, (list, tuple)) and inner and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def _options(options: Any) -> McpOptions:
    """``options`` when it is an ``McpOptions``, the defaults for ``None``; ``TypeError`` saying
    what to pass for anything else (a dict of settings, say)."""
    if options is None:
        return McpOptions()
    if not isinstance(options, McpOptions):
        raise TypeError(
            f"options must be an McpOptions (from yiemagent.tools.mcp), got "
            f"{type(options).__name__}; e.g. options=McpOptions(timeout_s=30)"
        )
    return options


def _command(server: str | Sequence[str]) -> list[str]:
    argv = shlex.split(server) if isinstance(server, str) else list(server)
    if not argv or not all(isinstance(a, str) for a in argv) or not argv[0]:
        raise ValueError(
            f"an MCP server is a command line (a non-empty list of strings) or an "
            f"http(s):// URL, got {server!r}"
        )
    return argv


def _label_for(server: str | Sequence[str]) -> str:
    """A short name for logs and errors: the URL without credentials or query, or the command."""
    if isinstance(server, str) and server.startswith(("http://", "https://")):
        parts = urllib.parse.urlsplit(server)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"
    argv = _command(server)
    text = " ".join([os.path.basename(argv[0]), *argv[1:]])
    return text if len(text) <= 60 else text[:57] + "..."


class McpConnection:
    """A connection to one MCP server whose tools are registered in a ``ToolStore``.

    Made by ``load_mcp_tools``. Each server tool becomes an ``AgentTool`` named ``prefix + name``
    (``prefix``, at most 32 of ``A-Za-z0-9_-``, is prepended as given, e.g. ``"time_"``) when that
    is a name providers accept (``^[a-zA-Z0-9_-]{1,64}$``), else a mapped one (see
    ``mcp_names.tool_name``; ``server_names`` maps each registered name back, and calls reach the
    server's tool under its own name); labelled with its title, described by its description and
    validated against its input schema by the tool pipeline. A name the store already uses for
    another tool is a problem: with ``strict`` the load fails naming it, else it is logged and
    skipped (as on every later refresh). ``name`` names the server in errors and logs.
    ``on_tools_changed(names)`` is called, on the connection's thread, after a refresh changed the
    store's tools, with the names registered now. ``options`` (an ``McpOptions``; its defaults
    when ``None``) holds the rest: the timeouts of a call (``timeout_s``) and of a connect
    (``connect_timeout_s``), ``max_result_bytes`` (a larger answer is dropped unread and its call
    raises ``McpToolError`` saying so, the tool's error result), ``parallel``, the protocol
    ``mode``, and how to start a command (``env``, ``cwd``, ``errlog``) or what to send a URL
    (``headers``); a setting that does not fit the server (``headers`` for a command, ``env``
    for a URL) raises ``ValueError``.

    ``tool_names`` lists the registered names, ``refresh()`` lists the tools again now, ``close()``
    (or leaving a ``with`` block, or closing the store) removes the tools from the store and ends
    the session, the server process and the thread. Thread-safe.
    """

    def __init__(
        self,
        store: ToolStore,
        server: str | Sequence[str],
        *,
        prefix: str | None = None,
        strict: bool = True,
        name: str | None = None,
        on_tools_changed: ToolsChanged | None = None,
        options: McpOptions | None = None,
    ) -> None:
        if not isinstance(store, ToolStore):
            raise TypeError(f"load_mcp_tools expects a ToolStore, got {type(store).__name__}")
        options = _options(options)
        self.options = options
        # Given to load_mcp_tools, not to this constructor: its keywords stay those of the
        # options object's callers (tests/test_public_api.py).
        self.needs_approval: NeedsApproval = _NEEDS_APPROVAL.get()
        self.max_result_bytes = options.max_result_bytes
        self.prefix = check_prefix(prefix)
        self._url = server if isinstance(server, str) and server.startswith(("http://", "https://")) else None
        self._argv = None if self._url is not None else _command(server)
        if self._url is None and options.headers is not None:
            raise ValueError("headers apply to an http(s):// server, not to a command")
        if self._url is not None and (
            options.env is not None or options.cwd is not None or options.errlog is not None
        ):
            raise ValueError("env, cwd and errlog apply to a command, not to an http(s):// server")
        self.store = store
        self.name = name or _label_for(server)
        self.timeout_s = options.timeout_s
        self.connect_timeout_s = options.connect_timeout_s
        self._devnull: TextIO | None = None
        self._errlog = options.errlog  # the default is opened on first connect
        self._on_tools_changed = on_tools_changed
        # What this connection registered: our name -> (tool, the server definition it came from).
        self._tools: dict[str, tuple[AgentTool, str]] = {}
        self._server_names: dict[str, str] = {}  # our name -> the server's name for that tool
        self._output_schemas = OutputSchemas()  # checked with RE2, never with the SDK's re
        self._closed = False
        self._close_lock = threading.Lock()
        self._waiting: set[concurrent.futures.Future[Any]] = set()  # callers' futures, for close()
        self._waiting_lock = threading.Lock()
        # Loop-only state.
        self._session: _Session | None = None
        self._sessions: set[_Session] = set()  # every session whose owner has not finished
        self._connect_lock: asyncio.Lock | None = None
        self._calls: set[_Call] = set()
        self._refresh_wanted = False
        self._refresher: asyncio.Task[None] | None = None
        self._listing_problems: list[str] = []
        self._loaded = False

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run_loop, daemon=True, name=f"yiemagent-mcp {self.name}"[:60]
        )
        self._thread.start()
        _OPEN.add(self)
        self._unhook = store.add_closer(self.close)
        try:
            problems = self._run(self._first_load(), self.connect_timeout_s * 2 + _CALLER_GRACE_S)
            if problems and strict:
                raise McpToolError(
                    f'MCP server "{self.name}": {len(problems)} tool(s) could not be registered:\n'
                    + "\n".join(f"  - {p}" for p in problems)
                    + (
                        "\nPass prefix=... to load_mcp_tools to keep the names apart."
                        if any("already has a tool" in p for p in problems)
                        else ""
                    )
                )
        except BaseException:
            self.close()
            raise

    # -- public API ------------------------------------------------------------------------------

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools this connection has registered in the store, in server order."""
        with self.store.lock:
            return list(self._tools)

    @property
    def server_names(self) -> dict[str, str]:
        """For each registered name, the server's own name of that tool (the same name unless it
        was mapped to one providers accept)."""
        with self.store.lock:
            return {name: self._server_names[name] for name in self._tools}

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def refresh(self) -> list[str]:
        """List the server's tools now (connecting first if needed), bring the store in line and
        return the registered names. Raises ``McpToolError`` when the server cannot be listed."""
        self._check_open()
        self._run(self._refresh_now(), self.connect_timeout_s * 2 + _CALLER_GRACE_S)
        return self.tool_names

    def close(self) -> None:
        """Remove this connection's tools from the store (those still its own), end the calls in
        flight (they get error results), close the session (a stdio server process is stopped)
        and end the thread. Idempotent; never raises; waits at most about 20 seconds."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._unhook()
        _OPEN.discard(self)
        with self.store.lock:
            for tool_name, (tool, _definition) in self._tools.items():
                unregister_tool(self.store, tool_name, tool)
            self._tools.clear()
            self._server_names.clear()
        if threading.current_thread() is self._thread:
            # Called from on_tools_changed: the loop cannot wait for itself; it ends afterwards.
            self._loop.create_task(self._shutdown()).add_done_callback(lambda _t: self._loop.stop())
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(_CLOSE_WAIT_S + 5)
        except BaseException as exc:
            logger.warning(
                'MCP server "%s": closing did not finish cleanly: %s', self.name, describe_error(exc)
            )
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_CLOSE_WAIT_S)
        with self._waiting_lock:
            waiting = list(self._waiting)
        for future in waiting:  # a caller still waiting on a call the loop never finished
            future.cancel()
        if self._devnull is not None:
            self._devnull.close()

    def __enter__(self) -> McpConnection:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"McpConnection({self.name!r}, {state}, tools={self.tool_names})"

    def _run_loop(self) -> None:
        """The thread: run the loop until ``close()`` stops it, then close it."""
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def _default_errlog(self) -> TextIO:
        """``sys.stderr`` when the child process can write to it, else the process's own stderr
        (pytest's ``capsys`` and notebooks replace ``sys.stderr`` with objects that have no file
        descriptor), else the null device."""
        for stream in (sys.stderr, sys.__stderr__):
            try:
                if stream is not None:
                    stream.fileno()
                    return stream
            except (AttributeError, OSError, ValueError):
                continue
        self._devnull = open(os.devnull, "w")  # noqa: SIM115 - closed by close()
        return self._devnull

    # -- calling a tool (caller's thread) --------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise McpToolError(f'the connection to MCP server "{self.name}" is closed')
        if threading.current_thread() is self._thread:
            raise McpToolError(
                "an MCP tool cannot be called from its connection's own thread (an on_tools_changed callback)"
            )

    def _submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        """Schedule ``coro`` on the loop; raise ``McpToolError`` when the loop is gone."""
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the loop was closed by close() on another thread
            coro.close()
            raise McpToolError(f'the connection to MCP server "{self.name}" is closed') from None

    def _run(self, coro: Any, wait_s: float) -> Any:
        """Run ``coro`` on the loop and return its value, waiting at most ``wait_s`` seconds."""
        future = self._submit(coro)
        try:
            return future.result(wait_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpToolError(f'MCP server "{self.name}" did not answer within {wait_s:g} s') from None
        except concurrent.futures.CancelledError:
            raise McpToolError(f'the connection to MCP server "{self.name}" was closed') from None

    def _execute(
        self,
        tool_name: str,
        args: dict[str, Any],
        signal: AbortSignal | None,
        on_partial_result: Callable[[Any], None] | None,
    ) -> AgentToolResult:
        """Call the server's tool ``tool_name`` and wait for its result on this thread, forwarding
        progress to ``on_partial_result``; an abort of ``signal`` cancels the call in flight.
        Raises ``McpToolError`` for an error result, a timeout, an abort or a lost server."""
        self._check_open()
        inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        call = _Call()

        async def progress(value: float, total: float | None, message: str | None) -> None:
            inbox.put(("progress", (value, total, message)))

        future = self._submit(self._call(tool_name, args, progress, call))
        with self._waiting_lock:
            self._waiting.add(future)
        if self._closed:  # close() may have run between the check above and the submission
            future.cancel()
        future.add_done_callback(lambda _f: inbox.put(("done", None)))

        def abort() -> None:
            inbox.put(("abort", None))
            self._cancel_soon(call)

        unregister = signal.on_abort(abort) if signal is not None else None
        limit = (
            None if self.timeout_s is None else (self.timeout_s + self.connect_timeout_s + _CALLER_GRACE_S)
        )
        deadline = None if limit is None else time.monotonic() + limit
        try:
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    kind, value = inbox.get(timeout=wait)
                except queue.Empty:
                    self._cancel_soon(call)
                    raise McpToolError(
                        f'MCP server "{self.name}" did not answer the call to '
                        f'"{tool_name}" within {limit:g} s'
                    ) from None
                if kind == "done":
                    break
                if kind == "abort":
                    raise McpToolError(f'the call to MCP tool "{tool_name}" was aborted')
                self._report(on_partial_result, *value)
        finally:
            if unregister is not None:
                unregister()
            with self._waiting_lock:
                self._waiting.discard(future)
        try:
            result: mcp_types.CallToolResult = future.result()
        except concurrent.futures.CancelledError:
            raise McpToolError(
                f'the connection to MCP server "{self.name}" was closed during the call to "{tool_name}"'
            ) from None
        return self._to_result(tool_name, result)

    def _cancel_soon(self, call: _Call) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the call ended with it
            self._loop.call_soon_threadsafe(call.cancel)

    def _report(
        self,
        on_partial_result: Callable[[Any], None] | None,
        value: float,
        total: float | None,
        message: str | None,
    ) -> None:
        """Hand one progress notification to ``on_partial_result`` as an ``AgentToolResult``."""
        if on_partial_result is None:
            return
        amount = f"{value:g}/{total:g}" if total is not None else f"{value:g}"
        text = f"progress {amount}" + (f": {message}" if message else "")
        partial = AgentToolResult(
            [TextContent(text)], {"progress": value, "total": total, "message": message}
        )
        try:
            on_partial_result(partial)
        except Exception:  # a broken listener must not abandon a call in flight
            logger.exception('on_partial_result raised for MCP server "%s"', self.name)

    def _to_result(self, tool_name: str, result: mcp_types.CallToolResult) -> AgentToolResult:
        """Turn the server's result into an ``AgentToolResult``; raise for an ``isError`` one."""
        blocks = _content_blocks(result)
        if result.is_error:
            text = "\n".join(b.text for b in blocks if isinstance(b, TextContent))
            raise McpToolError(text or f'MCP tool "{tool_name}" reported an error without a message')
        details: dict[str, Any] = {"mcp_server": self.name, "mcp_tool": tool_name}
        if result.structured_content is not None:
            details["structured_content"] = result.structured_content
        return AgentToolResult(blocks, details)

    # -- on the loop ------------------------------------------------------------------------------

    async def _call(
        self, tool_name: str, args: dict[str, Any], progress: Any, call: _Call
    ) -> mcp_types.CallToolResult:
        """Call ``tool_name`` over the live session (connecting first when there is none)."""
        self._calls.add(call)
        try:
            with anyio.CancelScope() as scope:
                call.scope = scope
                if call.cancelled:
                    scope.cancel()
                session = await self._live()
                try:
                    return await self._call_on(session, tool_name, args, progress, may_retry=True)
                except _SessionRefused:
                    # An HTTP server that restarted no longer knows the session and refused the
                    # request before running anything: the same call on a new session is safe.
                    self._discard(session)
                    return await self._call_on(await self._live(), tool_name, args, progress, may_retry=False)
            if self._closed:
                raise McpToolError(
                    f'the connection to MCP server "{self.name}" was closed during the call to "{tool_name}"'
                )
            raise McpToolError(f'the call to MCP tool "{tool_name}" was aborted')
        finally:
            self._calls.discard(call)

    async def _call_on(
        self, session: _Session, tool_name: str, args: dict[str, Any], progress: Any, *, may_retry: bool
    ) -> mcp_types.CallToolResult:
        """One ``tools/call`` over ``session``, its failures turned into ``McpToolError``s (or
        ``_SessionRefused``, when ``may_retry`` and the server refused the session itself)."""
        client = session.client
        assert client is not None
        try:
            with anyio.fail_after(self.timeout_s):
                return await client.call_tool(tool_name, args, progress_callback=progress)
        except TimeoutError:
            raise McpToolError(f'MCP tool "{tool_name}" timed out after {self.timeout_s:g} s') from None
        except MCPError as exc:
            if exc.code == RESULT_TOO_LARGE:  # our transport's stand-in for an answer over the limit
                raise McpToolError(f'MCP tool "{tool_name}": {exc.message}') from None
            if may_retry and self._url is not None and exc.code == mcp_types.INVALID_REQUEST:
                raise _SessionRefused from None
            if exc.code in _SESSION_LOST or session.ended:
                self._discard(session)
                raise McpToolError(
                    f'MCP server "{self.name}" was lost during the call to '
                    f'"{tool_name}" ({exc}); the next call reconnects'
                ) from None
            raise McpToolError(
                f'MCP server "{self.name}" refused the call to "{tool_name}": {exc} (error {exc.code})'
            ) from None
        except Exception as exc:
            raise McpToolError(
                f'the call to MCP tool "{tool_name}" failed: {describe_error(_root_cause(exc))}'
            ) from exc

    async def _live(self) -> _Session:
        """Return the live session; connect (and list the tools again) when there is none."""
        if self._closed:
            raise McpToolError(f'the connection to MCP server "{self.name}" is closed')
        session = self._session
        if session is not None and not session.ended:
            return session
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            session = self._session
            if session is not None and not session.ended:
                return session
            session = await self._connect()
            try:
                with anyio.fail_after(self.connect_timeout_s):
                    self._listing_problems = await self._sync_tools(session)
            except BaseException as exc:
                self._discard(session)
                if isinstance(exc, TimeoutError):
                    raise McpToolError(
                        f'MCP server "{self.name}" did not list its tools within {self.connect_timeout_s:g} s'
                    ) from None
                if isinstance(exc, Exception) and not isinstance(exc, McpToolError):
                    raise McpToolError(
                        f'MCP server "{self.name}" could not list its tools: '
                        f"{describe_error(_root_cause(exc))}"
                    ) from exc
                raise
            self._session = session
            return session

    async def _connect(self) -> _Session:
        """Start an owner task for a new session and wait until it is ready or failed."""
        session = _Session()
        self._sessions.add(session)
        session.owner = self._loop.create_task(self._own(session))
        try:
            with anyio.fail_after(self.connect_timeout_s):
                await session.ready.wait()
        except BaseException as exc:
            session.scope.cancel()  # abandon the half-open session (timeout, or the call was aborted)
            if isinstance(exc, TimeoutError):
                raise McpToolError(
                    f'could not connect to MCP server "{self.name}" within {self.connect_timeout_s:g} s'
                ) from None
            raise
        if session.error is not None:
            raise McpToolError(
                f'could not connect to MCP server "{self.name}": {describe_error(_root_cause(session.error))}'
            ) from session.error
        return session

    async def _own(self, session: _Session) -> None:
        """Enter the SDK client, keep it open until the session is stopped, then leave it."""
        try:
            with session.scope:
                client = Client(
                    self._transport(session), message_handler=self._handle, mode=self.options.mode
                )
                async with client:
                    self._output_schemas.install(client.session)
                    session.client = client
                    async with anyio.create_task_group() as tasks:
                        capabilities = client.server_capabilities
                        if capabilities.tools is not None and capabilities.tools.list_changed:
                            tasks.start_soon(self._listen, client)
                        session.ready.set()
                        await session.stop.wait()
                        tasks.cancel_scope.cancel()
        except Exception as exc:
            if session.ready.is_set():
                logger.warning(
                    'MCP server "%s": the connection ended: %s', self.name, describe_error(_root_cause(exc))
                )
            else:
                session.error = exc
        finally:
            session.ended = True
            if session.error is None and not session.ready.is_set():
                session.error = McpToolError("the connection ended before it was ready")
            session.ready.set()
            session.done.set()
            self._sessions.discard(session)
            if self._session is session:
                self._session = None

    def _transport(self, session: _Session) -> Transport:
        """The SDK transport for this server, its read stream watched for the end."""

        @asynccontextmanager
        async def transport() -> AsyncIterator[tuple[Any, Any]]:
            if self._url is not None:
                async with self._http_streams(self._url) as (read, write):
                    yield _EndWatch(read, session), write
            else:
                assert self._argv is not None
                if self._errlog is None:
                    self._errlog = self._default_errlog()
                async with stdio_transport(
                    self._argv,
                    env=None if self.options.env is None else dict(self.options.env),
                    cwd=self.options.cwd,
                    errlog=self._errlog,
                    limit=self.max_result_bytes,
                    label=self.name,
                ) as (read, write):
                    yield _EndWatch(read, session), write

        return transport()

    @asynccontextmanager
    async def _http_streams(self, url: str) -> AsyncIterator[tuple[Any, Any]]:
        # The SDK's own client (its timeouts: long reads for streams), reading each message only
        # up to the limit; the SDK's own bound on events is set past ours, so ours speaks first.
        limit = self.max_result_bytes
        async with (
            bounded_http_client(self.options.headers, limit, self.name) as http,
            streamable_http_client(
                url, http_client=http, max_sse_event_size=limit + 2 * SSE_FRAMING_BYTES
            ) as streams,
        ):
            yield streams

    async def _handle(self, message: IncomingMessage) -> None:
        """The SDK's message handler: a tool-list change refreshes the store."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._want_refresh()
        elif isinstance(message, Exception):
            logger.debug('MCP server "%s": transport reported %s', self.name, describe_error(message))

    async def _listen(self, client: Client) -> None:
        """Subscribe to tool-list changes where the protocol asks for it (2026-07-28 and later);
        older sessions get them as notifications without asking."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._want_refresh()
        except ListenNotSupportedError:
            return
        except Exception as exc:
            logger.debug(
                'MCP server "%s": no tool-list subscription: %s', self.name, describe_error(_root_cause(exc))
            )

    def _want_refresh(self) -> None:
        """Refresh the tools soon; notices that arrive during a refresh cause one more, not one each."""
        self._refresh_wanted = True
        if self._refresher is None or self._refresher.done():
            self._refresher = self._loop.create_task(self._refresh_loop())

    async def _refresh_loop(self) -> None:
        while self._refresh_wanted and not self._closed:
            self._refresh_wanted = False
            session = self._session
            if session is None or session.ended:
                return  # the next connect lists the tools anyway
            try:
                with anyio.fail_after(self.connect_timeout_s):
                    await self._sync_tools(session)
            except Exception as exc:
                logger.warning(
                    'MCP server "%s": listing its changed tools failed: %s',
                    self.name,
                    describe_error(_root_cause(exc)),
                )

    async def _refresh_now(self) -> None:
        session = await self._live()
        with anyio.fail_after(self.connect_timeout_s):
            await self._sync_tools(session)

    async def _first_load(self) -> list[str]:
        await self._live()
        self._loaded = True  # from now on, a listing that changes the store is news to report
        return self._listing_problems

    async def _sync_tools(self, session: _Session) -> list[str]:
        """List every tool of the server and bring the store in line; return the problems."""
        client = session.client
        assert client is not None
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _page in range(_MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._output_schemas.absorb(listed)
        changed, problems = self._apply(listed)
        for problem in problems:
            logger.warning('MCP server "%s": %s', self.name, problem)
        if changed and self._loaded and self._on_tools_changed is not None:
            try:
                self._on_tools_changed(self.tool_names)
            except Exception:
                logger.exception('on_tools_changed raised for MCP server "%s"', self.name)
        return problems

    def _apply(self, listed: list[mcp_types.Tool]) -> tuple[bool, list[str]]:
        """Register the listed tools, replace changed ones, remove those no longer listed; leave
        every tool this connection did not register alone. Returns (changed, problems)."""
        wanted, problems = self._wanted(listed)
        changed = False
        store = self.store
        with store.lock:
            if self._closed:
                return False, []
            for tool_name, (mine, _definition) in list(self._tools.items()):
                if tool_name not in wanted or store.tools.get(tool_name) is not mine:
                    unregister_tool(store, tool_name, mine)
                    del self._tools[tool_name]
                    del self._server_names[tool_name]
                    changed = True
            for tool_name, tool in wanted.items():
                definition = tool.model_dump_json(by_alias=True)
                mine_entry = self._tools.get(tool_name)
                if mine_entry is not None and mine_entry[1] == definition:
                    continue
                if mine_entry is None and tool_name in store.tools:
                    problems.append(f'"{tool_name}": the store already has a tool of that name')
                    continue
                try:
                    agent_tool = self._agent_tool(tool_name, tool)
                except ValueError as exc:
                    problems.append(f'"{tool_name}": {exc}')
                    continue
                register_tool(store, agent_tool)
                self._tools[tool_name] = (agent_tool, definition)
                self._server_names[tool_name] = tool.name
                changed = True
        return changed, problems

    def _wanted(self, listed: list[mcp_types.Tool]) -> tuple[dict[str, mcp_types.Tool], list[str]]:
        """The listed tools by the name each is to be registered under (``tool_name``), and the
        problems: when two tools get one name, the one whose name was not mapped keeps it, else
        the one whose server name sorts first, whatever the server's order; the other is not
        registered. A name listed twice counts once."""
        candidates: dict[str, list[mcp_types.Tool]] = {}
        for tool in listed:
            same = candidates.setdefault(tool_name(self.prefix, tool.name), [])
            if all(other.name != tool.name for other in same):
                same.append(tool)
        wanted: dict[str, mcp_types.Tool] = {}
        problems: list[str] = []
        for name, tools in candidates.items():
            keeper, *others = sorted(tools, key=lambda t: (self.prefix + t.name != name, t.name))
            wanted[name] = keeper
            problems.extend(
                f'"{name}": the server\'s tools {keeper.name!r} and {other.name!r} both '
                f"map to this name; {keeper.name!r} keeps it and {other.name!r} is not "
                "registered"
                for other in others
            )
        return wanted, problems

    def _agent_tool(self, tool_name: str, tool: mcp_types.Tool) -> AgentTool:
        server_name = tool.name
        title = tool.title or (tool.annotations.title if tool.annotations is not None else None)

        def execute(
            _tool_call_id: str,
            args: dict[str, Any],
            signal: AbortSignal | None,
            on_partial_result: Callable[[Any], None] | None,
        ) -> AgentToolResult:
            return self._execute(server_name, args, signal, on_partial_result)

        return AgentTool(
            name=tool_name,
            label=title or tool.name,
            description=tool.description or "",
            input_schema=dict(tool.input_schema),
            execute=execute,
            parallel_tool_execute=self.options.parallel,
            untrusted_schema=True,  # the server chose the schema: no pattern RE2 cannot bound
            needs_approval=self.needs_approval,
        )

    def _discard(self, session: _Session) -> None:
        """Forget ``session`` (the next call reconnects) and have its owner close it."""
        if self._session is session:
            self._session = None
        session.end()

    async def _shutdown(self) -> None:
        """End the calls in flight, the refresher and the session, then the loop's helpers."""
        for call in list(self._calls):
            call.cancel()
        if self._refresher is not None:
            self._refresher.cancel()
        self._session = None
        # The live session, and any abandoned one still stopping its server: each owner must
        # finish its (bounded) shutdown, or a server process would outlive the connection.
        sessions = list(self._sessions)
        for session in sessions:
            session.end()
        with anyio.move_on_after(_CLOSE_WAIT_S):
            for session in sessions:
                await session.done.wait()
        for session in sessions:
            if not session.done.is_set():
                session.scope.cancel()
                with anyio.move_on_after(5):
                    await session.done.wait()
        # What is left (the tasks of the calls cancelled above) ends with the loop: cancel it and
        # give it a moment to unwind.
        current = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        for task in others:
            task.cancel()
        if others:
            await asyncio.wait(others, timeout=5)
        await self._loop.shutdown_asyncgens()
        await self._loop.shutdown_default_executor()


def _content_blocks(result: mcp_types.CallToolResult) -> list[ContentBlock]:
    """The result's content as the library's blocks: text and images as they are, audio, resource
    links and embedded resources as text (or an image), structured content as JSON text when
    there is nothing else."""
    blocks: list[ContentBlock] = []
    for item in result.content:
        if isinstance(item, mcp_types.TextContent):
            blocks.append(TextContent(item.text))
        elif isinstance(item, mcp_types.ImageContent):
            blocks.append(ImageContent(item.data, item.mime_type))
        elif isinstance(item, mcp_types.AudioContent):
            blocks.append(
                TextContent(f"[audio ({item.mime_type}) left out: only text and images are passed on]")
            )
        elif isinstance(item, mcp_types.ResourceLink):
            about = f": {item.description}" if item.description else ""
            blocks.append(TextContent(f"[resource {item.name} at {item.uri}{about}]"))
        elif isinstance(item, mcp_types.EmbeddedResource):
            blocks.append(_resource_block(item.resource))
    if not blocks and result.structured_content is not None:
        blocks.append(TextContent(json.dumps(result.structured_content, ensure_ascii=False)))
    return blocks


def _resource_block(
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents,
) -> ContentBlock:
    if isinstance(resource, mcp_types.TextResourceContents):
        return TextContent(f"[resource {resource.uri}]\n{resource.text}")
    mime = resource.mime_type or "application/octet-stream"
    if mime.startswith("image/"):
        return ImageContent(resource.blob, mime)
    return TextContent(f"[resource {resource.uri} ({mime}) left out: binary content]")


# Connections still open when the interpreter exits are closed first, so their server processes
# are stopped rather than orphaned (their threads are daemons: they do not hold the exit up).
_OPEN: weakref.WeakSet[McpConnection] = weakref.WeakSet()


def _close_all() -> None:
    for connection in list(_OPEN):
        connection.close()


atexit.register(_close_all)

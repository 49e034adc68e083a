"""An MCP server for the tests, written with the SDK's own ``MCPServer`` (``FastMCP`` in SDK 1.x)
and served over streamable HTTP on loopback.

Run as ``python tests/mcp_http_server.py PORT`` (``0`` picks a free port). The listening socket
is bound before anything else happens and its port is printed as the first line of stdout, so a
test can connect as soon as it has read that line: connections wait in the socket's backlog
until uvicorn accepts them. ``SO_REUSEADDR`` lets a restarted server take the port of a killed
one.

Tools: ``echo``, ``progress`` (reports each step), ``fail`` (an ``isError`` result), ``picture``
(an image and a text), ``slow`` (reports that it started, then waits until cancelled),
``slow_state`` (how many ``slow`` calls were cancelled), ``add_tool`` and ``remove_tool``
(change the tool list and tell the clients so), ``big`` (a text of any size, sent as one JSON
body or, when it reports progress first, as an event stream) and ``noisy`` (a progress message of
any size, then a short answer).
"""

from __future__ import annotations

import base64
import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

# A 1x1 transparent PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)

server: MCPServer = MCPServer("yiem-test", log_level="WARNING")
state = {"slow_started": 0, "slow_cancelled": 0}
waiters: list[anyio.Event] = []  # set when ``state`` changes, to wake ``slow_state``


def _announce() -> None:
    for event in waiters:
        event.set()
    waiters.clear()


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report progress once per step, then say how many steps ran."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"{steps} steps done"


@server.tool()
def fail(reason: str) -> str:
    """Fail with the reason given (an isError result)."""
    raise ToolError(reason)


@server.tool(structured_output=False)
def picture() -> list[object]:
    """Return a tiny PNG and a caption."""
    return [Image(data=PIXEL, format="png"), "a transparent pixel"]


@server.tool()
async def noisy(mb: int, ctx: Context) -> str:
    """Report progress with a message of ``mb`` MiB (a notification, which answers nothing),
    then answer."""
    await ctx.report_progress(0, 1, "x" * (mb * 2**20))
    return "after the noise"


@server.tool(structured_output=False)
async def big(mb: int, ctx: Context, stream: bool = False) -> str:
    """Return a text of ``mb`` MiB; with ``stream``, report progress first, which makes the answer
    an event stream (under the 2026-07-28 protocol an answer without notifications is one JSON
    body; under the initialize handshake every answer is an event stream)."""
    if stream:
        await ctx.report_progress(0, 1, "making it")
    return "x" * (mb * 2**20)


@server.tool()
async def slow(ctx: Context) -> str:
    """Report that it started, then wait until the call is cancelled."""
    state["slow_started"] += 1
    await ctx.report_progress(0, None, "started")
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        state["slow_cancelled"] += 1
        _announce()
        raise
    return "never"  # pragma: no cover


@server.tool()
async def slow_state(cancelled: int = 0) -> dict[str, int]:
    """How many slow calls started and how many were cancelled, once ``cancelled`` of them were
    (waiting at most ten seconds: the cancellation of a call reaches the server after the
    client moved on)."""
    with anyio.move_on_after(10):
        while state["slow_cancelled"] < cancelled:
            event = anyio.Event()
            waiters.append(event)
            await event.wait()
    return dict(state)


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool named ``name`` that doubles a number, and announce the change."""

    def double(x: int) -> int:
        return 2 * x

    server.add_tool(double, name=name, description="Double a number.")
    await ctx.notify_tools_changed()  # subscriptions/listen clients (2026-07-28)
    await ctx.session.send_tool_list_changed()  # clients of the initialize handshake
    return f"added {name}"


@server.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Remove the tool named ``name`` and announce the change."""
    server.remove_tool(name)
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return f"removed {name}"


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()

"""An MCP server for the tests of the edges, written with the SDK's own ``MCPServer`` and served
over stdio: tools whose names providers refuse, names and descriptions carrying terminal escape
sequences, a result of any size, and a process of its own left behind.

Run as ``python tests/mcp_edge_server.py [--child PIDFILE] [--clash] [--clash-first]``.

Tools: one per name in ``ODD_NAMES`` (each answers ``called <its own name>``, so a test can tell
which tool a call reached; the one named with an escape sequence also answers with escape
sequences), ``echo``, ``big`` (a text of ``mb`` MiB) and ``noisy`` (reports ``mb`` MiB of progress first).
``--clash`` adds a tool whose plain name is the mapped name of ``"a b"`` (listed after the
others, or first with ``--clash-first``).
``--child PIDFILE`` starts a child process before serving (it inherits the server's pipes, as a
helper process does) and writes its pid to ``PIDFILE``.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

ESCAPES = "\x1b[31m\x1b]0;owned\x07\x1b[2J\x9b1m"  # colour, window title, clear screen, 8-bit CSI
ODD_NAMES = [
    "get time",  # a space
    "files/read",  # a slash
    "wetter_münchen",  # non-ASCII
    "x" * 300,  # 300 characters
    "bell\x07and\x01nul",  # control characters
    f"{ESCAPES}red",  # escape sequences
    "a b",  # these two read the same once mapped: a_b
    "a/b",
]
CLASH = "a_b_c8687a08"  # what "a b" maps to (see yiemagent.tools.mcp._names.tool_name)
DESCRIPTION = f"Says which tool was called.{ESCAPES} Harmless\ttext\r\nover two lines."

# The server warns about each name that breaks SEP-986; those names are the point here.
logging.getLogger("mcp.shared.tool_name_validation").setLevel(logging.ERROR)
server: MCPServer = MCPServer("yiem-edges", log_level="ERROR")


def _answer(name: str) -> Callable[[], str]:
    def answer() -> str:
        return f"called {name}" + (f" {ESCAPES}done" if ESCAPES in name else "")

    return answer


def _add_odd_tools(clash: bool, clash_first: bool) -> None:
    names = [*ODD_NAMES]
    if clash:
        names.insert(0 if clash_first else len(names), CLASH)
    for name in names:
        server.add_tool(_answer(name), name=name, title=f"{ESCAPES}Title", description=DESCRIPTION)


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def noisy(mb: int, ctx: Context) -> str:
    """Report progress with a message of ``mb`` MiB (a notification, which answers nothing),
    then answer."""
    await ctx.report_progress(0, 1, "x" * (mb * 2**20))
    return "after the noise"


@server.tool(structured_output=False)
def big(mb: int) -> str:
    """Return a text of ``mb`` MiB."""
    return "x" * (mb * 2**20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", type=Path)
    parser.add_argument("--clash", action="store_true")
    parser.add_argument("--clash-first", action="store_true")
    args = parser.parse_args()
    _add_odd_tools(args.clash or args.clash_first, args.clash_first)
    if args.child is not None:
        # Waits for a signal, whatever happens to the pipes it shares with the server.
        child = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
        args.child.write_text(str(child.pid))
    server.run()


if __name__ == "__main__":
    main()

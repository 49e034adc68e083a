"""What the MCP tests share: counting the child processes a test leaves behind, and the SDK-written
HTTP server (``mcp_http_server.py``) in a child process on loopback."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_helpers import WAIT

HERE = Path(__file__).resolve().parent


def child_pids() -> set[int]:
    """The processes whose parent is this one (Linux: read from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            found.add(int(entry))
    return found


@contextlib.contextmanager
def nothing_left_behind() -> Iterator[None]:
    """Fail if a thread or a child process started inside the block is still there at its end."""
    if not os.path.isdir("/proc"):
        pytest.skip("child processes are counted through /proc")
    threads, children = set(threading.enumerate()), child_pids()
    yield
    for thread in set(threading.enumerate()) - threads:
        thread.join(WAIT)  # e.g. asyncio's child watcher, which ends once its process is reaped
    assert [t.name for t in set(threading.enumerate()) - threads] == []
    assert child_pids() - children == set()


class HttpServer:
    """``tests/mcp_http_server.py`` in a child process, on a loopback port that survives restarts."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[str] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        """Start the server (on the same port as before, if it ran before); return once it listens."""
        process = subprocess.Popen(
            [sys.executable, str(HERE / "mcp_http_server.py"), str(self.port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 3 * WAIT)
        line = process.stdout.readline() if ready else ""
        if not line.strip().isdigit():
            process.kill()
            process.wait()
            raise AssertionError(f"the MCP test server did not start (it said {line!r})")
        self.port = int(line)
        self.process = process

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            assert self.process.stdout is not None
            self.process.stdout.close()
            self.process = None

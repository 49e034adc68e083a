"""A real ``redis-server`` for the tests: started on a free loopback port with no persistence,
stopped (and waited for) at the end. ``scripts/setup_cluster.sh`` installs it."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

from tiers import need_program

START_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    """Whether a Redis server on ``port`` answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def running_redis() -> Iterator[str]:
    """Start ``redis-server`` on a free port and yield its ``redis://`` URL; skip the test when
    the server is not installed (``bash scripts/setup_cluster.sh`` installs it), or fail it in
    CI (``tiers.py``)."""
    binary = need_program("redis-server", "bash scripts/setup_cluster.sh")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="yiemagent-redis-") as folder:
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                folder,
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _answers(port):
                if process.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {process.returncode} at start")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not answer on port {port}")
                time.sleep(0.05)  # polling a server that is starting; nothing to wait on instead
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

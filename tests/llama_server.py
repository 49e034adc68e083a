"""llama.cpp's own server (what people run as ``llama-server``, served by xllamacpp from the
``local`` extra) running SmolLM2-135M with its chat template, for the tests that talk to a
server we did not write.

It is started once per test session (``server_url`` in ``conftest.py``) as a subprocess
(``llama_server_child.py``) on a free loopback port, waited for with a bounded poll of
``/v1/models``, and stopped at the end. Nothing is mocked; the ``local`` extra (installed by
``scripts/setup.sh``) must be there.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import requests

from yiemagent.llm import default_model_path

READY_WITHIN_S = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve(n_ctx: int = 4096) -> Iterator[str]:
    """Start the server with a context of ``n_ctx`` tokens; yield ``http://127.0.0.1:<port>/v1``;
    stop it (the fixture's body)."""
    port = free_port()
    child = Path(__file__).with_name("llama_server_child.py")
    command = [sys.executable, str(child), str(default_model_path()), str(n_ctx), str(port)]
    # The log goes to a file: llama.cpp writes far more than a pipe holds, and a full pipe
    # would stop the server before it ever answers.
    with tempfile.TemporaryFile() as log, requests.Session() as probe:
        probe.trust_env = False  # straight to loopback, whatever proxy the environment names
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield wait_until_ready(process, probe, f"http://127.0.0.1:{port}/v1", log)
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_ready(
    process: subprocess.Popen[bytes], probe: requests.Session, base: str, log: IO[bytes]
) -> str:
    """Return ``base`` once the server answers ``/models``: a poll bounded in time that ends at
    the first answer; raise with the end of the server's log when it exits or takes too long."""

    def tail() -> str:
        log.seek(0)
        return log.read().decode("utf-8", "replace")[-3000:]

    deadline = time.monotonic() + READY_WITHIN_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"llama.cpp's server exited at start:\n{tail()}")
        try:
            if probe.get(f"{base}/models", timeout=2).ok:
                return base
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama.cpp's server not ready within {READY_WITHIN_S:g} s:\n{tail()}")
        time.sleep(0.1)

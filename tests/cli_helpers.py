"""Helpers for the tests of the ``yiemagent`` command: every test runs it as a real subprocess
(``sys.executable -m yiemagent``), with a scripted model and tools whose output is fixed.

``Terminal`` runs the command on a pseudo-terminal that is its controlling terminal, so typing
Ctrl-C there sends SIGINT as a real terminal would. Reads wait with ``select`` up to a bound and
fail with everything read so far; nothing waits by sleeping.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

WAIT = 30.0  # seconds a test waits for output or for the command to end before failing

# Tool files whose results depend on nothing but their arguments.
ECHO_TOOL = """
def execute(tool_call_id, args, signal, on_partial_result):
    on_partial_result(AgentToolResult("echoing " + args["text"]))
    return AgentToolResult(args["text"].upper())


def get_tool():
    return AgentTool(
        name="echo", label="Echo", description="Repeat a text in capitals.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}},
                      "required": ["text"]},
        execute=execute, parallel_tool_execute=True,
    )
"""

WAIT_TOOL = """
def execute(tool_call_id, args, signal, on_partial_result):
    on_partial_result(AgentToolResult("waiting for an abort"))
    signal.wait(120)
    return AgentToolResult("stopped" if signal.aborted else "never aborted")


def get_tool():
    return AgentTool(
        name="waitForAbort", label="Wait", description="Wait until the run is aborted.",
        input_schema={"type": "object", "properties": {}}, execute=execute,
    )
"""

# What a session's xllamacpp looks like when the `local` extra is not installed: importing it
# fails, whatever is installed in the environment running the tests.
NO_XLLAMACPP = "raise ImportError(\"No module named 'xllamacpp' (test stand-in)\")\n"


def tools_folder(path: Path) -> Path:
    """A folder holding the ``echo`` and ``waitForAbort`` tools."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "echo.py").write_text(ECHO_TOOL, encoding="utf-8")
    (path / "waitForAbort.py").write_text(WAIT_TOOL, encoding="utf-8")
    return path


def script_file(path: Path, replies: list[Any]) -> Path:
    """Write a ``scripted:`` model file with ``replies`` and return its path."""
    path.write_text(json.dumps(replies), encoding="utf-8")
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without provider keys or colours, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY")
    }
    env.update({"NO_COLOR": "1", "TERM": "dumb", "PYTHONIOENCODING": "utf-8"})
    env.update(extra)
    return env


def _child_setup(closed: Sequence[int], memory_limit: int | None) -> Callable[[], None] | None:
    """What the child does before it becomes the command: cap its address space (so that a
    command that reads without end fails instead of eating the machine) and close the
    descriptors ``closed``, as ``>&-`` in a shell does. ``None`` when there is nothing to do."""
    if not closed and memory_limit is None:
        return None

    def setup() -> None:
        if memory_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        for fd in closed:
            os.close(fd)

    return setup


def run_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | bytes | None = None,
    closed: Sequence[int] = (),
    memory_limit: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m yiemagent ARGS`` to its end (bounded by ``WAIT``) and return it, its
    output decoded as UTF-8 (undecodable bytes replaced). ``stdin`` is its input (bytes as
    they are; none: an empty stdin); ``closed`` lists descriptors closed in the child before it
    starts (0, 1, 2: POSIX only), ``memory_limit`` caps its address space (POSIX only)."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    done = subprocess.run(
        [sys.executable, "-m", "yiemagent", *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        input=data,
        stdin=subprocess.DEVNULL if data is None else None,
        capture_output=True,
        timeout=WAIT,
        preexec_fn=_child_setup(closed, memory_limit),
    )
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


# Makes the pseudo-terminal on stdin the controlling terminal of a new session, then becomes
# the command: a session leader that opens a terminal without O_NOCTTY acquires it (Linux).
_CONTROLLING_TTY = (
    "import os, sys; os.setsid(); os.close(os.open(os.ttyname(0), os.O_RDWR)); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


class Terminal:
    """``python -m yiemagent ARGS`` on a pseudo-terminal: ``send`` types, ``expect`` reads."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        self.master = master
        self.output = ""
        self.seen = 0  # output before this index has been matched by expect()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CONTROLLING_TTY, "-m", "yiemagent", *args],
                cwd=cwd,
                env=env,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                close_fds=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)

    def send(self, text: str) -> None:
        """Type ``text`` (``\\n`` ends a line, ``\\x03`` is Ctrl-C)."""
        os.write(self.master, text.encode())

    def _read(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); ``False`` at end of output."""
        ready, _, _ = select.select([self.master], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the command ended and the terminal closed
            return False
        if not data:
            return False
        self.output += data.decode("utf-8", "replace").replace("\r\n", "\n")
        return True

    def expect(self, needle: str, timeout: float = WAIT) -> str:
        """Wait until ``needle`` appears after what earlier calls matched; return the output
        from there up to and including it. Fails with the whole output when it does not."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.output.find(needle, self.seen)
            if found >= 0:
                start, self.seen = self.seen, found + len(needle)
                return self.output[start : self.seen]
            if time.monotonic() >= deadline or not self._read(deadline):
                raise AssertionError(f"{needle!r} did not appear; the terminal showed:\n{self.output}")

    def wait(self, timeout: float = WAIT) -> int:
        """Read the rest of the output and wait for the command to end; return its status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(deadline):
            pass
        return self.proc.wait(max(deadline - time.monotonic(), 1))

    def close(self) -> None:
        """Kill the command if it still runs, and close the terminal."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(WAIT)
        os.close(self.master)

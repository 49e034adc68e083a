"""``scripts/setup_progress.sh``: a long set-up step says how long it has been running, and the
step's exit status is kept. The step waits on a FIFO that the test opens only after it has read
a progress line, so nothing depends on how fast the machine is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _with_progress(command: str, **env: str) -> subprocess.Popen[str]:
    script = f'source scripts/setup_progress.sh; with_progress "testing" {command}'
    return subprocess.Popen(
        ["bash", "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, **env}
    )


def test_a_long_step_prints_how_long_it_has_been_running(tmp_path: Path) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    step = _with_progress(f"bash -c 'read line < {fifo}; exit 3'", SETUP_PROGRESS_EVERY_S="1")
    assert step.stdout is not None
    first = step.stdout.readline()  # the step is still waiting on the FIFO: it must say so
    assert first.startswith("setup: still testing (0 min "), first
    assert first.rstrip().endswith("s so far)"), first
    fifo.write_text("go\n", encoding="utf-8")
    step.communicate(timeout=60)
    assert step.returncode == 3  # the step's own exit status, so set -e still stops the set-up


def test_a_quick_step_prints_nothing_and_succeeds() -> None:
    step = _with_progress("true")
    out, _ = step.communicate(timeout=60)
    assert out == ""
    assert step.returncode == 0

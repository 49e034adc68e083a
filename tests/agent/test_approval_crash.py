"""Crash safety of approval: a process pauses on approval and saves; another resumes it with
decisions and is killed with SIGKILL somewhere between the pause and the end of its run, 60
times, each time restarted from the session until the run ends. A tool with a side effect (a
line appended to a file) never runs twice for one call and never runs unapproved, and every
call ends with exactly one result (one that had started when the process died says its outcome
is unknown, and is not run again). A developer's default run (``YIEMAGENT_TEST_SIZE=quick``)
kills 10 resumes instead of 60: see ``tests/tiers.py``."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import sized

CHILD = Path(__file__).with_name("approval_crash_child.py")
# Where the parent kills the resuming child: after it announces one of these (the child goes on
# meanwhile, so the exact point varies: before, during or after a checkpoint or a call).
MARKS = ["loaded", "resumed", "start c1", "end c1", "start c3", "end c3", "done"]
RUNS = sized(quick=10, full=60)


def child(mode: str, session: Path, effects: Path, kill_after: str | None = None) -> list[str]:
    """Run the child; with ``kill_after``, SIGKILL it once it printed a line starting so (or let
    it finish when it never does). Returns the lines it printed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(session), str(effects)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.strip())
        if kill_after is not None and line.startswith(kill_after):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    proc.stdout.close()
    return lines


@pytest.mark.timeout(900)
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="SIGKILL is POSIX")
def test_a_killed_resume_never_runs_a_call_twice_or_unapproved(tmp_path: Path) -> None:
    rng = random.Random(20261201)
    interrupted = 0
    for run in range(RUNS):
        folder = tmp_path / str(run)
        folder.mkdir()
        session, effects = folder / "session.json", folder / "effects.txt"
        assert child("pause", session, effects)[-1] == "paused"
        assert not effects.exists()
        lines = child("resume", session, effects, kill_after=rng.choice(MARKS))
        for _ in range(5):  # restarted from the session until the run has ended
            if lines and lines[-1].startswith("done"):
                break
            lines = child("resume", session, effects)
        assert lines[-1] == "done stop", lines
        written = effects.read_text(encoding="utf-8").splitlines() if effects.exists() else []
        ids = [w.split()[0] for w in written]
        assert len(ids) == len(set(ids)), f"run {run}: a call ran twice: {written}"
        assert "c2" not in ids, f"run {run}: the denied call ran"
        assert set(written) <= {"c1 /p1", "c3 /edited"}, written
        messages = json.loads(session.read_text(encoding="utf-8"))["messages"]
        results = [m for m in messages if m["role"] == "toolResult"]
        assert [m["tool_call_id"] for m in results] == ["c1", "c2", "c3"], f"run {run}"
        for m in results:
            kind = m["details"].get("error_kind")
            if m["tool_call_id"] == "c2":
                assert kind == "denied"
            elif kind == "interrupted":
                interrupted += 1
            else:
                assert not m["is_error"] and m["tool_call_id"] in ids  # it ran, exactly once
    assert interrupted < RUNS  # most runs are killed where no call is in flight

"""``scripts/bench_loop.py`` at a tiny size: it runs every variant to its answer and reports a
positive figure and ratio for each (the figures themselves are read from a full run, never
asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_loop.py"


def test_bench_loop_reports_every_variant() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--turns", "12", "--runs", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    figures = json.loads(done.stdout)
    assert figures["bare_us"] > 0
    for name in ("plain", "budgets", "output", "approval", "all", "plain_no_listener"):
        assert figures[name]["us_per_turn"] > 0 and figures[name]["ratio_to_bare"] > 0
    assert figures["history_2000"]["ratio_to_empty"] > 0

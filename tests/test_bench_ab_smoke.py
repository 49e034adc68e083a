"""Smoke test of ``scripts/bench_ab.py``: it measures this checkout with tiny sizes and gives
both variants, and it refuses a directory that holds no package. No time is asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_ab.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_it_reports_both_variants_for_a_checkout() -> None:
    done = run("--rounds", "2", "--turns", "3", "--runs", "1", "--json", str(ROOT))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    figures = report[str(ROOT)]
    assert set(figures) == {"typed", "dict_kwargs"}
    for variant in figures.values():
        assert math.isfinite(variant["lowest"]) and 0 <= variant["lowest"] <= variant["median"]


def test_a_directory_without_the_package_is_refused(tmp_path: Path) -> None:
    done = run("--rounds", "1", str(tmp_path))
    assert done.returncode == 2 and "holds no yiemagent package" in done.stderr


def test_a_count_below_one_is_refused() -> None:
    done = run("--rounds", "0", str(ROOT))
    assert done.returncode == 2 and "must be at least 1" in done.stderr

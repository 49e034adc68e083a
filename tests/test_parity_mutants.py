"""``scripts/parity_mutants.py``, which measures how much of the library's behaviour the conformance
suite can see: every fault still applies to today's code (exactly one snippet each), faults the
suite sees are reported caught, and a fault that no longer applies is reported stale (exit 1)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from paths import ROOT

SCRIPT = ROOT / "scripts" / "parity_mutants.py"


@pytest.fixture(scope="module")
def mutants() -> ModuleType:
    spec = importlib.util.spec_from_file_location("parity_mutants", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["parity_mutants"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_there_are_at_least_thirty_faults_with_unique_names(mutants: ModuleType) -> None:
    names = [f.name for f in mutants.FAULTS]
    assert len(names) >= 30 and len(set(names)) == len(names)


def test_every_fault_applies_to_todays_code(mutants: ModuleType, tmp_path: Path) -> None:
    package = tmp_path / "yiemagent"
    shutil.copytree(ROOT / "yiemagent", package, ignore=shutil.ignore_patterns("__pycache__"))
    for fault in mutants.FAULTS:
        original = (package / fault.path).read_text(encoding="utf-8")
        assert mutants.apply(fault, package) is None, fault.name
        changed = (package / fault.path).read_text(encoding="utf-8")
        assert changed != original, fault.name
        (package / fault.path).write_text(original, encoding="utf-8")


def test_a_fault_whose_snippet_is_gone_is_stale(mutants: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "_loop.py").write_text("nothing of the kind\n", encoding="utf-8")
    fault = mutants.Fault("gone", "results", "a fault", "core/_loop.py", "if turn >= x:", "if turn > x:")
    assert mutants.apply(fault, tmp_path) == "its snippet occurs 0 times in core/_loop.py, not once"


# One fault of each area: the request, the hooks' contexts, supplied texts, tool stores,
# results and channels (the whole list runs with the script itself; docs say how many it catches).
SUBSET = (
    "no_tool_results",
    "hooks_see_no_history",
    "block_reason_lost",
    "register_keeps_old",
    "terminate_any",
    "steering_never_joins",
)


@pytest.mark.timeout(900)
def test_a_fault_of_each_area_is_caught() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", ",".join(SUBSET), "--json", "--min-caught", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["caught_share"] == 1.0
    assert {f["name"]: f["verdict"] for f in report["faults"]} == dict.fromkeys(SUBSET, "caught")
    assert {f["area"] for f in report["faults"]} == {
        "request",
        "hooks",
        "texts",
        "stores",
        "results",
        "channels",
    }


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--timeout", "-1"], "'-1' is not a positive number of seconds"),
        (["--timeout", "inf"], "'inf' is not a positive number of seconds"),
        (["--min-caught", "nan"], "'nan' is not a share from 0 to 1"),
        (["--min-caught", "2"], "'2' is not a share from 0 to 1"),
        (["--only", "no_such_fault"], "unknown fault(s) ['no_such_fault']"),
    ],
)
def test_a_bad_command_line_is_exit_2_with_a_message(args: list[str], says: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr

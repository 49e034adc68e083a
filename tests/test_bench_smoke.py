"""Smoke test of ``scripts/bench.py``: it runs with tiny sizes and reports every scenario.

The benchmark is run with ``--quick`` so that it cannot rot unnoticed; no time is ever asserted
here (figures at tiny sizes mean nothing, and timings depend on the machine).
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tiers import has, strict

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench.py"
TARGETED = {
    "import_time": {"import_ms", "help_s"},
    "turn_overhead": {"us_per_turn"},
    "parallel_batch": {"wall_s_2", "wall_s_3"},
    "history_growth": {"ratio"},
    "context_window": {"us_per_turn_window_overhead"},
    "many_agents": {"wall_ratio", "rss_mib_per_agent"},
    "tool_loading": {"ms_per_file"},
}


def load_bench() -> ModuleType:
    """Import ``scripts/bench.py`` as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("yiemagent_bench_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """The benchmark script as a module."""
    return load_bench()


@pytest.fixture(scope="module")
def report(bench: ModuleType) -> dict[str, Any]:
    """One quick run of every scenario, in this process."""
    data: dict[str, Any] = bench.run(["--quick"])
    return data


# The scenarios that need an extra (bench.py reports them unavailable without it).
EXTRA_OF = {"ray_pool": "ray", "local_model": "local", "local_agents": "local", "local_structured": "local"}


def registry_available() -> bool:
    """Whether the tool-loading API exists (without it, tool_loading is unavailable)."""
    return importlib.util.find_spec("yiemagent.tools._store") is not None


def available(name: str) -> bool:
    """Whether scenario ``name`` can run here: tool_loading needs the registry, ray_pool the
    ``ray`` extra and the local_* ones the ``local`` one, which CI and the full tier always count as
    there (``tiers.strict``), so a missing one fails there; the others always run."""
    if name == "tool_loading":
        return registry_available()
    if name in EXTRA_OF:
        return has(EXTRA_OF[name]) or strict()
    return True


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_figure(where: str, fig: dict[str, Any]) -> None:
    """A measured figure: numeric median/min/max in order, a run count, target and met fields."""
    for key in ("median", "min", "max"):
        assert is_number(fig[key]), f"{where}.{key} = {fig[key]!r}"
    assert fig["min"] <= fig["median"] <= fig["max"], where
    assert isinstance(fig["runs"], int) and fig["runs"] >= 1, where
    assert fig["target"] is None or is_number(fig["target"]), where
    assert (fig["met"] is None) == (fig["target"] is None), where
    assert fig["met"] is None or isinstance(fig["met"], bool), where
    assert isinstance(fig["unit"], str) and isinstance(fig["label"], str), where


def test_every_scenario_is_reported(bench: ModuleType, report: dict[str, Any]) -> None:
    assert list(report["scenarios"]) == list(bench.SCENARIOS)
    assert report["quick"] is True and report["errors"] == []
    for name, scenario in report["scenarios"].items():
        if not available(name):
            assert scenario["status"] == "unavailable" and scenario["note"]
            continue
        assert scenario["status"] == "ok", f"{name}: {scenario['note']}"
        assert scenario["figures"], name
        for fig_name, fig in scenario["figures"].items():
            check_figure(f"{name}.{fig_name}", fig)


def test_targeted_figures_have_targets(report: dict[str, Any]) -> None:
    for name, figures in TARGETED.items():
        scenario = report["scenarios"][name]
        for fig_name in figures:
            fig = scenario["figures"][fig_name]
            assert is_number(fig["target"]), f"{name}.{fig_name}"
            if scenario["status"] == "ok":
                assert isinstance(fig["met"], bool), f"{name}.{fig_name}"


def test_missed_list_matches_the_met_flags(report: dict[str, Any]) -> None:
    expected = [
        f"{name}.{fig_name}"
        for name, s in report["scenarios"].items()
        for fig_name, fig in s["figures"].items()
        if fig["met"] is False
    ]
    assert report["missed"] == expected


def test_table_names_every_scenario_and_the_missed_targets(bench: ModuleType, report: dict[str, Any]) -> None:
    table = bench.render(report)
    for name in bench.SCENARIOS:
        assert name in table
    assert "Missed targets:" in table


def test_context_window_figures(report: dict[str, Any]) -> None:
    scenario = report["scenarios"]["context_window"]
    assert scenario["status"] == "ok", scenario["note"]
    figures = scenario["figures"]
    assert list(figures) == [
        "us_per_turn_no_window",
        "us_per_turn_window",
        "us_per_turn_window_overhead",
        "us_per_turn_trim",
    ]
    for fig_name, fig in figures.items():
        check_figure(f"context_window.{fig_name}", fig)
    assert figures["us_per_turn_window_overhead"]["target"] == 5.0
    for fig_name in ("us_per_turn_no_window", "us_per_turn_window", "us_per_turn_trim"):
        assert figures[fig_name]["target"] is None, fig_name
    params = scenario["params"]
    assert params["trim_window_tokens"] < params["window_tokens"]


def test_command_line_json_is_one_object() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", "--only", "turn_overhead"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert list(data["scenarios"]) == ["turn_overhead"]
    check_figure("turn_overhead.us_per_turn", data["scenarios"]["turn_overhead"]["figures"]["us_per_turn"])


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="--profile needs CPython 3.10 or 3.11")
def test_profile_lists_library_functions(bench: ModuleType) -> None:
    text = bench.profile(["turn_overhead"], bench.QUICK, 5)
    assert "_loop.py" in text and "cumulative" in text


def test_tool_loading_reports_unavailable_without_the_registry(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "yiemagent.tools._store", None)  # makes the import fail
    scenario = bench.tool_loading(bench.QUICK).to_dict()
    assert scenario["status"] == "unavailable" and "tools._store" in scenario["note"]
    fig = scenario["figures"]["ms_per_file"]
    assert fig["median"] is None and fig["met"] is None and is_number(fig["target"])

"""The conformance suite: every scenario validates against the shipped schema and passes on this
implementation, the scenarios cover the spec sections and DESIGN points they must, and behaviour
broken on purpose is reported by ``run`` and ``check`` at the right event."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
from paths import ROOT

import yiemagent.core._pipeline as agent_core
import yiemagent.testing.parity._drive as drive
from yiemagent.testing.parity import (
    compare,
    load_scenario,
    parse_scenario,
    read_trace,
    run_scenario,
    schema,
    write_trace,
)
from yiemagent.testing.parity._cli import main

SCENARIOS = ROOT / "parity" / "scenarios"
FILES = sorted(SCENARIOS.glob("*.json"))
IDS = [f.stem for f in FILES]


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(args), out)
    return status, out.getvalue()


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    """A validator built from the shipped schema files themselves (not the package's cache)."""
    base = "https://yiemagent.invalid/parity/"
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(
        (base + name, referencing.Resource.from_contents(schema(kind)))
        for kind, name in (("scenario", "scenario.schema.json"), ("trace", "trace.schema.json"))
    )
    jsonschema.Draft202012Validator.check_schema(schema("scenario"))
    jsonschema.Draft202012Validator.check_schema(schema("trace"))
    return jsonschema.Draft202012Validator(schema("scenario"), registry=registry)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_every_scenario_validates_against_the_shipped_schema(
    path: Path, validator: jsonschema.Draft202012Validator
) -> None:
    errors = sorted(validator.iter_errors(json.loads(path.read_text(encoding="utf-8"))), key=str)
    assert not errors, f"{path.name}: {errors[0].message} at {list(errors[0].absolute_path)}"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_every_scenario_passes_on_yiemagent(path: Path) -> None:
    scenario = load_scenario(path)
    outcome = run_scenario(scenario)
    assert outcome.problems == []
    found = compare(scenario.expect, outcome.expect(), scenario)
    assert found is None, found


def test_the_suite_covers_every_rule_it_must() -> None:
    scenarios = [load_scenario(f) for f in FILES]
    assert len(scenarios) >= 130
    covered = {c for s in scenarios for c in s.data["covers"]}
    wanted = {f"spec {n}" for n in (1, 4, *range(6, 16), 17)} | {f"DESIGN {n}" for n in (2, 3, 7, 8, 10, 11)}
    assert {c.split(".")[0] for c in covered} >= wanted
    assert {"spec 8.1", "spec 8.2", "spec 8.3"} <= covered
    kinds = {e.get("error_kind") for s in scenarios for e in s.expect["events"]} - {None}
    assert kinds == {
        "aborted",
        "tool_not_found",
        "invalid_json",
        "invalid_arguments",
        "prepare_failed",
        "schema_violation",
        "blocked",
        "hook_failed",
        "tool_raised",
        "invalid_result",
        "timeout",
        "skipped",
        "repeated_call",
        "denied",
        "usage_limit",
    }
    profiles = {p for s in scenarios for p in s.profile}
    assert profiles == set(schema("scenario")["properties"]["profile"]["items"]["enum"])
    assert any(r.get("usage") for s in scenarios for r in s.replies)
    forms = {r.get("form", "typed") for s in scenarios for r in s.replies}
    assert forms == {"typed", "wire", "tool_calls", "tool_call"}
    inputs = {i["do"] for s in scenarios for i in s.inputs}
    assert inputs == {"user", "follow_up", "resume", "abort", "clear_store", "shutdown", "decide", "reload"}


def test_the_cli_runs_the_whole_suite() -> None:
    status, out = cli("run", str(SCENARIOS))
    assert status == 0, out
    assert out.strip().endswith(f"{len(FILES)} passed, 0 failed")


# -- behaviour broken on purpose -----------------------------------------------------------


def index_of(events: list[dict[str, Any]], **fields: Any) -> int:
    return next(i for i, e in enumerate(events) if all(e.get(k) == v for k, v in fields.items()))


def mutated_run(name: str, tmp_path: Path) -> tuple[Any, Any, str, str]:
    """Run scenario ``name`` (with the mutation the caller patched in) through ``run`` and
    through ``check`` of the trace it wrote; return the scenario, the divergence and both
    outputs."""
    scenario = load_scenario(SCENARIOS / f"{name}.json")
    outcome = run_scenario(scenario)
    found = compare(scenario.expect, outcome.expect(), scenario)
    trace = tmp_path / f"{name}.jsonl"
    write_trace(trace, name, "mutant", outcome.expect())
    run_status, run_out = cli("run", str(SCENARIOS / f"{name}.json"))
    check_status, check_out = cli("check", str(SCENARIOS / f"{name}.json"), str(trace))
    assert run_status == 1 and check_status == 1
    return scenario, found, run_out, check_out


def test_a_hook_that_flips_is_error_is_reported_at_the_end_event(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def flipping(hooks: Any, harness: Any, observe: Any = None) -> tuple[Any, Any]:
        return None, lambda ctx, _signal: {"is_error": not ctx.is_error}

    monkeypatch.setattr(drive, "build_hooks", flipping)
    scenario, found, run_out, check_out = mutated_run("tool_call_then_final_answer", tmp_path)
    at = index_of(scenario.expect["events"], type="tool_execution_end", tool_call_id="c1")
    assert (found.part, found.index) == ("events", at)
    for out in (run_out, check_out):
        assert f"first divergence at events[{at}] (run 1, turn 1)" in out
        assert "is_error: expected false, actual true" in out


def test_a_reversed_parallel_result_order_is_reported_at_the_first_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_batch = agent_core._batch
    monkeypatch.setattr(agent_core, "_batch", lambda finalized, clock: real_batch(finalized[::-1], clock))
    scenario, found, run_out, check_out = mutated_run("parallel_results_keep_the_call_order", tmp_path)
    events = scenario.expect["events"]
    at = index_of(events, type="message_start", role="toolResult")
    assert (found.part, found.index) == ("events", at + 1)  # the first result's message_end
    assert found.expected["message"]["tool_call_id"] == "c1"
    assert found.actual["message"]["tool_call_id"] == "c2"
    for out in (run_out, check_out):
        assert f"first divergence at events[{at + 1}]" in out
        assert 'message.tool_call_id: expected "c1", actual "c2"' in out


def test_a_missing_end_event_is_reported_where_it_should_be(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_end = agent_core.emit_tool_execution_end

    def dropping(finalized: Any, emit: Any) -> None:
        if finalized.tool_call.id != "c2":
            real_end(finalized, emit)

    monkeypatch.setattr(agent_core, "emit_tool_execution_end", dropping)
    scenario, found, run_out, check_out = mutated_run("raising_tool_does_not_stop_the_batch", tmp_path)
    at = index_of(scenario.expect["events"], type="tool_execution_end", tool_call_id="c2")
    assert (found.index, found.expected["type"], found.actual["type"]) == (
        at,
        "tool_execution_end",
        "message_start",
    )
    for out in (run_out, check_out):
        assert f"first divergence at events[{at}]" in out


def test_a_missing_end_in_a_parallel_section_names_the_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_end = agent_core.emit_tool_execution_end
    monkeypatch.setattr(
        agent_core,
        "emit_tool_execution_end",
        lambda f, emit: None if f.tool_call.id == "c1" else real_end(f, emit),
    )
    scenario, found, _, check_out = mutated_run("parallel_mode_runs_calls_at_the_same_time", tmp_path)
    at = index_of(scenario.expect["events"], type="tool_execution_end", tool_call_id="c1")
    assert found.index == at and found.actual is None
    assert "in the parallel section" in check_out and "call c1's event 2 differs" in check_out


def test_a_sequential_run_of_a_parallel_batch_diverges(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(agent_core, "execute_tool_calls_parallel", agent_core.execute_tool_calls_sequential)
    scenario, found, _, check_out = mutated_run("unknown_tools_do_not_force_sequential", tmp_path)
    at = index_of(scenario.expect["events"], type="tool_execution_start", tool_call_id="c2")
    assert found.index == at and found.actual["tool_call_id"] == "c1"  # c1 ran before c2 started
    assert "end before the last start (preparation failures) differ: expected [], actual ['c1']" in check_out


# -- record ---------------------------------------------------------------------------------


def test_record_rewrites_expect_from_current_behaviour(tmp_path: Path) -> None:
    path = tmp_path / "answer_without_tool_calls_ends_the_run.json"
    data = json.loads((SCENARIOS / path.name).read_text(encoding="utf-8"))
    data["expect"] = {"events": [], "requests": [], "hooks": [], "responses": [], "history": []}
    path.write_text(json.dumps(data), encoding="utf-8")
    assert cli("run", str(path))[0] == 1
    status, out = cli("record", str(path))
    assert status == 0 and out.startswith("recorded")
    assert cli("run", str(path))[0] == 0


# -- bad input is reported, not raised ------------------------------------------------------


@pytest.fixture
def good() -> Iterator[dict[str, Any]]:
    yield json.loads((SCENARIOS / "tool_call_then_final_answer.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["tools"][0]["outcome"].update(text="x"), "$.tools[0].outcome"),
        (
            lambda d: d["replies"][0]["message"]["tool_calls"][0]["function"].pop("name"),
            "$.replies[0].message.tool_calls[0].function",
        ),
        (lambda d: d["inputs"].append({"do": "abort"}), "$.inputs[1]"),
        (lambda d: d.update(execution="both"), "$.execution"),
        (lambda d: d["expect"]["events"][0].update(run=0), "$.expect.events[0].run"),
        (lambda d: d.update(name="another_name"), "$.name"),
        (lambda d: d["inputs"].append({"do": "abort", "at": "nowhere"}), "$.inputs[1].at"),
        (lambda d: d["tools"][0].update(steps=[{"do": "wait", "latch": "never"}]), "$.tools[0].steps[0]"),
    ],
)
def test_a_malformed_scenario_names_the_file_and_the_field(
    good: dict[str, Any], change: Any, where: str, tmp_path: Path
) -> None:
    change(good)
    path = tmp_path / "tool_call_then_final_answer.json"
    path.write_text(json.dumps(good), encoding="utf-8")
    status, out = cli("run", str(path))
    assert status == 1 and "Traceback" not in out
    assert re.search(rf"ERROR {re.escape(str(path))}: not a usable scenario:\n  {re.escape(where)}", out), out


def test_a_file_that_is_not_json_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"format": 2,', encoding="utf-8")
    status, out = cli("run", str(path))
    assert status == 1 and f"{path}: not a usable scenario:\n  $: not JSON" in out


def test_a_malformed_trace_names_the_line_and_the_field(good: dict[str, Any], tmp_path: Path) -> None:
    scenario = parse_scenario(good, "good", "tool_call_then_final_answer")
    trace = tmp_path / "t.jsonl"
    write_trace(trace, scenario.name, "other", scenario.expect)
    lines = trace.read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[8])
    bad["is_error"] = "no"
    lines[8] = json.dumps(bad)
    trace.write_text("\n".join(lines), encoding="utf-8")
    status, out = cli("check", str(SCENARIOS / "tool_call_then_final_answer.json"), str(trace))
    assert status == 1 and "line 9: $.is_error: 'no' is not of type 'boolean'" in out
    with pytest.raises(ValueError, match="not a usable trace"):
        read_trace(trace)


def test_schema_prints_every_schema() -> None:
    status, out = cli("schema", "trace")
    assert status == 0 and json.loads(out)["$id"].endswith("trace.schema.json")
    status, out = cli("schema", "cassette")
    assert status == 0 and json.loads(out)["$id"].endswith("cassette.schema.json")
    status, out = cli("schema")
    assert status == 0 and out.count('"$id"') == 3


# -- the second implementation ---------------------------------------------------------------

PI = ROOT / "parity" / "ports" / "pi"
PI_VERSIONS = ("0.73.1", "1.6.0")
PARITY_DOC = ROOT / "docs" / "PARITY.md"


def pi_traces(version: str, out: Path) -> None:
    """Install pi ``version`` (pinned by its lock file) when needed and run the suite on it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to run the pi-agent-core port")
    folder = PI / "versions" / version
    if not (folder / "node_modules").is_dir():
        installed = subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if installed.returncode != 0:
            pytest.skip(f"npm ci failed (no registry?): {installed.stderr[-500:]}")
    ran = subprocess.run(
        [node, "runner.js", "--pi", f"versions/{version}", str(SCENARIOS), str(out)],
        cwd=PI,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr


@pytest.mark.timeout(1200)
def test_both_pi_versions_pass_with_their_expectations_and_the_table_is_current(tmp_path: Path) -> None:
    reports = [tmp_path / "yiemagent.json"]
    status, out = cli("run", str(SCENARIOS), "--report", str(reports[0]))
    assert status == 0, out
    for version in PI_VERSIONS:
        traces = tmp_path / version
        pi_traces(version, traces)
        report = tmp_path / f"pi-{version}.json"
        status, out = cli(
            "check",
            str(SCENARIOS),
            str(traces),
            "--expectations",
            str(PI / "expectations.json"),
            "--report",
            str(report),
        )
        assert status == 0, out
        totals = json.loads(report.read_text(encoding="utf-8"))["totals"]
        assert totals["diverged"] == totals["stale"] == totals["harness_error"] == 0, totals
        assert totals["agreed"] >= 40, totals
        reports.append(report)
    status, out = cli("table", *map(str, reports), "--update", str(PARITY_DOC), "--check")
    assert status == 0, out

"""The conformance command on hostile files, run as a real subprocess: every scenario or trace
file it cannot use (not UTF-8, nested 100,000 deep, a 5,000-digit number, huge, empty, a folder
or FIFO named ``*.json``, a symlink loop, ...) is one ``ERROR <file>: not a usable ...`` entry,
the good files still run and print their verdicts, nothing prints a traceback, nothing hangs."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT

from yiemagent.testing.parity import (
    ScenarioError,
    load_scenario,
    read_trace,
    write_trace,
)
from yiemagent.testing.parity._cli import main

SCENARIOS = ROOT / "parity" / "scenarios"
GOOD = ["tool_call_then_final_answer", "answer_without_tool_calls_ends_the_run"]
WAIT = 120.0  # seconds a command may take before the test fails (it runs two scenarios)
POSIX = os.name == "posix"


def parity(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m yiemagent.parity ARGS`` to its end, with strict UTF-8 output (a name that is
    not UTF-8 must not make printing fail)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "yiemagent.testing.parity", *args],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=WAIT,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def copy_good(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in GOOD:
        shutil.copy(SCENARIOS / f"{name}.json", folder)


def hostile_files(folder: Path, suffix: str) -> dict[str, str]:
    """Write every kind of unusable file into ``folder``; return file name -> words its error
    must say."""
    made = {
        f"not_utf8{suffix}": (b'{"name": "caf\xe9"}', "not UTF-8 text"),
        f"deep{suffix}": (b"[" * 100_000 + b"]" * 100_000, "nested more than 200 levels deep"),
        f"big_number{suffix}": (b'{"type": ' + b"9" * 5000 + b"}", "outside ±9007199254740991"),
        f"infinite{suffix}": (b'{"type": 1e400}', "out of range"),
        f"lone_surrogate{suffix}": (b'{"type": "\\ud800"}', "lone surrogate"),
        f"nan{suffix}": (b'{"type": NaN}', "NaN is not a JSON number"),
        f"empty{suffix}": (b"", "empty"),
    }
    expected = {}
    for name, (data, words) in made.items():
        (folder / name).write_bytes(data)
        expected[name] = words
    with open(folder / f"huge{suffix}", "wb") as handle:  # sparse: nothing is written
        handle.truncate(17 * 1024 * 1024)
    expected[f"huge{suffix}"] = "larger than the limit of 16,777,216 bytes"
    (folder / f"a_folder{suffix}").mkdir()
    expected[f"a_folder{suffix}"] = "it is a folder, not a file"
    if POSIX:
        os.mkfifo(folder / f"fifo{suffix}")  # reading it would block for ever
        expected[f"fifo{suffix}"] = "it is a FIFO (named pipe), not a regular file"
        os.symlink(f"loop{suffix}", folder / f"loop{suffix}")
        expected[f"loop{suffix}"] = "cannot read the file: Too many levels of symbolic links"
    return expected


def error_entries(out: str, what: str) -> dict[str, str]:
    """``ERROR <file>: not a usable <what>:`` entries of ``out``: file -> its indented lines."""
    entries: dict[str, str] = {}
    lines = out.splitlines()
    head = f": not a usable {what}:"
    for i, line in enumerate(lines):
        if line.startswith("ERROR ") and line.endswith(head):
            name = line[len("ERROR ") : -len(head)]
            assert name not in entries, f"{name} reported twice:\n{out}"
            detail = []
            for more in lines[i + 1 :]:
                if not more.startswith("  "):
                    break
                detail.append(more)
            entries[name] = "\n".join(detail)
    return entries


def test_run_reports_each_unusable_scenario_file_and_still_runs_the_good_ones(tmp_path: Path) -> None:
    folder = tmp_path / "scenarios"
    copy_good(folder)
    expected = hostile_files(folder, ".json")
    not_a_folder = tmp_path / "traces.txt"
    not_a_folder.write_text("a file where --trace-dir names a folder", encoding="utf-8")
    ran = parity("run", str(folder), "--trace-dir", str(not_a_folder), "-v")
    assert "Traceback" not in ran.stderr + ran.stdout, ran.stderr
    assert ran.returncode == 1, ran.stdout
    entries = error_entries(ran.stdout, "scenario")
    assert set(entries) == {str(folder / name) for name in expected}, ran.stdout
    for name, words in expected.items():
        assert words in entries[str(folder / name)], (name, entries[str(folder / name)])
    assert all(f"pass {name}" in ran.stdout.splitlines() for name in GOOD), ran.stdout
    assert (
        f"ERROR --trace-dir {not_a_folder}: cannot be used as the folder of traces: it is a "
        "file, not a folder; no traces are written" in ran.stdout
    )
    assert ran.stdout.splitlines()[-1] == f"2 passed, {len(expected) + 1} failed"


@pytest.mark.skipif(sys.platform != "linux", reason="file names that are not UTF-8: Linux")
def test_a_file_name_that_is_not_utf8_is_printed_escaped(tmp_path: Path) -> None:
    folder = tmp_path / "scenarios"
    copy_good(folder)
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.json"), "wb") as handle:
        handle.write(b"{}")
    ran = parity("run", str(folder), "-v")
    assert "Traceback" not in ran.stderr, ran.stderr
    assert f"ERROR {folder}/caf\\xe9.json: not a usable scenario:" in ran.stdout, ran.stdout
    assert ran.stdout.splitlines()[-1] == "2 passed, 1 failed"


def test_a_missing_path_is_reported_and_the_other_paths_still_run(tmp_path: Path) -> None:
    ran = parity("run", str(tmp_path / "missing.json"), str(SCENARIOS / f"{GOOD[0]}.json"), "-v")
    assert "Traceback" not in ran.stderr and ran.returncode == 1
    assert f"ERROR {tmp_path / 'missing.json'}: no such scenario file or directory" in ran.stdout
    assert ran.stdout.splitlines()[-2:] == [f"pass {GOOD[0]}", "1 passed, 1 failed"]


def good_traces(folder: Path) -> None:
    """The traces of the good scenarios as yiemagent produced them (their recorded expect)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in GOOD:
        scenario = load_scenario(SCENARIOS / f"{name}.json")
        write_trace(folder / f"{name}.jsonl", name, "other 1.0", scenario.expect)


def test_check_reports_each_unusable_trace_and_still_checks_the_good_ones(tmp_path: Path) -> None:
    scenarios, traces = tmp_path / "scenarios", tmp_path / "traces"
    copy_good(scenarios)
    good_traces(traces)
    expected = hostile_files(traces, ".jsonl")
    for name in expected:  # each unusable trace belongs to a (good) scenario of that name
        data = json.loads((SCENARIOS / f"{GOOD[0]}.json").read_text(encoding="utf-8"))
        data["name"] = Path(name).stem
        (scenarios / f"{Path(name).stem}.json").write_text(json.dumps(data), encoding="utf-8")
    blank = json.dumps(
        {
            "type": "trace",
            "format": 2,
            "suite": "2.0.0",
            "scenario": "blank_implementation",
            "implementation": " ",
        }
    )  # a name of only a space once raised IndexError
    (traces / "blank_implementation.jsonl").write_text(blank + "\n", encoding="utf-8")
    data["name"] = "blank_implementation"
    (scenarios / "blank_implementation.json").write_text(json.dumps(data), encoding="utf-8")
    ran = parity("check", str(scenarios), str(traces))
    assert "Traceback" not in ran.stderr + ran.stdout, ran.stderr
    assert ran.returncode == 1, ran.stdout
    entries = error_entries(ran.stdout, "trace")
    assert set(entries) == {str(traces / name) for name in expected}, ran.stdout
    for name, words in expected.items():
        assert words in entries[str(traces / name)], (name, entries[str(traces / name)])
    assert all(f"agreed         {name}" in ran.stdout.splitlines() for name in GOOD), ran.stdout
    assert "diverged       blank_implementation" in ran.stdout.splitlines()
    assert ran.stdout.splitlines()[-2:] == ["2 agreed, 1 diverged", f"{len(expected)} unusable files"]


def test_check_of_a_folder_of_scenarios_needs_a_folder_of_traces(tmp_path: Path) -> None:
    trace = tmp_path / "one.jsonl"
    trace.write_text("", encoding="utf-8")
    ran = parity("check", str(SCENARIOS), str(trace))
    assert "Traceback" not in ran.stderr and ran.returncode == 1
    assert f"ERROR {trace}: a file; with a folder of scenarios, give the folder of their traces" in ran.stdout


@pytest.mark.skipif(not POSIX, reason="a pipe whose reader is gone: POSIX")
def test_output_to_a_closed_pipe_ends_quietly() -> None:
    reader, writer = os.pipe()
    os.close(reader)  # every write the command makes now fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "yiemagent.testing.parity", "schema"],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=WAIT,
            check=False,
        )
    finally:
        os.close(writer)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1


# -- the readers themselves, in-process ------------------------------------------------------


def test_a_trace_line_may_hold_any_unicode_line_separator(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / f"{GOOD[0]}.json")
    outcome = json.loads(json.dumps(scenario.expect))
    outcome["history"][0]["text"] = "one\u2028two\x1cthree\x85four"  # written unescaped
    path = tmp_path / "t.jsonl"
    write_trace(path, scenario.name, "other", outcome)
    assert read_trace(path).history[0]["text"] == "one\u2028two\x1cthree\x85four"


def test_a_tool_schema_that_is_not_a_json_schema_is_refused_when_loaded(tmp_path: Path) -> None:
    data = json.loads((SCENARIOS / f"{GOOD[0]}.json").read_text(encoding="utf-8"))
    data["tools"][0]["input_schema"] = {"type": "object", "required": "text"}
    path = tmp_path / f"{GOOD[0]}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(
        ScenarioError,
        match=r"\$\.tools\[0\]\.input_schema: input_schema is not a "
        r"valid JSON Schema",
    ):
        load_scenario(path)
    out = io.StringIO()
    assert main(["run", str(path)], out) == 1
    assert out.getvalue().startswith(f"ERROR {path}: not a usable scenario:")


JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
).map(lambda v: json.dumps(v))
HOSTILE_TEXT = st.one_of(
    JSON_TEXT,
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 6000).map(lambda n: '{"n": ' + "7" * n + "}"),
    st.text(alphabet='[]{}",:0123456789eE.-+ \\udnNaIfity', max_size=60),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.one_of(st.binary(max_size=200), HOSTILE_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")))
)
def test_only_scenario_errors_escape_the_readers(data: bytes, tmp_path: Path) -> None:
    scenario, trace = tmp_path / "s.json", tmp_path / "t.jsonl"
    scenario.write_bytes(data)
    trace.write_bytes(data + b"\n" + data)
    for read in (lambda: load_scenario(scenario), lambda: read_trace(trace)):
        with contextlib.suppress(ScenarioError):  # anything else fails the test
            read()


def test_record_and_check_report_unusable_files_too(tmp_path: Path) -> None:
    folder, traces = tmp_path / "scenarios", tmp_path / "traces"
    copy_good(folder)
    good_traces(traces)
    (folder / "deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (traces / f"{GOOD[1]}.jsonl").write_bytes(b'{"type": ' + b"9" * 5000 + b"}\n")
    recorded = parity("record", str(folder))
    assert "Traceback" not in recorded.stderr and recorded.returncode == 1, recorded.stderr
    assert set(error_entries(recorded.stdout, "scenario")) == {str(folder / "deep.json")}
    assert {f"unchanged {name}" for name in GOOD} <= set(recorded.stdout.splitlines())
    checked = parity("check", str(folder), str(traces))
    assert "Traceback" not in checked.stderr and checked.returncode == 1, checked.stderr
    assert set(error_entries(checked.stdout, "trace")) == {str(traces / f"{GOOD[1]}.jsonl")}
    assert f"agreed         {GOOD[0]}" in checked.stdout.splitlines()

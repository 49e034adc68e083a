"""``python -m yiemagent.parity``: run the scenarios here, check another implementation's traces,
record expected outcomes, print the schemas. Exit status 0 only when everything passed."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from yiemagent.errors import describe_error

from ._compare import compare, render
from ._drive import IMPLEMENTATION, Outcome, run_scenario
from ._expectations import PortExpectations, load_expectations
from ._files import printable
from ._scenario import Scenario, ScenarioError, dump_scenario, find_scenarios, load_scenario, schema_text
from ._table import render_table, update_table
from ._traces import read_trace, write_trace
from ._verdicts import DIFFERS, HARNESS_ERROR, NOT_APPLICABLE, Verdict, check_trace, report, summary_line

__all__ = ["main"]

DEFAULT_SCENARIOS = Path("parity") / "scenarios"


def _indent(text: str, pad: str = "  ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def _files(paths: Sequence[str], out: TextIO) -> tuple[list[Path], int]:
    """The scenario files named by ``paths`` and how many paths could not be used: a path that
    does not exist, or a folder that cannot be listed, is reported and the others still count."""
    files: list[Path] = []
    bad = 0
    for raw in paths or [str(DEFAULT_SCENARIOS)]:
        try:
            files += find_scenarios([raw])
        except FileNotFoundError as exc:
            bad += 1
            print(f"ERROR {printable(str(exc))}", file=out)
        except OSError as exc:
            bad += 1
            print(f"ERROR {printable(raw)}: cannot list the folder: {exc.strerror or exc}", file=out)
    return files, bad


def _load_all(paths: Sequence[str], out: TextIO) -> tuple[list[Scenario], int]:
    """The scenarios named by ``paths`` and how many files could not be used (each reported as
    one ``ERROR <file>: not a usable scenario:`` entry; the good files are loaded all the same)."""
    files, bad = _files(paths, out)
    scenarios: list[Scenario] = []
    for file in files:
        try:
            scenarios.append(load_scenario(file))
        except ScenarioError as exc:
            bad += 1
            print(f"ERROR {exc}", file=out)
    return scenarios, bad


def _run(scenario: Scenario) -> Outcome:
    """``run_scenario``, with anything it raises (it should not: that would be a bug of the
    harness) turned into a problem of that scenario's run, so the other scenarios still run."""
    try:
        return run_scenario(scenario)
    except Exception as exc:
        return Outcome([], [], [], problems=[f"the harness raised {describe_error(exc)}"])


def _trace_folder(raw: str | None, out: TextIO) -> tuple[Path | None, int]:
    """The folder for ``--trace-dir`` (made if missing), or ``None`` with one error reported
    when it cannot be one (a file is there, no permission): the scenarios still run."""
    if raw is None:
        return None, 0
    folder = Path(raw)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "it is a file, not a folder" if folder.exists() else exc.strerror or str(exc)
        print(
            f"ERROR --trace-dir {printable(raw)}: cannot be used as the folder of traces: {why}; "
            "no traces are written",
            file=out,
        )
        return None, 1
    return folder, 0


def _save_trace(folder: Path, scenario: Scenario, outcome: Outcome, out: TextIO) -> int:
    """Write ``scenario``'s trace into ``folder``; 1 (reported) when it cannot be written."""
    path = folder / f"{scenario.name}.jsonl"
    try:
        write_trace(path, scenario.name, IMPLEMENTATION, outcome.expect(), outcome.problems, scenario.suite)
    except (OSError, ValueError) as exc:  # ValueError: text that is not UTF-8
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"ERROR {printable(str(path))}: cannot write the trace: {why}", file=out)
        return 1
    return 0


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    scenarios, failed = _load_all(args.paths, out)
    trace_dir, unusable = _trace_folder(args.trace_dir, out)
    failed += unusable
    passed = 0
    verdicts: list[Verdict] = []
    for scenario in scenarios:
        outcome = _run(scenario)
        if trace_dir is not None:
            failed += _save_trace(trace_dir, scenario, outcome, out)
        profile = tuple(scenario.profile)
        if outcome.problems:
            failed += 1
            verdicts.append(Verdict(scenario.name, HARNESS_ERROR, profile))
            print(f"FAIL {scenario.name} ({scenario.source}): the run itself went wrong:", file=out)
            print(_indent("\n".join(outcome.problems)), file=out)
            continue
        found = compare(scenario.expect, outcome.expect(), scenario)
        if found is None:
            passed += 1
            verdicts.append(Verdict(scenario.name, "agreed", profile))
            if args.verbose:
                print(f"pass {scenario.name}", file=out)
        else:
            failed += 1
            verdicts.append(Verdict(scenario.name, "diverged", profile))
            print(f"FAIL {scenario.name} ({scenario.source})", file=out)
            print(_indent(render(found, scenario.expect)), file=out)
    print(f"{passed} passed, {failed} failed", file=out)
    if args.report and not _write_report(args.report, verdicts, IMPLEMENTATION, scenarios, out):
        failed += 1
    return 0 if failed == 0 and passed > 0 else 1


def _write_report(
    path: str, verdicts: Sequence[Verdict], implementation: str, scenarios: Sequence[Scenario], out: TextIO
) -> bool:
    """Write the JSON report; ``False`` (reported) when it cannot be written."""
    suite = scenarios[0].suite if scenarios else "0.0.0"
    text = json.dumps(report(verdicts, implementation, suite), indent=1, ensure_ascii=False) + "\n"
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"ERROR {printable(path)}: cannot write the report: {exc.strerror or exc}", file=out)
        return False
    return True


def cmd_record(args: argparse.Namespace, out: TextIO) -> int:
    scenarios, failed = _load_all(args.paths, out)
    for scenario in scenarios:
        outcome = _run(scenario)
        if outcome.problems:
            failed += 1
            print(f"not recorded {scenario.name}: " + "; ".join(outcome.problems), file=out)
            continue
        data = dict(scenario.data)
        changed = data.get("expect") != outcome.expect()
        data["expect"] = outcome.expect()
        if scenario.path is not None and not _rewrite(scenario.path, dump_scenario(data), out):
            failed += 1
            continue
        print(f"{'recorded' if changed else 'unchanged'} {scenario.name}", file=out)
    return 0 if failed == 0 else 1


def _rewrite(path: Path, text: str, out: TextIO) -> bool:
    """Write ``text`` to ``path`` unless it already holds it; ``False`` (reported) when the file
    cannot be written."""
    try:
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    except (OSError, ValueError) as exc:  # ValueError: the file changed to text not UTF-8
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"ERROR {printable(str(path))}: cannot record the scenario: {why}", file=out)
        return False
    return True


def _pairs(scenario_arg: str, trace_arg: str, out: TextIO) -> tuple[list[tuple[Scenario, Path]], int]:
    """Each scenario named by ``scenario_arg`` with the path of its trace, and how many files
    could not be used; a folder of scenarios needs a folder of traces (else none is paired)."""
    scenarios, bad = _load_all([scenario_arg], out)
    trace_path = Path(trace_arg)
    if trace_path.is_dir():
        return [(s, trace_path / f"{s.name}.jsonl") for s in scenarios], bad
    if Path(scenario_arg).is_dir():
        what = "a file" if trace_path.exists() else "not there"
        print(
            f"ERROR {printable(trace_arg)}: {what}; with a folder of scenarios, give the folder "
            "of their traces (<scenario name>.jsonl files)",
            file=out,
        )
        return [], bad + 1
    return [(s, trace_path) for s in scenarios], bad


def _expectations(args: argparse.Namespace, out: TextIO) -> tuple[PortExpectations | None, int]:
    """The port's expectations file named by ``--expectations``, or ``None``; 1 (reported)
    when it cannot be used."""
    if not args.expectations:
        return None, 0
    try:
        return load_expectations(args.expectations), 0
    except ScenarioError as exc:
        print(f"ERROR {exc}", file=out)
        return None, 1


def _verdict_line(v: Verdict) -> str:
    extra = f" ({v.reason})" if v.reason and v.status in (DIFFERS, NOT_APPLICABLE) else ""
    return f"{v.status:14} {v.scenario}{extra}"


def _print_profiles(verdicts: Sequence[Verdict], implementation: str, suite: str, out: TextIO) -> None:
    data = report(verdicts, implementation, suite)
    print(f"suite {suite}, implementation {implementation}:", file=out)
    for profile, counts in data["profiles"].items():
        print(f"  {profile:20} {summary_line(counts)}", file=out)
    print(summary_line(data["totals"]), file=out)


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    pairs, bad = _pairs(args.scenario, args.trace, out)
    port, unusable = _expectations(args, out)
    bad += unusable
    verdicts: list[Verdict] = []
    implementation = ""
    for scenario, path in pairs:
        profile = tuple(scenario.profile)
        if not (path.exists() or path.is_symlink()):
            verdicts.append(
                Verdict(scenario.name, HARNESS_ERROR, profile, f"no trace at {printable(str(path))}")
            )
            continue
        try:
            trace = read_trace(path)
        except ScenarioError as exc:  # the trace, not the behaviour, is wrong: an error
            bad += 1
            print(f"ERROR {exc}", file=out)
            continue
        implementation = implementation or trace.implementation
        expected = port.for_version(trace.version) if port is not None else None
        if port is not None and (port.implementation != trace.name or expected is None):
            known = ", ".join(sorted(port.versions)) or "none"
            print(
                f"ERROR {printable(str(path))}: the expectations file is for {port.implementation} "
                f"({known}), the trace is of {printable(trace.implementation)}: add that version",
                file=out,
            )
            bad += 1
            continue
        verdicts.append(check_trace(scenario, trace, expected))
    for v in verdicts:
        print(_verdict_line(v), file=out)
        if v.detail:
            print(_indent(v.detail), file=out)
    suite = pairs[0][0].suite if pairs else "0.0.0"
    if verdicts:
        _print_profiles(verdicts, implementation or "?", suite, out)
    if bad:
        print(f"{bad} unusable files", file=out)
    if args.report and not _write_report(
        args.report, verdicts, implementation or "?", [s for s, _ in pairs], out
    ):
        bad += 1
    passed = all(v.passed for v in verdicts)
    return 0 if passed and bad == 0 and verdicts else 1


def cmd_table(args: argparse.Namespace, out: TextIO) -> int:
    reports = []
    for raw in args.reports:
        try:
            reports.append(json.loads(Path(raw).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            print(f"ERROR {printable(raw)}: not a usable report: {exc}", file=out)
            return 1
    table = render_table(reports)
    if args.update is None:
        print(table, file=out)
        return 0
    return update_table(Path(args.update), table, args.check, out)


def cmd_capture(args: argparse.Namespace, out: TextIO) -> int:
    """Draft a scenario from a cassette: written to ``--output`` (or printed), each note on an
    ``NOTE`` line; 1 when the cassette or the draft cannot be used."""
    # Imported here: the other commands do not read cassettes.
    from yiemagent.errors import CassetteError
    from yiemagent.testing._cassette import read_cassette

    from ._capture import capture_scenario, scenario_name

    # A scenario's name is its file's name: by default the one it is written to.
    name = args.name or scenario_name(args.output or args.cassette)
    if args.output and Path(args.output).stem != name:
        print(
            f"ERROR {printable(args.output)}: a scenario's file is named after it: write the "
            f"scenario {name!r} to {name}.json, or name it after the file with --name",
            file=out,
        )
        return 1
    try:
        capture = capture_scenario(read_cassette(args.cassette), name)
    except (CassetteError, ScenarioError, ValueError) as exc:
        print(f"ERROR {exc}", file=out)
        return 1
    text = dump_scenario(capture.data)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            why = exc.strerror or exc
            print(f"ERROR {printable(args.output)}: cannot write the scenario: {why}", file=out)
            return 1
        print(f"captured {capture.data['name']} to {printable(args.output)}", file=out)
    else:
        out.write(text)
    for note in capture.notes:
        print(f"NOTE {note}", file=out)
    return 0


def cmd_schema(args: argparse.Namespace, out: TextIO) -> int:
    names = [args.which] if args.which else ["scenario", "trace", "cassette"]
    for name in names:
        print(schema_text(name).rstrip(), file=out)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m yiemagent.parity",
        description="Conformance scenarios for the YiemAgent design (docs/PARITY.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run scenarios on yiemagent; print each failure's first divergence")
    run.add_argument("paths", nargs="*", help=f"scenario files or folders (default {DEFAULT_SCENARIOS})")
    run.add_argument("--trace-dir", help="also write each run's normalised trace here")
    run.add_argument("-v", "--verbose", action="store_true", help="list passing scenarios too")
    run.add_argument("--report", help="also write the JSON report (verdicts, counts per profile) here")
    run.set_defaults(handler=cmd_run)
    check = sub.add_parser("check", help="compare another implementation's traces with the scenarios")
    check.add_argument("scenario", help="a scenario file, or a folder of them")
    check.add_argument("trace", help="its trace file, or a folder of <scenario name>.jsonl files")
    check.add_argument(
        "--expectations", help="the port's expectations file (what it lacks, where it differs)"
    )
    check.add_argument("--report", help="also write the JSON report (verdicts, counts per profile) here")
    check.set_defaults(handler=cmd_check)
    table = sub.add_parser("table", help="the results table of several reports, as Markdown")
    table.add_argument("reports", nargs="+", help="JSON reports written by run --report or check --report")
    table.add_argument("--update", metavar="FILE", help="replace the table between the markers in FILE")
    table.add_argument("--check", action="store_true", help="with --update: exit 1 if FILE is not current")
    table.set_defaults(handler=cmd_table)
    record = sub.add_parser("record", help="rewrite the scenarios' expect from what yiemagent does now")
    record.add_argument("paths", nargs="*", help=f"scenario files or folders (default {DEFAULT_SCENARIOS})")
    record.set_defaults(handler=cmd_record)
    capture = sub.add_parser("capture", help="draft a scenario from a run recorded in a cassette")
    capture.add_argument("cassette", help="a cassette written by record() or yiemagent run --record")
    capture.add_argument("-o", "--output", help="write the scenario here (default: print it)")
    capture.add_argument(
        "--name", help="the scenario's name (default: the output file's name, else the cassette's)"
    )
    capture.set_defaults(handler=cmd_capture)
    schemas = sub.add_parser("schema", help="print the JSON Schemas of scenarios, traces and cassettes")
    schemas.add_argument("which", nargs="?", choices=["scenario", "trace", "cassette"])
    schemas.set_defaults(handler=cmd_schema)
    return parser


def _stdout() -> TextIO:
    """Standard output, set to escape what it cannot encode: a file name that is not UTF-8 is
    printed with ``\\x..`` escapes rather than stopping the command."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")
    return sys.stdout


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; return the exit status: 0 when everything passed, 1 when a
    scenario failed or a file could not be used (each reported as an ``ERROR`` line while the
    others still ran), 2 for a command line argparse refuses."""
    args = _parser().parse_args(argv)
    stream = out if out is not None else _stdout()
    status: int = args.handler(args, stream)
    return status

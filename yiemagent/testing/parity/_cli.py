"""``python -m yiemagent.parity``: run the scenarios here, check another implementation's traces,
record expected outcomes, print the schemas. Exit status 0 only when everything passed."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import attrs

from yiemagent.errors import describe_error

from ._compare import Divergence, compare, render
from ._departures import DepartureError, apply_departures, suggest
from ._drive import IMPLEMENTATION, Outcome, run_scenario
from ._files import printable
from ._scenario import Scenario, ScenarioError, dump_scenario, find_scenarios, load_scenario, schema_text
from ._traces import Trace, read_trace, write_trace

__all__ = ["Verdict", "check_trace", "main"]

DEFAULT_SCENARIOS = Path("parity") / "scenarios"
AGREED, DEPARTED, DIVERGED = "agreed", "departed", "diverged"
REORDERING = frozenset({"result_messages_inline", "turn_start_before_inputs"})


@attrs.frozen
class Verdict:
    """How one implementation's trace of one scenario compares: ``agreed`` with ``expect``,
    ``departed`` only as its declared departures say, or ``diverged`` (then ``detail`` is the
    readable first divergence)."""

    scenario: str
    status: str
    detail: str = ""
    reasons: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()


def _indent(text: str, pad: str = "  ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def check_trace(scenario: Scenario, trace: Trace, implementation: str | None = None) -> Verdict:
    """Compare ``trace`` with ``scenario``'s expected outcome, applying the departures declared
    for ``implementation`` (the trace's own name when ``None``) when they are needed."""
    name = implementation or trace.implementation
    if trace.scenario != scenario.name:
        return Verdict(scenario.name, DIVERGED, f"the trace is of scenario {trace.scenario!r}")
    expected = scenario.expect
    found = compare(expected, trace.expect(), scenario)
    departures = scenario.departures(name)
    if found is None:
        note = "declared departures did not happen" if departures else ""
        return Verdict(scenario.name, AGREED, note)
    if not departures:
        return Verdict(scenario.name, DIVERGED, render(found, expected))
    try:
        adjusted = apply_departures(expected, departures, scenario)
    except DepartureError as exc:
        return Verdict(scenario.name, DIVERGED, f"a declared departure does not apply: {exc}")
    later: Divergence | None = compare(adjusted, trace.expect(), scenario)
    reasons = tuple(dict.fromkeys(d["reason"] for d in departures))
    rules = tuple(dict.fromkeys(d["rule"] for d in departures))
    if later is None:
        return Verdict(scenario.name, DEPARTED, "", reasons, rules)
    return Verdict(
        scenario.name, DIVERGED, "after the declared departures:\n" + render(later, adjusted), reasons, rules
    )


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
        write_trace(path, scenario.name, IMPLEMENTATION, outcome.expect())
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
    for scenario in scenarios:
        outcome = _run(scenario)
        if trace_dir is not None:
            failed += _save_trace(trace_dir, scenario, outcome, out)
        if outcome.problems:
            failed += 1
            print(f"FAIL {scenario.name} ({scenario.source}): the run itself went wrong:", file=out)
            print(_indent("\n".join(outcome.problems)), file=out)
            continue
        found = compare(scenario.expect, outcome.expect(), scenario)
        if found is None:
            passed += 1
            if args.verbose:
                print(f"pass {scenario.name}", file=out)
        else:
            failed += 1
            print(f"FAIL {scenario.name} ({scenario.source})", file=out)
            print(_indent(render(found, scenario.expect)), file=out)
    print(f"{passed} passed, {failed} failed", file=out)
    return 0 if failed == 0 and passed > 0 else 1


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


def _implementation(trace: Trace) -> str:
    """The trace header's implementation name, without any version after it."""
    words = trace.implementation.split()
    return words[0] if words else trace.implementation


def _markdown(verdicts: Sequence[Verdict], implementation: str) -> str:
    """The results as a Markdown table; each distinct departure reason is listed once, below it,
    and the table names reasons by label (D1, D2, ...)."""
    counts = {s: sum(v.status == s for v in verdicts) for s in (AGREED, DEPARTED, DIVERGED)}
    order_only = sum(v.status == DEPARTED and set(v.rules) <= REORDERING for v in verdicts)
    labels: dict[str, str] = {}
    for v in verdicts:
        for reason in v.reasons:
            labels.setdefault(reason, f"D{len(labels) + 1}")
    lines = [
        f"{counts[AGREED]} agreed, {counts[DEPARTED]} departed as documented ({order_only} of "
        "them by the event-order rules alone), "
        f"{counts[DIVERGED]} diverged: {len(verdicts)} scenarios, implementation "
        f"`{implementation}`.",
        "",
        "| scenario | result | departures |",
        "|---|---|---|",
    ]
    for v in verdicts:
        marks = ", ".join(labels[r] for r in v.reasons) if v.status != AGREED else ""
        lines.append(f"| `{v.scenario}` | {v.status} | {marks} |")
    lines.append("")
    lines += [f"- **{label}**: {reason}" for reason, label in labels.items()]
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    pairs, bad = _pairs(args.scenario, args.trace, out)
    verdicts: list[Verdict] = []
    name = args.impl
    for scenario, path in pairs:
        if not (path.exists() or path.is_symlink()):
            verdicts.append(Verdict(scenario.name, DIVERGED, f"no trace at {printable(str(path))}"))
            continue
        try:
            trace = read_trace(path)
        except ScenarioError as exc:  # the trace, not the behaviour, is wrong: an error
            bad += 1
            print(f"ERROR {exc}", file=out)
            continue
        name = name or _implementation(trace)
        verdict = check_trace(scenario, trace, args.impl)
        verdicts.append(verdict)
        if args.suggest and verdict.status == DIVERGED:
            base = scenario.expect
            departures = scenario.departures(args.impl or trace.implementation)
            with contextlib.suppress(DepartureError):  # then suggest against expect itself
                base = apply_departures(base, departures, scenario)
            proposal = {"rule": "edit", "reason": "TODO: why", "edits": suggest(base, trace.expect())}
            print("a departure that would describe it (write the reason, or split it by reason):", file=out)
            print(_indent(json.dumps(proposal, ensure_ascii=False)), file=out)
    if args.markdown:
        print(_markdown(verdicts, name or "?"), file=out)
    else:
        for v in verdicts:
            extra = f" ({'; '.join(v.reasons)})" if v.reasons and v.status == DEPARTED else ""
            print(f"{v.status:9} {v.scenario}{extra}", file=out)
            if v.detail:
                print(_indent(v.detail), file=out)
        counts = [sum(v.status == s for v in verdicts) for s in (AGREED, DEPARTED, DIVERGED)]
        errors = f", {bad} unusable files" if bad else ""
        print(
            f"{counts[0]} agreed, {counts[1]} departed as documented, {counts[2]} diverged{errors}", file=out
        )
    diverged = any(v.status == DIVERGED for v in verdicts)
    return 0 if not diverged and bad == 0 and verdicts else 1


def cmd_schema(args: argparse.Namespace, out: TextIO) -> int:
    names = [args.which] if args.which else ["scenario", "trace"]
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
    run.set_defaults(handler=cmd_run)
    check = sub.add_parser("check", help="compare another implementation's traces with the scenarios")
    check.add_argument("scenario", help="a scenario file, or a folder of them")
    check.add_argument("trace", help="its trace file, or a folder of <scenario name>.jsonl files")
    check.add_argument("--impl", help="whose departures apply (default: the trace header's name)")
    check.add_argument("--markdown", action="store_true", help="print the results as a table")
    check.add_argument(
        "--suggest", action="store_true", help="for each divergence, print departures that would describe it"
    )
    check.set_defaults(handler=cmd_check)
    record = sub.add_parser("record", help="rewrite the scenarios' expect from what yiemagent does now")
    record.add_argument("paths", nargs="*", help=f"scenario files or folders (default {DEFAULT_SCENARIOS})")
    record.set_defaults(handler=cmd_record)
    schemas = sub.add_parser("schema", help="print the JSON Schemas of scenarios and traces")
    schemas.add_argument("which", nargs="?", choices=["scenario", "trace"])
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

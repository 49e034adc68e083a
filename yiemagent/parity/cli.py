"""``python -m yiemagent.parity``: run the scenarios here, check another implementation's traces,
record expected outcomes, print the schemas. Exit status 0 only when everything passed."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import attrs

from .compare import Divergence, compare, render
from .departures import DepartureError, apply_departures, suggest
from .drive import IMPLEMENTATION, run_scenario
from .scenario import Scenario, ScenarioError, dump_scenario, find_scenarios, load_scenario, schema_text
from .traces import Trace, read_trace, write_trace

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
    return Verdict(scenario.name, DIVERGED,
                   "after the declared departures:\n" + render(later, adjusted), reasons, rules)


def _load_all(paths: Sequence[str], out: TextIO) -> tuple[list[Scenario], int]:
    """The scenarios named by ``paths`` and how many files could not be used (reported)."""
    scenarios: list[Scenario] = []
    bad = 0
    for file in find_scenarios(paths or [str(DEFAULT_SCENARIOS)]):
        try:
            scenarios.append(load_scenario(file))
        except ScenarioError as exc:
            bad += 1
            print(f"ERROR {exc}", file=out)
    return scenarios, bad


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    scenarios, failed = _load_all(args.paths, out)
    trace_dir = Path(args.trace_dir) if args.trace_dir else None
    if trace_dir is not None:
        trace_dir.mkdir(parents=True, exist_ok=True)
    passed = 0
    for scenario in scenarios:
        outcome = run_scenario(scenario)
        if trace_dir is not None:
            write_trace(trace_dir / f"{scenario.name}.jsonl", scenario.name, IMPLEMENTATION,
                        outcome.expect())
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
        outcome = run_scenario(scenario)
        if outcome.problems:
            failed += 1
            print(f"not recorded {scenario.name}: " + "; ".join(outcome.problems), file=out)
            continue
        data = dict(scenario.data)
        changed = data.get("expect") != outcome.expect()
        data["expect"] = outcome.expect()
        text = dump_scenario(data)
        if scenario.path is not None and scenario.path.read_text(encoding="utf-8") != text:
            scenario.path.write_text(text, encoding="utf-8")
        print(f"{'recorded' if changed else 'unchanged'} {scenario.name}", file=out)
    return 0 if failed == 0 else 1


def _pairs(scenario_arg: str, trace_arg: str, out: TextIO) -> tuple[list[tuple[Scenario, Path]], int]:
    scenarios, bad = _load_all([scenario_arg], out)
    trace_path = Path(trace_arg)
    if Path(scenario_arg).is_dir() or trace_path.is_dir():
        return [(s, trace_path / f"{s.name}.jsonl") for s in scenarios], bad
    return [(s, trace_path) for s in scenarios], bad


def _markdown(verdicts: Sequence[Verdict], implementation: str) -> str:
    """The results as a Markdown table; each distinct departure reason is listed once, below it,
    and the table names reasons by label (D1, D2, ...)."""
    counts = {s: sum(v.status == s for v in verdicts) for s in (AGREED, DEPARTED, DIVERGED)}
    order_only = sum(v.status == DEPARTED and set(v.rules) <= REORDERING for v in verdicts)
    labels: dict[str, str] = {}
    for v in verdicts:
        for reason in v.reasons:
            labels.setdefault(reason, f"D{len(labels) + 1}")
    lines = [f"{counts[AGREED]} agreed, {counts[DEPARTED]} departed as documented ({order_only} of "
             "them by the event-order rules alone), "
             f"{counts[DIVERGED]} diverged: {len(verdicts)} scenarios, implementation "
             f"`{implementation}`.", "", "| scenario | result | departures |", "|---|---|---|"]
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
        if not path.exists():
            verdicts.append(Verdict(scenario.name, DIVERGED, f"no trace at {path}"))
            continue
        try:
            trace = read_trace(path)
        except ScenarioError as exc:
            verdicts.append(Verdict(scenario.name, DIVERGED, str(exc)))
            continue
        name = name or trace.implementation.split()[0]
        verdict = check_trace(scenario, trace, args.impl)
        verdicts.append(verdict)
        if args.suggest and verdict.status == DIVERGED:
            base = scenario.expect
            departures = scenario.departures(args.impl or trace.implementation)
            with contextlib.suppress(DepartureError):  # then suggest against expect itself
                base = apply_departures(base, departures, scenario)
            proposal = {"rule": "edit", "reason": "TODO: why", "edits": suggest(base, trace.expect())}
            print("a departure that would describe it (write the reason, or split it by reason):",
                  file=out)
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
        print(f"{counts[0]} agreed, {counts[1]} departed as documented, {counts[2]} diverged",
              file=out)
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
        description="Conformance scenarios for the YiemAgent design (docs/PARITY.md).")
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
    check.add_argument("--suggest", action="store_true",
                       help="for each divergence, print departures that would describe it")
    check.set_defaults(handler=cmd_check)
    record = sub.add_parser("record", help="rewrite the scenarios' expect from what yiemagent does now")
    record.add_argument("paths", nargs="*", help=f"scenario files or folders (default {DEFAULT_SCENARIOS})")
    record.set_defaults(handler=cmd_record)
    schemas = sub.add_parser("schema", help="print the JSON Schemas of scenarios and traces")
    schemas.add_argument("which", nargs="?", choices=["scenario", "trace"])
    schemas.set_defaults(handler=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; return the exit status."""
    args = _parser().parse_args(argv)
    stream = out if out is not None else sys.stdout
    try:
        status: int = args.handler(args, stream)
    except FileNotFoundError as exc:
        print(f"ERROR {exc}", file=stream)
        return 2
    return status

"""Trace files: the JSON Lines form of a normalised outcome, written by any implementation and
read back here, checked line by line against the shipped trace schema."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._files import FileProblem, parse_json, read_text
from ._scenario import FORMAT, ScenarioError, json_path, suite_version, validation_problems

__all__ = ["Trace", "read_trace", "trace_lines", "write_trace"]


@attrs.frozen
class Trace:
    """A trace file's content: which scenario and implementation, and the normalised outcome."""

    scenario: str
    implementation: str
    events: list[dict[str, Any]]
    responses: list[dict[str, Any]]
    history: list[dict[str, Any]]
    requests: list[dict[str, Any]] = attrs.field(factory=list)
    hooks: list[dict[str, Any]] = attrs.field(factory=list)
    suite: str = ""
    problems: list[str] = attrs.field(factory=list)

    def expect(self) -> dict[str, list[dict[str, Any]]]:
        """The outcome in the shape of a scenario's ``expect`` section."""
        return {
            "events": self.events,
            "requests": self.requests,
            "hooks": self.hooks,
            "responses": self.responses,
            "history": self.history,
        }

    @property
    def name(self) -> str:
        """The implementation's name, without the version after it."""
        words = self.implementation.split()
        return words[0] if words else self.implementation

    @property
    def version(self) -> str:
        """The implementation's version from the header (``""`` when it gives none)."""
        words = self.implementation.split()
        return words[1] if len(words) > 1 else ""


def trace_lines(
    scenario: str,
    implementation: str,
    outcome: Mapping[str, Sequence[Mapping[str, Any]]],
    suite: str = "",
    problems: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The lines of a trace: header, events (with the requests and hook calls after them),
    responses, history."""
    header: dict[str, Any] = {
        "type": "trace",
        "format": FORMAT,
        "suite": suite or suite_version(),
        "scenario": scenario,
        "implementation": implementation,
    }
    if problems:
        header["problems"] = list(problems)
    lines: list[dict[str, Any]] = [header]
    lines += [dict(e) for e in outcome["events"]]
    lines += [dict(r) for r in outcome.get("requests", [])]
    lines += [dict(h) for h in outcome.get("hooks", [])]
    lines += [{"type": "response", "message": dict(m)} for m in outcome["responses"]]
    lines += [{"type": "history", "message": dict(m)} for m in outcome["history"]]
    return lines


def write_trace(
    path: str | Path,
    scenario: str,
    implementation: str,
    outcome: Mapping[str, Sequence[Mapping[str, Any]]],
    problems: Sequence[str] = (),
    suite: str = "",
) -> None:
    """Write a trace file (UTF-8, one compact JSON object per line); ``problems`` are the
    harness's, ``suite`` the version of the scenarios it ran."""
    text = "".join(
        json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
        for line in trace_lines(scenario, implementation, outcome, suite, problems)
    )
    Path(path).write_text(text, encoding="utf-8")


_ORDER = {"trace": 0, "event": 1, "response": 2, "history": 3}


def read_trace(path: str | Path) -> Trace:
    """Read and check a trace file; raises ``ScenarioError`` naming the file, and for each bad
    line its number and the JSON path of the bad field (``line 4: $.error_kind``)."""
    file = Path(path)
    try:
        # Lines end at "\n" only: a JSON string may hold U+2028 or "\x1c" unescaped, which
        # str.splitlines would also split at.
        raw_lines = read_text(file).split("\n")
    except FileProblem as exc:
        raise ScenarioError(str(file), [(exc.where, str(exc))], "trace") from None
    problems: list[tuple[str, str]] = []
    records: list[dict[str, Any]] = []
    stage = -1
    for number, text in enumerate(raw_lines, 1):
        if not text.strip():
            continue
        where = f"line {number}"
        try:
            record = parse_json(text, one_line=True)
        except FileProblem as exc:
            problems.append((where if exc.where == "$" else f"{where}: {exc.where}", str(exc)))
            continue
        found = validation_problems(record, "trace")
        if found:
            problems += [(f"{where}: {p}", m) for p, m in found]
            continue
        kind = record["type"]
        order = _ORDER.get(kind, 1)
        if (stage == -1) != (order == 0) or order < stage:
            problems.append(
                (
                    f"{where}: {json_path(['type'])}",
                    f"{kind!r} out of place: the header comes first, then events, "
                    "responses and history lines, in that order",
                )
            )
        stage = max(stage, order)
        records.append(record)
    if not records and not problems:
        problems.append(("line 1", "the trace is empty"))
    if problems:
        raise ScenarioError(str(file), problems, "trace")
    header = records[0]
    body = records[1:]
    return Trace(
        scenario=header["scenario"],
        implementation=header["implementation"],
        events=[r for r in body if r["type"] not in ("response", "history", "llm_request", "hook")],
        responses=[r["message"] for r in body if r["type"] == "response"],
        history=[r["message"] for r in body if r["type"] == "history"],
        requests=[r for r in body if r["type"] == "llm_request"],
        hooks=[r for r in body if r["type"] == "hook"],
        suite=header["suite"],
        problems=list(header.get("problems", [])),
    )

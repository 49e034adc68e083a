"""Trace files: the JSON Lines form of a normalised outcome, written by any implementation and
read back here, checked line by line against the shipped trace schema."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._files import FileProblem, parse_json, read_text
from ._scenario import FORMAT, ScenarioError, json_path, validation_problems

__all__ = ["Trace", "read_trace", "trace_lines", "write_trace"]


@attrs.frozen
class Trace:
    """A trace file's content: which scenario and implementation, and the normalised outcome."""

    scenario: str
    implementation: str
    events: list[dict[str, Any]]
    responses: list[dict[str, Any]]
    history: list[dict[str, Any]]

    def expect(self) -> dict[str, list[dict[str, Any]]]:
        """The outcome in the shape of a scenario's ``expect`` section."""
        return {"events": self.events, "responses": self.responses, "history": self.history}


def trace_lines(
    scenario: str, implementation: str, outcome: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """The lines of a trace: header, events, responses, history."""
    lines: list[dict[str, Any]] = [
        {"type": "trace", "format": FORMAT, "scenario": scenario, "implementation": implementation}
    ]
    lines += [dict(e) for e in outcome["events"]]
    lines += [{"type": "response", "message": dict(m)} for m in outcome["responses"]]
    lines += [{"type": "history", "message": dict(m)} for m in outcome["history"]]
    return lines


def write_trace(
    path: str | Path, scenario: str, implementation: str, outcome: Mapping[str, Sequence[Mapping[str, Any]]]
) -> None:
    """Write a trace file (UTF-8, one compact JSON object per line)."""
    text = "".join(
        json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
        for line in trace_lines(scenario, implementation, outcome)
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
    return Trace(
        scenario=header["scenario"],
        implementation=header["implementation"],
        events=[r for r in records[1:] if r["type"] not in ("response", "history")],
        responses=[r["message"] for r in records if r["type"] == "response"],
        history=[r["message"] for r in records if r["type"] == "history"],
    )

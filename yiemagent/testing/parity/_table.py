"""The results table: every implementation and version against every profile, as Markdown, made
from the JSON reports of ``run --report`` and ``check --report`` and kept in docs/PARITY.md
between two markers, so the page can be checked for being current."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ._files import printable

__all__ = ["BEGIN", "END", "render_table", "update_table"]

BEGIN = "<!-- parity-table: begin (python -m yiemagent.parity table --update) -->"
END = "<!-- parity-table: end -->"


def _cell(counts: Mapping[str, int] | None) -> str:
    """``12/14`` agreed of those run, with the other statuses after it."""
    if not counts:
        return "–"
    total = sum(counts.values())
    parts = [f"{counts.get('agreed', 0)}/{total}"]
    for status, short in (
        ("differs", "differs"),
        ("not_applicable", "n/a"),
        ("diverged", "diverged"),
        ("stale", "stale"),
        ("harness_error", "harness errors"),
    ):
        if counts.get(status):
            parts.append(f"{counts[status]} {short}")
    return parts[0] + (f" ({', '.join(parts[1:])})" if len(parts) > 1 else "")


def render_table(reports: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table: a row per report (implementation and version, suite), a column per
    profile, each cell ``agreed/total`` and the other statuses."""
    profiles: list[str] = []
    for data in reports:
        profiles += [p for p in data["profiles"] if p not in profiles]
    profiles.sort(key=lambda p: (p != "core", p))
    head = "| implementation | suite | " + " | ".join(f"`{p}`" for p in profiles) + " |"
    lines = [head, "|" + "---|" * (len(profiles) + 2)]
    for data in reports:
        cells = [_cell(data["profiles"].get(p)) for p in profiles]
        lines.append(f"| {data['implementation']} | {data['suite']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def update_table(path: Path, table: str, check_only: bool, out: TextIO) -> int:
    """Put ``table`` between the markers of ``path`` (or, with ``check_only``, say whether it
    is there already); 0 when the file is (now) current, 1 otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"ERROR {printable(str(path))}: {exc.strerror or exc}", file=out)
        return 1
    if BEGIN not in text or END not in text:
        print(f"ERROR {printable(str(path))}: no table markers ({BEGIN} ... {END})", file=out)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{table}\n{END}{tail}"
    if new == text:
        print(f"{path}: the table is current", file=out)
        return 0
    if check_only:
        print(f"{path}: the table is not current; run python -m yiemagent.parity table --update", file=out)
        return 1
    path.write_text(new, encoding="utf-8")
    print(f"{path}: table updated", file=out)
    return 0

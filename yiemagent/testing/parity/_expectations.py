"""A port's own expectations: what it lacks and where it knowingly differs, per version.

A port keeps one JSON file (``parity/ports/pi/expectations.json`` for pi), checked against the
shipped ``expectations.schema.json``. For each version of the implementation it says whether the
implementation makes error kinds, which extensions (profiles other than ``core``) it lacks, each
with its reason, and for single scenarios a ``differs`` entry: the reason and a few assertions of
what the implementation does instead. An assertion names a part of the trace, an item it looks
for by a subset of its fields (``match``) and how many such items there are (``count``, or at
least ``min``): never a position, so an entry says what the port does, not where.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import jsonschema

from ._files import FileProblem, parse_json, read_text
from ._normalise import canonical_json
from ._scenario import ScenarioError, json_path

__all__ = ["Assertion", "PortExpectations", "failed_assertions", "load_expectations", "matches"]


@functools.cache
def _schema() -> dict[str, Any]:
    folder = resources.files("yiemagent.testing.parity") / "schemas"
    data: dict[str, Any] = json.loads((folder / "expectations.schema.json").read_text(encoding="utf-8"))
    return data


def matches(item: Any, pattern: Any) -> bool:
    """Whether ``item`` has ``pattern``: an object has every field of the pattern's (each
    matching), a list has as many items as the pattern's, each matching, anything else is equal."""
    if isinstance(pattern, Mapping):
        return isinstance(item, Mapping) and all(
            k in item and matches(item[k], v) for k, v in pattern.items()
        )
    if isinstance(pattern, list):
        return (
            isinstance(item, list)
            and len(item) == len(pattern)
            and all(matches(a, b) for a, b in zip(item, pattern, strict=True))
        )
    if isinstance(item, bool) or isinstance(pattern, bool):  # true is not 1
        return item is pattern
    return bool(item == pattern and type(item) is type(pattern)) or (
        isinstance(item, (int, float)) and isinstance(pattern, (int, float)) and item == pattern
    )


Assertion = Mapping[str, Any]


def _describe(assertion: Assertion, found: int) -> str:
    want = f"at least {assertion['min']}" if "min" in assertion else f"exactly {assertion['count']}"
    return f"{assertion['part']}: {want} item(s) matching {canonical_json(assertion['match'])}, found {found}"


def failed_assertions(assertions: Sequence[Assertion], outcome: Mapping[str, Sequence[Any]]) -> list[str]:
    """The assertions ``outcome`` breaks, each described (which part, what, how many found)."""
    failed: list[str] = []
    for assertion in assertions:
        found = sum(matches(item, assertion["match"]) for item in outcome[assertion["part"]])
        ok = found >= assertion["min"] if "min" in assertion else found == assertion["count"]
        if not ok:
            failed.append(_describe(assertion, found))
    return failed


@attrs.frozen
class VersionExpectations:
    """What a port expects of one version of its implementation."""

    version: str
    error_kinds: bool
    lacks: Mapping[str, str]
    differs: Mapping[str, Mapping[str, Any]]


@attrs.frozen
class PortExpectations:
    """A port's expectations file: its implementation's name and the entries per version."""

    implementation: str
    versions: Mapping[str, VersionExpectations]
    path: Path | None = None

    def for_version(self, version: str) -> VersionExpectations | None:
        """The entries for ``version`` exactly, or ``None`` when the file has none."""
        return self.versions.get(version)


def _version(version: str, data: Mapping[str, Any]) -> VersionExpectations:
    return VersionExpectations(
        version=version,
        error_kinds=bool(data.get("error_kinds", True)),
        lacks=dict(data.get("lacks", {})),
        differs=dict(data.get("differs", {})),
    )


def parse_expectations(data: Any, source: str) -> PortExpectations:
    """Check ``data`` against the expectations schema; raise ``ScenarioError`` naming ``source``
    and the JSON path of every bad field."""
    validator = jsonschema.Draft202012Validator(_schema())
    problems = sorted({(json_path(e.absolute_path), e.message[:300]) for e in validator.iter_errors(data)})
    if problems:
        raise ScenarioError(source, problems, "expectations file")
    versions = {v: _version(v, entry) for v, entry in data["versions"].items()}
    return PortExpectations(implementation=data["implementation"], versions=versions)


def load_expectations(path: str | Path) -> PortExpectations:
    """Read and check a port's expectations file; ``ScenarioError`` names the file and what is
    wrong for anything that makes it unusable."""
    file = Path(path)
    try:
        data = parse_json(read_text(file))
    except FileProblem as exc:
        raise ScenarioError(str(file), [(exc.where, str(exc))], "expectations file") from None
    return attrs.evolve(parse_expectations(data, str(file)), path=file)

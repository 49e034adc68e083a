"""Verdicts: how one implementation's trace of one scenario stands, and the report over a suite.

``agreed`` (the trace compares equal), ``differs`` (it does not, as the port's expectations
declare, and their assertions hold), ``not_applicable`` (the scenario needs an extension the
port declares it lacks), ``diverged`` (it differs and nothing declares it), ``stale`` (the port
declares a difference for a scenario that now agrees) and ``harness_error`` (the runner could
not drive the scenario, so its trace is no evidence). Only the first three pass ``check``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._compare import Rules, compare, render
from ._expectations import VersionExpectations, failed_assertions
from ._scenario import Scenario
from ._traces import Trace

__all__ = [
    "AGREED",
    "DIFFERS",
    "DIVERGED",
    "HARNESS_ERROR",
    "NOT_APPLICABLE",
    "PASSING",
    "STALE",
    "STATUSES",
    "Verdict",
    "check_trace",
    "profile_counts",
    "report",
]

AGREED, DIFFERS, NOT_APPLICABLE = "agreed", "differs", "not_applicable"
DIVERGED, STALE, HARNESS_ERROR = "diverged", "stale", "harness_error"
STATUSES = (AGREED, DIFFERS, NOT_APPLICABLE, DIVERGED, STALE, HARNESS_ERROR)
PASSING = frozenset({AGREED, DIFFERS, NOT_APPLICABLE})


@attrs.frozen
class Verdict:
    """One scenario's verdict for one implementation: ``status``, the scenario's ``profile``,
    a readable ``detail`` (the first divergence, the failed assertions, the harness problems)
    and the ``reason`` the port gave for a ``differs`` or ``not_applicable``."""

    scenario: str
    status: str
    profile: tuple[str, ...] = ("core",)
    detail: str = ""
    reason: str = ""

    @property
    def passed(self) -> bool:
        return self.status in PASSING


def _major(version: str) -> str:
    return version.split(".")[0]


def check_trace(scenario: Scenario, trace: Trace, port: VersionExpectations | None = None) -> Verdict:
    """The verdict on ``trace`` for ``scenario``, given the port's expectations for the trace's
    version (``None``: the implementation declares nothing, as yiemagent itself)."""
    profile = tuple(scenario.profile)

    def verdict(status: str, detail: str = "", reason: str = "") -> Verdict:
        return Verdict(scenario.name, status, profile, detail, reason)

    if trace.scenario != scenario.name:
        return verdict(HARNESS_ERROR, f"the trace is of scenario {trace.scenario!r}")
    if _major(trace.suite) != _major(scenario.suite):
        return verdict(
            HARNESS_ERROR,
            f"the trace was made from suite {trace.suite}, the scenario is of suite {scenario.suite}: "
            "run the port on this suite's scenarios",
        )
    rules = Rules.of(scenario, error_kinds=port.error_kinds if port is not None else True)
    found = None if trace.problems else compare(scenario.expect, trace.expect(), scenario, rules)
    lacked = [p for p in profile if port is not None and p in port.lacks]
    if lacked and (found is not None or trace.problems):
        return verdict(NOT_APPLICABLE, reason="; ".join(f"{p}: {port.lacks[p]}" for p in lacked if port))
    if trace.problems:
        return verdict(
            HARNESS_ERROR, "the runner failed to drive the scenario:\n" + "\n".join(trace.problems)
        )
    entry = port.differs.get(scenario.name) if port is not None else None
    if found is None:
        if entry is not None:
            return verdict(STALE, "the port declares a difference, but the trace agrees: remove the entry")
        return verdict(AGREED)
    diff = render(found, scenario.expect, rules=rules)
    if entry is None:
        return verdict(DIVERGED, diff)
    failed = failed_assertions(entry["assert"], trace.expect())
    if failed:
        detail = "the declared difference does not hold:\n" + "\n".join(f"  {f}" for f in failed)
        return verdict(DIVERGED, detail + "\n" + diff, entry["reason"])
    return verdict(DIFFERS, reason=entry["reason"])


def profile_counts(verdicts: Sequence[Verdict]) -> dict[str, dict[str, int]]:
    """Per profile (a scenario counts under each of its profiles), the count of each status."""
    counts: dict[str, dict[str, int]] = {}
    for v in verdicts:
        for profile in v.profile:
            row = counts.setdefault(profile, dict.fromkeys(STATUSES, 0))
            row[v.status] += 1
    return dict(sorted(counts.items(), key=lambda kv: (kv[0] != "core", kv[0])))


def report(verdicts: Sequence[Verdict], implementation: str, suite: str) -> dict[str, Any]:
    """The JSON report of one implementation over a suite: totals, counts per profile, and
    each scenario's verdict with its reason."""
    totals = dict.fromkeys(STATUSES, 0)
    for v in verdicts:
        totals[v.status] += 1
    return {
        "suite": suite,
        "implementation": implementation,
        "totals": totals,
        "profiles": profile_counts(verdicts),
        "scenarios": {
            v.scenario: {"status": v.status, **({"reason": v.reason} if v.reason else {})} for v in verdicts
        },
    }


def summary_line(counts: Mapping[str, int]) -> str:
    """``"120 agreed, 3 differs, ..."``: the statuses that occur, in a fixed order."""
    shown = [f"{counts.get(s, 0)} {s}" for s in STATUSES if counts.get(s, 0) or s in (AGREED, DIVERGED)]
    return ", ".join(shown)

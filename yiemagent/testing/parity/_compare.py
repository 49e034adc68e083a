"""Comparing a normalised outcome with the expected one, and saying where they first differ.

Events are compared position by position, except inside a parallel section (the tool events of
a batch that runs in parallel): there the starts keep their order, the calls that fail
preparation end before the last start, and each call's own events keep their order, but events
of different calls may interleave in any order. Responses and the history are compared item by
item. ``text`` is not compared in an error result the pipeline made (``is_error`` with an
``error_kind``): those texts are each implementation's own wording, the kind is what must agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._normalise import canonical_json
from ._scenario import Scenario

__all__ = ["Divergence", "comparable", "compare", "parallel_sections", "render"]

Outcome = Mapping[str, Sequence[Mapping[str, Any]]]


@attrs.frozen
class Divergence:
    """The first place where ``actual`` differs from ``expected``: in ``part`` (events,
    responses or history), at ``index`` of the expected list (its length for an extra item),
    with the two items (``None`` when one side has none there) and a note for the reader."""

    part: str
    index: int
    expected: Mapping[str, Any] | None
    actual: Mapping[str, Any] | None
    note: str = ""


def comparable(item: Mapping[str, Any]) -> dict[str, Any]:
    """``item`` as it is compared: without the ``text`` of an error result the pipeline made
    (``is_error`` true and an ``error_kind``), and the same for a message inside it."""
    out = dict(item)
    if out.get("error_kind") is not None and out.get("is_error") is True:
        out.pop("text", None)
    if isinstance(out.get("message"), Mapping):
        out["message"] = comparable(out["message"])
    return out


def _batch_is_parallel(scenario: Scenario, calls: Sequence[Mapping[str, Any]]) -> bool:
    """Spec section 9: parallel mode, and no call names a known tool that is not parallel."""
    if scenario.setting("execution") != "parallel":
        return False
    return all(scenario.tool_is_parallel(str(c.get("name"))) is not False for c in calls)


def _initial_calls(scenario: Scenario) -> list[dict[str, Any]]:
    assistants = [m for m in scenario.history if m.get("role") == "assistant"]
    return list(assistants[-1]["tool_calls"]) if assistants else []


def parallel_sections(events: Sequence[Mapping[str, Any]], scenario: Scenario) -> list[tuple[int, int]]:
    """``(start, end)`` index ranges (end exclusive) of the runs of tool events that belong to a
    batch run in parallel: the batch of the latest assistant reply (at first, of the history's
    last one, whose unanswered calls a resume runs)."""
    sections: list[tuple[int, int]] = []
    calls = _initial_calls(scenario)
    i = 0
    while i < len(events):
        event = events[i]
        message = event.get("message")
        if (
            event["type"] == "message_end"
            and isinstance(message, Mapping)
            and message.get("role") == "assistant"
        ):
            calls = list(message.get("tool_calls", []))
        if event["type"].startswith("tool_execution_") and _batch_is_parallel(scenario, calls):
            j = i
            while j < len(events) and events[j]["type"].startswith("tool_execution_"):
                j += 1
            sections.append((i, j))
            i = j
            continue
        i += 1
    return sections


def _groups(events: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        groups.setdefault(str(event.get("tool_call_id")), []).append(comparable(event))
    return groups


def _starts(events: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(e.get("tool_call_id")) for e in events if e["type"] == "tool_execution_start"]


def _ended_during_preparation(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The calls whose end comes before the section's last start: only preparation failures
    can, since execution begins once every call of the batch is prepared."""
    last = max((i for i, e in enumerate(events) if e["type"] == "tool_execution_start"), default=-1)
    return [str(e.get("tool_call_id")) for e in events[:last] if e["type"] == "tool_execution_end"]


def _compare_section(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]], start: int
) -> Divergence | None:
    """The parallel-section rule: the starts keep their order, the same calls end before the last
    start, each call's own events keep their order; anything else may interleave."""
    where = f"in the parallel section events[{start}..{start + len(expected) - 1}]"
    want_starts, got_starts = _starts(expected), _starts(actual)
    if want_starts != got_starts:
        n = next(
            (k for k, (a, b) in enumerate(zip(want_starts, got_starts, strict=False)) if a != b),
            min(len(want_starts), len(got_starts)),
        )
        want = _original(expected, want_starts[n], 0) if n < len(want_starts) else None
        got = _original(actual, got_starts[n], 0) if n < len(got_starts) else None
        offset = _nth_of(expected, want_starts[n], 0) if n < len(want_starts) else len(expected)
        return Divergence(
            "events", start + offset, want, got, f"{where}, start {n + 1} differs (calls start in call order)"
        )
    want_prep, got_prep = _ended_during_preparation(expected), _ended_during_preparation(actual)
    if want_prep != got_prep:
        # Show where the two orders part: the first position that differs up to the last start.
        p = next(
            (
                k
                for k in range(max(len(expected), len(actual)))
                if k >= len(expected) or k >= len(actual) or comparable(expected[k]) != comparable(actual[k])
            ),
            0,
        )
        return Divergence(
            "events",
            start + p,
            expected[p] if p < len(expected) else None,
            actual[p] if p < len(actual) else None,
            f"{where}: the calls that end before the last start (preparation "
            f"failures) differ: expected {want_prep}, actual {got_prep}",
        )
    exp, act = _groups(expected), _groups(actual)
    if exp == act:
        return None
    for call_id in [*exp, *(k for k in act if k not in exp)]:
        want_events, got_events = exp.get(call_id, []), act.get(call_id, [])
        for n in range(max(len(want_events), len(got_events))):
            w = want_events[n] if n < len(want_events) else None
            g = got_events[n] if n < len(got_events) else None
            if w != g:
                index = start + _nth_of(expected, call_id, n) if w is not None else start + len(expected)
                note = (
                    f"{where}, call {call_id}'s event {n + 1} differs (events of different "
                    "calls may interleave, each call's own order is fixed)"
                )
                return Divergence(
                    "events", index, _original(expected, call_id, n), _original(actual, call_id, n), note
                )
    return None  # pragma: no cover - the groups differ, so some event differs


def _nth_of(events: Sequence[Mapping[str, Any]], call_id: str, n: int) -> int:
    seen = -1
    for i, event in enumerate(events):
        if str(event.get("tool_call_id")) == call_id:
            seen += 1
            if seen == n:
                return i
    return len(events)


def _original(events: Sequence[Mapping[str, Any]], call_id: str, n: int) -> Mapping[str, Any] | None:
    index = _nth_of(events, call_id, n)
    return events[index] if index < len(events) else None


def _compare_events(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]], scenario: Scenario
) -> Divergence | None:
    exp_sections = dict(parallel_sections(expected, scenario))
    act_sections = dict(parallel_sections(actual, scenario))
    i = j = 0
    while i < len(expected) and j < len(actual):
        if i in exp_sections and j in act_sections:
            i_end, j_end = exp_sections[i], act_sections[j]
            found = _compare_section(expected[i:i_end], actual[j:j_end], i)
            if found is not None:
                return found
            i, j = i_end, j_end
            continue
        if comparable(expected[i]) != comparable(actual[j]):
            return Divergence("events", i, expected[i], actual[j])
        i, j = i + 1, j + 1
    if i < len(expected):
        return Divergence("events", i, expected[i], None, "the trace ends here")
    if j < len(actual):
        return Divergence("events", len(expected), None, actual[j], "the trace goes on")
    return None


def _compare_items(
    part: str, expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]
) -> Divergence | None:
    for i in range(max(len(expected), len(actual))):
        want = expected[i] if i < len(expected) else None
        got = actual[i] if i < len(actual) else None
        if want is None or got is None or comparable(want) != comparable(got):
            note = "missing" if got is None else ("unexpected" if want is None else "")
            return Divergence(part, i, want, got, note)
    return None


def compare(expected: Outcome, actual: Outcome, scenario: Scenario) -> Divergence | None:
    """The first divergence of ``actual`` from ``expected`` (events, then responses, then the
    history), or ``None`` when they agree."""
    found = _compare_events(expected["events"], actual["events"], scenario)
    if found is None:
        found = _compare_items("responses", expected["responses"], actual["responses"])
    if found is None:
        found = _compare_items("history", expected["history"], actual["history"])
    return found


def _line(item: Mapping[str, Any] | None) -> str:
    return "(nothing)" if item is None else canonical_json(item)


def _field_notes(want: Mapping[str, Any], got: Mapping[str, Any], prefix: str = "") -> list[str]:
    notes: list[str] = []
    a, b = comparable(want), comparable(got)
    for key in [*a, *(k for k in b if k not in a)]:
        if a.get(key) == b.get(key):
            continue
        if isinstance(a.get(key), Mapping) and isinstance(b.get(key), Mapping):
            notes += _field_notes(a[key], b[key], f"{prefix}{key}.")
        else:
            notes.append(
                f"{prefix}{key}: expected {_short(a.get(key), key in a)}, "
                f"actual {_short(b.get(key), key in b)}"
            )
    return notes


def _short(value: Any, present: bool) -> str:
    if not present:
        return "(absent)"
    text = canonical_json(value)
    return text if len(text) <= 120 else text[:117] + "..."


def render(divergence: Divergence, expected: Outcome, context: int = 3) -> str:
    """A readable diff of ``divergence``: where it is, a few expected items before it, the
    expected and actual item, and which fields differ."""
    part, index = divergence.part, divergence.index
    items = expected[part]
    head = f"first divergence at {part}[{index}]"
    anchor = divergence.expected or divergence.actual
    if part == "events" and anchor is not None:
        head += f" (run {anchor.get('run')}, turn {anchor.get('turn')})"
    lines = [head + (f": {divergence.note}" if divergence.note else "")]
    for k in range(max(0, index - context), min(index, len(items))):
        lines.append(f"    {part}[{k}] {_line(items[k])}")
    lines.append(f"  - expected {_line(divergence.expected)}")
    lines.append(f"  + actual   {_line(divergence.actual)}")
    if divergence.expected is not None and divergence.actual is not None:
        lines += [f"    {note}" for note in _field_notes(divergence.expected, divergence.actual)]
    return "\n".join(lines)

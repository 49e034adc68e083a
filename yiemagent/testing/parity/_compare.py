"""Comparing a normalised outcome with the expected one, and saying where they first differ.

Two orderings are free and put into one canonical order on both sides before comparing: the user
messages that open or join a turn may come before or after its ``turn_start``, and a tool result's
message may come anywhere between its call's ``tool_execution_end`` and the ``turn_end`` of the
batch. Events are then compared position by position, except inside a parallel section (the tool
events of a batch that runs in parallel): there the starts keep their order, the calls that fail
preparation end before the last start, and each call's own events keep their order, but events
of different calls may interleave in any order. The requests to the model are compared in order,
the hook calls call by call, responses and the history item by item.

In an error result the pipeline made (``is_error`` with an ``error_kind``) the wording is each
implementation's own, but the texts the scenario supplied (a block reason, an exception's
message, a validator's error) must appear in it: ``text`` is compared as the list of supplied
texts it contains. An implementation that makes no error kinds (``Rules.error_kinds`` false) has
its kinds ignored, and the same rule applies to every error result on both sides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._normalise import canonical_json
from ._scenario import Scenario

__all__ = [
    "PARTS",
    "Divergence",
    "Rules",
    "canonical_events",
    "comparable",
    "compare",
    "field_differences",
    "parallel_sections",
    "render",
]

Outcome = Mapping[str, Sequence[Mapping[str, Any]]]
PARTS = ("events", "requests", "hooks", "responses", "history")


@attrs.frozen
class Rules:
    """How one comparison reads texts and kinds: ``supplied`` are the scenario's own texts,
    ``error_kinds`` whether the implementation makes error kinds (a port must not invent them)."""

    supplied: tuple[str, ...] = ()
    error_kinds: bool = True

    @classmethod
    def of(cls, scenario: Scenario, error_kinds: bool = True) -> Rules:
        return cls(tuple(scenario.supplied_texts()), error_kinds)

    def carried(self, text: Any) -> list[str]:
        """The supplied texts that ``text`` contains."""
        return [s for s in self.supplied if isinstance(text, str) and s in text]


DEFAULT_RULES = Rules()


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


def comparable(item: Mapping[str, Any], rules: Rules = DEFAULT_RULES) -> dict[str, Any]:
    """``item`` as it is compared: the ``text`` of an error result the pipeline made becomes the
    list of supplied texts it carries, kinds go when the implementation makes none, and the same
    for the messages inside it."""
    out = dict(item)
    pipeline_error = out.get("error_kind") is not None or not rules.error_kinds
    if out.get("is_error") is True and pipeline_error and "text" in out:
        out["text"] = rules.carried(out["text"])
    if not rules.error_kinds:
        out.pop("error_kind", None)
    if isinstance(out.get("message"), Mapping):
        out["message"] = comparable(out["message"], rules)
    if isinstance(out.get("messages"), list):
        out["messages"] = [comparable(m, rules) if isinstance(m, Mapping) else m for m in out["messages"]]
    return out


def _is_pair(events: Sequence[Mapping[str, Any]], i: int, role: str) -> bool:
    """Whether events ``i`` and ``i + 1`` are the message_start and message_end of a ``role``."""
    if i + 1 >= len(events):
        return False
    start, end = events[i], events[i + 1]
    message = end.get("message")
    return (
        start["type"] == "message_start"
        and start.get("role") == role
        and end["type"] == "message_end"
        and isinstance(message, Mapping)
        and message.get("role") == role
    )


def _user_messages_before_turn_start(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """User messages right after a turn_start move before it, into the turn before."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(events):
        event = dict(events[i])
        if event["type"] == "turn_start":
            j = i + 1
            moved: list[dict[str, Any]] = []
            while _is_pair(events, j, "user"):
                moved += [
                    dict(events[j], turn=event["turn"] - 1),
                    dict(events[j + 1], turn=event["turn"] - 1),
                ]
                j += 2
            out += [*moved, event]
            i = j
            continue
        out.append(event)
        i += 1
    return out


def _result_messages_at_turn_end(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool-result messages of a turn move to just before its turn_end, in their order."""
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    ended: set[Any] = set()  # the calls of this turn whose tool_execution_end came
    i = 0
    while i < len(events):
        if _is_pair(events, i, "toolResult") and events[i + 1]["message"].get("tool_call_id") in ended:
            held += [dict(events[i]), dict(events[i + 1])]
            i += 2
            continue
        event = dict(events[i])
        if event["type"] == "tool_execution_end":
            ended.add(event.get("tool_call_id"))
        if event["type"] in ("turn_end", "agent_end", "agent_start", "turn_start"):
            out += held
            held = []
            ended = set()
        out.append(event)
        i += 1
    return out + held


def canonical_events(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``events`` in the canonical order of the free orderings: user messages before the
    turn_start they open or join, a turn's tool-result messages just before its turn_end."""
    return _result_messages_at_turn_end(_user_messages_before_turn_start(events))


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


def _groups(events: Sequence[Mapping[str, Any]], rules: Rules) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        groups.setdefault(str(event.get("tool_call_id")), []).append(comparable(event, rules))
    return groups


def _starts(events: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(e.get("tool_call_id")) for e in events if e["type"] == "tool_execution_start"]


def _ended_during_preparation(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The calls whose end comes before the section's last start: only preparation failures
    can, since execution begins once every call of the batch is prepared."""
    last = max((i for i, e in enumerate(events) if e["type"] == "tool_execution_start"), default=-1)
    if last < 0:  # no start here (a resumed batch's ends): nothing ended during preparation
        return []
    return [str(e.get("tool_call_id")) for e in events[:last] if e["type"] == "tool_execution_end"]


def _compare_section(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]], start: int, rules: Rules
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
                if k >= len(expected)
                or k >= len(actual)
                or comparable(expected[k], rules) != comparable(actual[k], rules)
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
    exp, act = _groups(expected, rules), _groups(actual, rules)
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
    expected: Sequence[Mapping[str, Any]],
    actual: Sequence[Mapping[str, Any]],
    scenario: Scenario,
    rules: Rules,
) -> Divergence | None:
    expected, actual = canonical_events(expected), canonical_events(actual)
    exp_sections = dict(parallel_sections(expected, scenario))
    act_sections = dict(parallel_sections(actual, scenario))
    i = j = 0
    while i < len(expected) and j < len(actual):
        if i in exp_sections and j in act_sections:
            i_end, j_end = exp_sections[i], act_sections[j]
            found = _compare_section(expected[i:i_end], actual[j:j_end], i, rules)
            if found is not None:
                return found
            i, j = i_end, j_end
            continue
        if comparable(expected[i], rules) != comparable(actual[j], rules):
            return Divergence("events", i, expected[i], actual[j])
        i, j = i + 1, j + 1
    if i < len(expected):
        return Divergence("events", i, expected[i], None, "the trace ends here")
    if j < len(actual):
        return Divergence("events", len(expected), None, actual[j], "the trace goes on")
    return None


def _compare_items(
    part: str, expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]], rules: Rules
) -> Divergence | None:
    for i in range(max(len(expected), len(actual))):
        want = expected[i] if i < len(expected) else None
        got = actual[i] if i < len(actual) else None
        if want is None or got is None or comparable(want, rules) != comparable(got, rules):
            note = "missing" if got is None else ("unexpected" if want is None else "")
            return Divergence(part, i, want, got, note)
    return None


def hook_order(hooks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Hook calls call by call: by run, turn and call id, the before hook first. Hooks of a
    parallel batch may run in any order; each call's own are fixed."""
    return sorted(hooks, key=lambda h: (h["run"], h["turn"], str(h["tool_call_id"]), h["hook"] != "before"))


def compare(
    expected: Outcome, actual: Outcome, scenario: Scenario, rules: Rules | None = None
) -> Divergence | None:
    """The first divergence of ``actual`` from ``expected`` (events, then the requests to the
    model, the hook calls, the responses, the history), or ``None`` when they agree."""
    rules = rules if rules is not None else Rules.of(scenario)
    found = _compare_events(expected["events"], actual["events"], scenario, rules)
    if found is None:
        found = _compare_items("requests", expected["requests"], actual["requests"], rules)
    if found is None:
        found = _compare_items("hooks", hook_order(expected["hooks"]), hook_order(actual["hooks"]), rules)
    if found is None:
        found = _compare_items("responses", expected["responses"], actual["responses"], rules)
    if found is None:
        found = _compare_items("history", expected["history"], actual["history"], rules)
    return found


def _line(item: Mapping[str, Any] | None) -> str:
    return "(nothing)" if item is None else canonical_json(item)


def field_differences(
    want: Mapping[str, Any], got: Mapping[str, Any], rules: Rules = DEFAULT_RULES, prefix: str = ""
) -> list[str]:
    """Each field where ``got`` differs from ``want`` (as compared: ``comparable``), as
    ``path: expected X, actual Y`` with a dotted path into objects and ``[i]`` at the first
    differing item of a list (``messages[2].text: ...``); the one way the suite and a replay
    say where two things part."""
    notes: list[str] = []
    a, b = comparable(want, rules), comparable(got, rules)
    for key in [*a, *(k for k in b if k not in a)]:
        if a.get(key) == b.get(key):
            continue
        if isinstance(a.get(key), Mapping) and isinstance(b.get(key), Mapping):
            notes += field_differences(a[key], b[key], rules, f"{prefix}{key}.")
        elif key == "text" and isinstance(a.get(key), list):
            notes.append(
                f"{prefix}text: must carry the scenario's texts {canonical_json(a[key])}, "
                f"carries {canonical_json(b.get(key))}"
            )
        elif isinstance(a.get(key), list) and isinstance(b.get(key), list):
            notes += _list_differences(a[key], b[key], rules, f"{prefix}{key}")
        else:
            notes.append(
                f"{prefix}{key}: expected {_short(a.get(key), key in a)}, "
                f"actual {_short(b.get(key), key in b)}"
            )
    return notes


def _list_differences(want: list[Any], got: list[Any], rules: Rules, where: str) -> list[str]:
    """The differences at the first item where two lists part (an item one of them lacks is
    ``(absent)``)."""
    for i in range(max(len(want), len(got))):
        a = want[i] if i < len(want) else None
        b = got[i] if i < len(got) else None
        if i < len(want) and i < len(got) and a == b:
            continue
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            inner = field_differences(a, b, rules, f"{where}[{i}].")
            if inner:
                return inner
            continue
        return [f"{where}[{i}]: expected {_short(a, i < len(want))}, actual {_short(b, i < len(got))}"]
    return []


def _short(value: Any, present: bool) -> str:
    if not present:
        return "(absent)"
    if isinstance(value, Mapping) and "name" in value:  # a tool or a call: its name first
        value = {"name": value["name"], **{k: value[k] for k in sorted(value) if k != "name"}}
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    else:
        text = canonical_json(value)
    return text if len(text) <= 120 else text[:117] + "..."


def render(divergence: Divergence, expected: Outcome, context: int = 3, rules: Rules = DEFAULT_RULES) -> str:
    """A readable diff of ``divergence``: where it is, a few expected items before it (in the
    order compared: events canonical, hooks call by call), the expected and actual item, and
    which fields differ."""
    part, index = divergence.part, divergence.index
    items: Sequence[Mapping[str, Any]] = expected[part]
    if part == "events":
        items = canonical_events(items)
    elif part == "hooks":
        items = hook_order(items)
    head = f"first divergence at {part}[{index}]"
    anchor = divergence.expected or divergence.actual
    if part in ("events", "requests", "hooks") and anchor is not None:
        head += f" (run {anchor.get('run')}, turn {anchor.get('turn')})"
    lines = [head + (f": {divergence.note}" if divergence.note else "")]
    for k in range(max(0, index - context), min(index, len(items))):
        lines.append(f"    {part}[{k}] {_line(items[k])}")
    lines.append(f"  - expected {_line(divergence.expected)}")
    lines.append(f"  + actual   {_line(divergence.actual)}")
    if divergence.expected is not None and divergence.actual is not None:
        lines += [f"    {note}" for note in field_differences(divergence.expected, divergence.actual, rules)]
    return "\n".join(lines)

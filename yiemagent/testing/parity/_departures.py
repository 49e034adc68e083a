"""Documented departures: how an implementation is expected to differ from a scenario's
``expect``, applied to a copy of it before comparing.

Two rules reorder events the way an implementation built differently does everywhere
(``result_messages_inline``, ``turn_start_before_inputs``); the ``edit`` rule changes the
expected outcome at JSON Pointers (``set``, ``insert``, ``remove``), all for one reason.
``suggest`` writes the edits that would turn one outcome into another, as a starting point for
a reviewer who then writes the reason.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from yiemagent.errors import DepartureError

from ._compare import comparable, parallel_sections
from ._normalise import canonical_json
from ._scenario import Scenario, validation_problems

__all__ = ["DepartureError", "apply_departures", "suggest"]

Outcome = dict[str, list[Any]]


def _is_result_pair(events: Sequence[Mapping[str, Any]], i: int) -> bool:
    if i + 1 >= len(events):
        return False
    start, end = events[i], events[i + 1]
    return (
        start["type"] == "message_start"
        and start.get("role") == "toolResult"
        and end["type"] == "message_end"
        and end["message"].get("role") == "toolResult"
    )


def result_messages_inline(events: list[dict[str, Any]], scenario: Scenario) -> list[dict[str, Any]]:
    """Outside parallel batches, each tool result's message_start/message_end pair moves to right
    after that call's tool_execution_end (instead of after the whole batch)."""
    parallel = {i for start, end in parallel_sections(events, scenario) for i in range(start, end)}
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(events):
        if _is_result_pair(events, i):
            call_id = events[i + 1]["message"].get("tool_call_id")
            ends = [
                k
                for k, e in enumerate(out)
                if e["type"] == "tool_execution_end"
                and e.get("tool_call_id") == call_id
                and not e.get("_parallel")
            ]
            if ends:
                at = ends[-1] + 1
                while at < len(out) and out[at].get("_inlined"):
                    at += 1
                out[at:at] = [dict(events[i], _inlined=True), dict(events[i + 1], _inlined=True)]
                i += 2
                continue
        out.append(dict(events[i], _parallel=True) if i in parallel else events[i])
        i += 1
    return [{k: v for k, v in e.items() if k not in ("_inlined", "_parallel")} for e in out]


def turn_start_before_inputs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user messages that join a run just before a turn_start (the prompt, messages sent
    during the run) come right after that turn_start instead, with its turn number."""
    out = list(events)
    i = 0
    while i < len(out):
        if out[i]["type"] != "turn_start":
            i += 1
            continue
        start = i
        while (
            start >= 2
            and out[start - 2]["type"] == "message_start"
            and out[start - 2].get("role") == "user"
            and out[start - 1]["type"] == "message_end"
        ):
            start -= 2
        if start < i:
            turn_start = out[i]
            moved = [dict(e, turn=turn_start["turn"]) for e in out[start:i]]
            out[start : i + 1] = [turn_start, *moved]
        i += 1
    return out


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _locate(doc: Any, pointer: str) -> tuple[Any, str]:
    """The container of the pointer's target and the last token."""
    tokens = _tokens(pointer)
    node = doc
    for token in tokens[:-1]:
        try:
            node = node[int(token)] if isinstance(node, list) else node[token]
        except (KeyError, IndexError, ValueError, TypeError):  # TypeError: inside a string
            raise DepartureError(f"{pointer}: {token!r} names nothing") from None
    return node, tokens[-1]


def _index(container: list[Any], token: str, pointer: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    try:
        index = int(token)
    except ValueError:
        raise DepartureError(f"{pointer}: {token!r} is not an index") from None
    if not 0 <= index < len(container) + (1 if allow_end else 0):
        raise DepartureError(f"{pointer}: index {index} is out of range")
    return index


def _edit(doc: Outcome, edit: Mapping[str, Any]) -> None:
    rule, pointer = edit["op"], edit["path"]
    container, token = _locate(doc, pointer)
    value = copy.deepcopy(edit.get("value"))
    if isinstance(container, list):
        if rule == "insert":
            container.insert(_index(container, token, pointer, True), value)
        elif rule == "remove":
            del container[_index(container, token, pointer, False)]
        else:
            index = _index(container, token, pointer, True)
            if index == len(container):
                container.append(value)
            else:
                container[index] = value
    elif isinstance(container, dict):
        if rule == "remove":
            if token not in container:
                raise DepartureError(f"{pointer}: no field {token!r} to remove")
            del container[token]
        else:
            container[token] = value
    else:
        raise DepartureError(f"{pointer}: the parent is not a list or an object")


def apply_departures(
    expected: Mapping[str, Sequence[Mapping[str, Any]]],
    departures: Sequence[Mapping[str, Any]],
    scenario: Scenario,
) -> Outcome:
    """A copy of ``expected`` with ``departures`` applied in order; raises ``DepartureError``
    for an edit whose pointer names nothing, or for edits that leave an outcome the scenario
    schema's ``expect`` does not allow (so comparing it cannot fail on a malformed item)."""
    doc: Outcome = {part: copy.deepcopy(list(expected[part])) for part in ("events", "responses", "history")}
    for departure in departures:
        rule = departure["rule"]
        if rule == "result_messages_inline":
            doc["events"] = result_messages_inline(doc["events"], scenario)
        elif rule == "turn_start_before_inputs":
            doc["events"] = turn_start_before_inputs(doc["events"])
        else:
            for edit in departure["edits"]:
                _edit(doc, edit)
    problems = validation_problems(doc, "expect")
    if problems:
        path, message = problems[0]
        raise DepartureError(f"the edits leave an expected outcome that is not valid: {path}: {message}")
    return doc


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _field_edits(path: str, want: Any, got: Any) -> list[dict[str, Any]]:
    """Edits turning ``want`` into something that compares equal to ``got``, field by field
    (the whole item when they are not both objects); texts that are not compared are left."""
    if not (isinstance(want, dict) and isinstance(got, dict)):
        return [{"op": "set", "path": path, "value": got}]
    a, b = comparable(want), comparable(got)
    edits: list[dict[str, Any]] = []
    for key, value in b.items():
        if key in a and a[key] == value:
            continue
        if key in a and isinstance(a[key], dict) and isinstance(value, dict):
            edits += _field_edits(f"{path}/{_escape(key)}", want[key], got[key])
        else:
            edits.append({"op": "set", "path": f"{path}/{_escape(key)}", "value": got[key]})
    edits += [{"op": "remove", "path": f"{path}/{_escape(k)}"} for k in want if k not in got]
    return edits


def suggest(
    expected: Mapping[str, Sequence[Any]], actual: Mapping[str, Sequence[Any]]
) -> list[dict[str, Any]]:
    """The edits (``set``/``insert``/``remove``) that turn ``expected`` into an outcome that
    compares equal to ``actual``, ordered so that each pointer is right when they are applied in
    order: put them in ``{"rule": "edit", "reason": ..., "edits": [...]}``."""
    edits: list[dict[str, Any]] = []
    for part in ("events", "responses", "history"):
        want, got = list(expected[part]), list(actual[part])
        matcher = difflib.SequenceMatcher(
            a=[canonical_json(x) for x in want], b=[canonical_json(x) for x in got], autojunk=False
        )
        for tag, i1, i2, j1, j2 in reversed(matcher.get_opcodes()):
            if tag == "equal":
                continue
            if tag == "replace" and i2 - i1 == j2 - j1:
                for k in range(i2 - i1 - 1, -1, -1):
                    edits += _field_edits(f"/{part}/{i1 + k}", want[i1 + k], got[j1 + k])
                continue
            edits += [{"op": "remove", "path": f"/{part}/{k}"} for k in range(i2 - 1, i1 - 1, -1)]
            edits += [
                {"op": "insert", "path": f"/{part}/{i1 + n}", "value": got[j1 + n]} for n in range(j2 - j1)
            ]
    return edits

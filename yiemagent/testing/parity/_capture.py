"""Drafting a conformance scenario from a recorded run (``python -m yiemagent.parity capture``).

The cassette gives what the scenario needs: the system prompt and first messages (from the first
request), the user's inputs (the user messages each later request adds), the model's replies (in
the suite's wire form, with their usage), and the tools the model was offered. A real tool cannot
run in a scenario; each becomes a vocabulary tool giving the result the recording saw (``text``,
or ``echo`` when it returned its arguments), and a note says so where that is not faithful (a
tool that answered differently from call to call, or failed). The expected outcome comes from
running the draft on yiemagent, and its requests are checked against the recorded ones, so a
fixture that does not reproduce the recording is reported, not hidden.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from yiemagent.core._output import is_refusal
from yiemagent.testing._cassette import Cassette, Interaction
from yiemagent.testing.parity._compare import field_differences
from yiemagent.testing.parity._drive import run_scenario
from yiemagent.testing.parity._normalise import BUILTIN_TOOLS, OUTPUT_TOOL, canonical_json
from yiemagent.testing.parity._scenario import FORMAT, parse_scenario

__all__ = ["Capture", "capture_scenario", "scenario_name"]

_FINISH = {"toolUse": "tool_calls", "stop": "stop", "length": "length"}


@attrs.frozen
class Capture:
    """A drafted scenario (``data``, valid and with its ``expect`` filled in) and the ``notes``
    on what a reader must check or replace before adding it to a suite."""

    data: dict[str, Any]
    notes: list[str]


def scenario_name(path: str | Path) -> str:
    """A scenario name (snake_case, the schema's pattern) from a cassette's file name."""
    words = re.findall(r"[a-z0-9]+", Path(path).stem.lower())
    return "_".join(words) or "captured_run"


def _wire_reply(interaction: Interaction) -> dict[str, Any]:
    """A recorded reply in the suite's wire form (an OpenAI chat message), or its error as ``fail``."""
    if interaction.error is not None:
        return {"fail": str(interaction.error.get("message", ""))}
    reply = interaction.reply or {}
    blocks = reply.get("content") or []
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = []
    for block in blocks:
        if block.get("type") != "toolCall":
            continue
        call: dict[str, Any] = {
            "type": "function",
            "function": {"name": block.get("name", ""), "arguments": json.dumps(block.get("arguments"))},
        }
        if block.get("id"):
            call = {"id": block["id"], **call}
        calls.append(call)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    wire: dict[str, Any] = {"message": message}
    finish = _FINISH.get(str(reply.get("stop_reason")))
    if finish is not None and finish != ("tool_calls" if calls else "stop"):
        wire["finish_reason"] = finish
    usage = reply.get("usage") or {}
    counts = {k: int(usage.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write")}
    if any(counts.values()):
        wire["usage"] = {k: v for k, v in counts.items() if v}
    return wire


def _results(requests: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[Any, Mapping[str, Any]]]]:
    """For each tool name, the (arguments, result message) of every call the requests show."""
    calls: dict[str, tuple[str, Any]] = {}
    results: dict[str, Mapping[str, Any]] = {}
    for request in requests:
        for message in request["messages"]:
            if message["role"] == "assistant":
                for call in message["tool_calls"]:
                    calls[call["id"]] = (call["name"], call["arguments"])
            elif message["role"] == "toolResult":
                results[message["tool_call_id"]] = message
    found: dict[str, list[tuple[Any, Mapping[str, Any]]]] = {}
    for call_id, (name, args) in calls.items():
        if call_id in results:
            found.setdefault(name, []).append((args, results[call_id]))
    return found


Seen = Sequence[tuple[Any, Mapping[str, Any]]]  # (arguments, result message) of a tool's calls


def _tool(spec: Mapping[str, Any], seen: Seen, notes: list[str]) -> dict[str, Any]:
    """A vocabulary tool standing in for the recorded one: its name, description and schema,
    and an outcome giving what the recording's calls returned."""
    name = spec["name"]
    tool: dict[str, Any] = {
        "name": name,
        "description": spec["description"],
        "input_schema": spec["input_schema"],
    }
    texts = [r["text"] for _, r in seen]
    errors = [r for _, r in seen if r["is_error"]]
    if not seen:
        tool["outcome"] = {"text": ""}
        notes.append(f"tool {name} was offered but never called: its fixture returns an empty text")
    elif all(not r["is_error"] and r["text"] == canonical_json(a) for a, r in seen):
        tool["outcome"] = {"echo": True}
    else:
        tool["outcome"] = {"text": texts[0]}
        if errors:
            notes.append(
                f"tool {name} failed in the recording ({errors[0]['text'][:80]!r}); its fixture "
                "returns the text instead: replace it with a fail outcome if the failure matters"
            )
        elif len(set(texts)) > 1:
            notes.append(
                f"tool {name} returned {len(set(texts))} different results in the recording; its "
                "fixture returns the first one every time: replace the real tool with a fixture "
                "that gives a fixed result, and record again"
            )
    return tool


def _history_message(message: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A request message in the normalised message form a scenario's ``history`` uses."""
    if message["role"] == "user":
        return dict(message)
    if message["role"] == "assistant":
        stop = "toolUse" if message["tool_calls"] else "stop"
        return {**message, "stop_reason": stop, "error_message": None}
    return {
        "role": "toolResult",
        "tool_call_id": message["tool_call_id"],
        "tool_name": names.get(message["tool_call_id"], ""),
        "is_error": message["is_error"],
        "error_kind": message["error_kind"],
        "text": message["text"],
        "details": {},
        "added_tool_names": [],
    }


Items = list[dict[str, Any]]


def _inputs_and_history(requests: Sequence[Mapping[str, Any]], output: bool) -> tuple[Items, Items]:
    """The scenario's inputs (the user messages each request adds; with an ``output``, not the
    refusals the loop itself sent back) and the history the agent started with (what the first
    request holds before its last user messages)."""
    first = list(requests[0]["messages"])
    tail = len(first)
    while tail > 0 and first[tail - 1]["role"] == "user":
        tail -= 1
    names = {c["id"]: c["name"] for m in first if m["role"] == "assistant" for c in m["tool_calls"]}
    history = [_history_message(m, names) for m in first[:tail]]
    inputs = [{"do": "user", "text": m["text"]} for m in first[tail:]]
    for before, request in itertools.pairwise(requests):
        added = request["messages"][len(before["messages"]) :]
        inputs += [
            {"do": "user", "text": m["text"]}
            for m in added
            if m["role"] == "user" and not (output and is_refusal(m["text"]))
        ]
    return inputs, history


def _request_notes(expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where the draft's requests to the model differ from the recorded ones (session ids
    aside: a scenario sets its own)."""
    if len(expected) != len(actual):
        return [f"the draft makes {len(actual)} requests to the model; the recording made {len(expected)}"]
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        keys = ("system_prompt", "messages", "tools")
        differences = field_differences({k: want[k] for k in keys}, {k: got[k] for k in keys})
        if differences:
            return [f"request {index + 1} of the draft is not the recorded one: {differences[0]}"]
    return []


def _recorded_output(first: Mapping[str, Any], tool: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The scenario's ``output`` setting for a run that asked for one: the native mode when its
    request carried the schema, the tool mode when the output tool was offered. (The retries
    are left at their default: a cassette does not record them.)"""
    if isinstance(first.get("output"), Mapping):
        return {"schema": dict(first["output"]["schema"]), "mode": "native"}
    if tool is not None:
        return {"schema": dict(tool["input_schema"]), "mode": "tool"}
    return None


def capture_scenario(cassette: Cassette, name: str | None = None) -> Capture:
    """Draft the scenario of ``cassette``'s run (see the module docstring); raises
    ``ValueError`` for a cassette with no calls, ``ScenarioError`` if the draft is not valid."""
    if not cassette.interactions:
        raise ValueError(f"{cassette.source}: the cassette holds no calls, so there is no run to capture")
    notes: list[str] = []
    requests = [i.request for i in cassette.interactions]
    offered: dict[str, Mapping[str, Any]] = {}
    for request in requests:
        for spec in request["tools"]:
            offered.setdefault(spec["name"], spec)
    seen = _results(requests)
    output = _recorded_output(requests[0], offered.pop(OUTPUT_TOOL, None))
    inputs, history = _inputs_and_history(requests, output is not None)
    tools = [_tool(spec, seen.get(n, []), notes) for n, spec in offered.items() if n not in BUILTIN_TOOLS]
    if "writeTool" in offered:
        notes.append("writeTool was offered: the draft leaves it out (a scenario sets write_tool itself)")
    data: dict[str, Any] = {
        "format": FORMAT,
        "name": name or scenario_name(cassette.source),
        "rule": f"The run recorded in {Path(cassette.source).name} (its model replies as recorded, "
        "its tools as fixtures giving the recorded results) goes the same way on every implementation.",
        "covers": ["spec 10"],
        "profile": ["core"] if output is None else ["output"],
        "system_prompt": requests[0]["system_prompt"],
    }
    if output is not None:
        data["output"] = output
    if tools:
        data["tools"] = tools
    if "listTools" in offered:
        data["list_tools"] = True
    if history:
        data["history"] = history
    data["inputs"] = inputs
    data["replies"] = [_wire_reply(i) for i in cassette.interactions]
    data["expect"] = {"events": [], "requests": [], "hooks": [], "responses": [], "history": []}
    scenario = parse_scenario(data, cassette.source)
    outcome = run_scenario(scenario)
    if outcome.problems:
        notes += [f"the draft did not run cleanly: {p}" for p in outcome.problems]
    data["expect"] = outcome.expect()
    actual = [{k: v for k, v in r.items() if k not in ("type", "run", "turn")} for r in outcome.requests]
    notes += _request_notes(requests, actual)
    parse_scenario(data, cassette.source)
    return Capture(data, notes)

"""``check``'s verdicts on another implementation's traces: what the model was sent, the texts a
scenario supplies, the free orderings, a port's own expectations (differs, not_applicable,
stale), harness errors, and the results table. Each broken trace is reported at its place."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from yiemagent.testing.parity import canonical_events, compare, load_scenario, run_scenario, write_trace
from yiemagent.testing.parity._cli import main
from yiemagent.testing.parity._table import BEGIN, END

SCENARIOS = ROOT / "parity" / "scenarios"


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(args), out)
    return status, out.getvalue()


def expected(name: str) -> dict[str, Any]:
    return copy.deepcopy(load_scenario(SCENARIOS / f"{name}.json").expect)


def check(
    tmp_path: Path, name: str, outcome: dict[str, Any], *, problems: tuple[str, ...] = (), port: Any = None
) -> tuple[int, str]:
    """Write ``outcome`` as the trace of ``other 1.0`` and check it (with ``port`` as the
    expectations file's entry for that version, when given)."""
    trace = tmp_path / f"{name}.jsonl"
    write_trace(trace, name, "other 1.0", outcome, problems)
    args = ["check", str(SCENARIOS / f"{name}.json"), str(trace)]
    if port is not None:
        file = tmp_path / "expectations.json"
        file.write_text(
            json.dumps({"format": 1, "implementation": "other", "versions": {"1.0.0": port}}),
            encoding="utf-8",
        )
        trace.write_text(trace.read_text(encoding="utf-8").replace('"other 1.0"', '"other 1.0.0"'), "utf-8")
        args += ["--expectations", str(file)]
    return cli(*args)


def index_of(items: list[dict[str, Any]], **fields: Any) -> int:
    return next(i for i, e in enumerate(items) if all(e.get(k) == v for k, v in fields.items()))


# -- what the model was sent and what the hooks saw ----------------------------------------


def test_a_request_without_the_tool_results_is_reported_at_that_request(tmp_path: Path) -> None:
    outcome = expected("tool_call_then_final_answer")
    second = outcome["requests"][1]
    second["messages"] = [m for m in second["messages"] if m["role"] != "toolResult"]
    status, out = check(tmp_path, "tool_call_then_final_answer", outcome)
    assert status == 1
    assert "diverged       tool_call_then_final_answer" in out
    assert "first divergence at requests[1] (run 1, turn 2)" in out
    # The first item where the lists part is named: the tool result the trace lacks.
    assert 'messages[2]: expected {"error_kind":null,"is_error":false,"role":"toolResult"' in out
    assert "actual (absent)" in out


def test_a_request_without_the_system_prompt_or_the_tools_is_reported(tmp_path: Path) -> None:
    for field, value in (("system_prompt", ""), ("tools", []), ("session_id", None)):
        outcome = expected("tool_call_then_final_answer")
        outcome["requests"][0][field] = value
        status, out = check(tmp_path, "tool_call_then_final_answer", outcome)
        assert status == 1 and "first divergence at requests[0] (run 1, turn 1)" in out, field
        assert f"{field}[0]: expected" in out if field == "tools" else f"{field}: expected" in out


def test_a_hook_that_saw_an_empty_history_is_reported_at_that_hook(tmp_path: Path) -> None:
    outcome = expected("before_hook_blocks_with_its_reason")
    outcome["hooks"][0]["history"] = []
    status, out = check(tmp_path, "before_hook_blocks_with_its_reason", outcome)
    assert status == 1 and "first divergence at hooks[0]" in out
    assert 'history[0]: expected "user", actual (absent)' in out


def test_the_loop_that_drops_tool_results_fails_its_own_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import yiemagent.core._context as context

    real = context.HistorySnapshot
    monkeypatch.setattr(
        context, "HistorySnapshot", lambda messages: real([m for m in messages if m.role != "toolResult"])
    )
    scenario = load_scenario(SCENARIOS / "tool_call_then_final_answer.json")
    found = compare(scenario.expect, run_scenario(scenario).expect(), scenario)
    assert found is not None and (found.part, found.index) == ("requests", 1)


# -- texts the scenario supplies ------------------------------------------------------------


def test_a_changed_block_reason_is_reported_at_the_end_event(tmp_path: Path) -> None:
    outcome = expected("before_hook_blocks_with_its_reason")
    at = index_of(outcome["events"], type="tool_execution_end")
    outcome["events"][at]["text"] = "Tool execution was blocked"
    status, out = check(tmp_path, "before_hook_blocks_with_its_reason", outcome)
    assert status == 1 and f"first divergence at events[{at}] (run 1, turn 1)" in out
    assert 'text: must carry the scenario\'s texts ["Deleting files needs approval."], carries []' in out


def test_an_exception_text_replaced_is_reported_and_other_wording_is_free(tmp_path: Path) -> None:
    outcome = expected("raising_tool_is_tool_raised")
    at = index_of(outcome["events"], type="tool_execution_end")
    supplied = load_scenario(SCENARIOS / "raising_tool_is_tool_raised.json").supplied_texts()
    assert supplied and supplied[0] in outcome["events"][at]["text"]
    reworded = copy.deepcopy(outcome)
    for item in [reworded["events"][at], *(m for m in reworded["history"] if m["role"] == "toolResult")]:
        item["text"] = f"The tool broke ({supplied[0]}), sorry."
    for request in reworded["requests"]:
        for message in request["messages"]:
            if message["role"] == "toolResult":
                message["text"] = f"error: {supplied[0]}"
    assert check(tmp_path, "raising_tool_is_tool_raised", reworded)[0] == 0
    outcome["events"][at]["text"] = 'Tool "explode" failed.'
    status, out = check(tmp_path, "raising_tool_is_tool_raised", outcome)
    assert status == 1 and f"first divergence at events[{at}]" in out


# -- orderings the format leaves free ----------------------------------------------------------


def pi_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events as an implementation orders them that emits turn_start before the user messages
    and each result message right after its call's end."""
    pairs: dict[str, list[dict[str, Any]]] = {}
    users: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for i, event in enumerate(events):
        role = event.get("role") or event.get("message", {}).get("role")
        if role == "toolResult":
            end = event if event["type"] == "message_end" else events[i + 1]
            pairs.setdefault(end["message"]["tool_call_id"], []).append(event)
        elif role == "user":
            users.append(event)
        else:
            rest.append(event)
    out: list[dict[str, Any]] = []
    for event in rest:
        out.append(event)
        if event["type"] == "turn_start":
            out += [dict(e, turn=event["turn"]) for e in users]
            users = []
        if event["type"] == "tool_execution_end":
            out += pairs.pop(event["tool_call_id"], [])
    return out


def test_the_free_orderings_agree(tmp_path: Path) -> None:
    name = "sequential_mode_runs_each_call_to_its_end_before_the_next"
    outcome = expected(name)
    reordered = pi_order(outcome["events"])
    assert reordered != outcome["events"] and len(reordered) == len(outcome["events"])
    assert canonical_events(reordered) == canonical_events(outcome["events"])
    assert check(tmp_path, name, dict(outcome, events=reordered))[0] == 0
    swapped = list(reordered)
    first = index_of(swapped, type="tool_execution_start")
    swapped[first], swapped[first + 1] = swapped[first + 1], swapped[first]
    assert check(tmp_path, name, dict(outcome, events=swapped))[0] == 1


# -- a port's expectations ----------------------------------------------------------------------


def test_an_entry_for_a_scenario_that_agrees_is_stale(tmp_path: Path) -> None:
    port = {
        "differs": {
            "tool_call_then_final_answer": {
                "reason": "once differed",
                "assert": [{"part": "history", "match": {"role": "user"}, "count": 1}],
            }
        }
    }
    status, out = check(
        tmp_path, "tool_call_then_final_answer", expected("tool_call_then_final_answer"), port=port
    )
    assert status == 1 and "stale          tool_call_then_final_answer" in out
    assert "the trace agrees: remove the entry" in out


def test_a_declared_difference_holds_only_while_its_assertions_do(tmp_path: Path) -> None:
    name = "model_failure_ends_the_run_with_an_error_response"
    outcome = expected(name)
    outcome["history"].append(
        {
            "role": "assistant",
            "text": "",
            "tool_calls": [],
            "stop_reason": "error",
            "error_message": "<message>",
        }
    )
    kept = {"part": "history", "match": {"role": "assistant", "stop_reason": "error"}, "count": 1}
    port = {"differs": {name: {"reason": "keeps the failed reply in the history", "assert": [kept]}}}
    status, out = check(tmp_path, name, outcome, port=port)
    assert status == 0, out
    assert f"differs        {name} (keeps the failed reply in the history)" in out
    port["differs"][name]["assert"] = [dict(kept, count=2)]
    status, out = check(tmp_path, name, outcome, port=port)
    assert status == 1 and "the declared difference does not hold" in out
    assert 'history: exactly 2 item(s) matching {"role":"assistant","stop_reason":"error"}, found 1' in out


def test_a_lacked_extension_is_not_applicable_and_error_kinds_may_be_absent(tmp_path: Path) -> None:
    name = "max_turns_ends_a_runaway_loop"
    outcome = expected(name)
    outcome["events"] = outcome["events"][:3]
    status, out = check(tmp_path, name, outcome, port={"lacks": {"max_turns": "no max_turns"}})
    assert status == 0 and f"not_applicable {name} (max_turns: no max_turns)" in out
    assert "max_turns            0 agreed, 1 not_applicable, 0 diverged" in out

    name = "unknown_tool_gets_tool_not_found"
    kindless = json.loads(
        json.dumps(expected(name)).replace('"error_kind": "tool_not_found"', '"error_kind": null')
    )
    assert check(tmp_path, name, kindless)[0] == 1  # yiemagent's own rules: kinds compared
    assert check(tmp_path, name, kindless, port={"error_kinds": False})[0] == 0


def test_a_harness_failure_is_a_harness_error(tmp_path: Path) -> None:
    name = "tool_call_then_final_answer"
    status, out = check(
        tmp_path, name, expected(name), problems=("latch 'go' was not released within 1.5 s",)
    )
    assert status == 1 and f"harness_error  {name}" in out
    assert "the runner failed to drive the scenario:\n  latch 'go' was not released within 1.5 s" in out


def test_a_trace_of_another_version_needs_its_own_entries(tmp_path: Path) -> None:
    name = "tool_call_then_final_answer"
    trace = tmp_path / f"{name}.jsonl"
    write_trace(trace, name, "other 2.0.0", expected(name))
    file = tmp_path / "expectations.json"
    file.write_text(json.dumps({"format": 1, "implementation": "other", "versions": {"1.0.0": {}}}), "utf-8")
    status, out = cli("check", str(SCENARIOS / f"{name}.json"), str(trace), "--expectations", str(file))
    assert status == 1 and "the expectations file is for other (1.0.0), the trace is of other 2.0.0" in out


def test_a_bad_expectations_file_names_the_field(tmp_path: Path) -> None:
    name = "tool_call_then_final_answer"
    trace = tmp_path / f"{name}.jsonl"
    write_trace(trace, name, "other 1.0.0", expected(name))
    file = tmp_path / "expectations.json"
    port = {"differs": {name: {"reason": "r", "assert": [{"part": "events", "match": {"type": "x"}}]}}}
    file.write_text(
        json.dumps({"format": 1, "implementation": "other", "versions": {"1.0.0": port}}), "utf-8"
    )
    status, out = cli("check", str(SCENARIOS / f"{name}.json"), str(trace), "--expectations", str(file))
    assert status == 1 and f"ERROR {file}: not a usable expectations file:" in out
    assert f"$.versions.1.0.0.differs.{name}.assert[0]" in out


# -- reports and the table ------------------------------------------------------------------------


def test_reports_make_the_table_and_it_can_be_checked(tmp_path: Path) -> None:
    name = "tool_call_then_final_answer"
    trace = tmp_path / f"{name}.jsonl"
    write_trace(trace, name, "other 1.0.0", expected(name))
    report = tmp_path / "other.json"
    status, _ = cli("check", str(SCENARIOS / f"{name}.json"), str(trace), "--report", str(report))
    assert status == 0
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["implementation"] == "other 1.0.0" and data["profiles"]["core"]["agreed"] == 1
    page = tmp_path / "page.md"
    page.write_text(f"before\n{BEGIN}\nold\n{END}\nafter\n", encoding="utf-8")
    assert cli("table", str(report), "--update", str(page), "--check")[0] == 1
    assert cli("table", str(report), "--update", str(page))[0] == 0
    suite = (SCENARIOS / "VERSION").read_text(encoding="utf-8").strip()
    assert f"| other 1.0.0 | {suite} | 1/1 |" in page.read_text(encoding="utf-8")
    assert cli("table", str(report), "--update", str(page), "--check")[0] == 0


def test_a_result_message_before_its_call_ended_is_not_a_free_ordering(tmp_path: Path) -> None:
    name = "tool_call_then_final_answer"
    outcome = expected(name)
    events = outcome["events"]
    start = index_of(events, type="tool_execution_start")
    pair = [
        i for i, e in enumerate(events) if (e.get("role") or e.get("message", {}).get("role")) == "toolResult"
    ]
    moved = [events[i] for i in pair]
    rest = [e for i, e in enumerate(events) if i not in pair]
    outcome["events"] = rest[:start] + moved + rest[start:]
    assert check(tmp_path, name, outcome)[0] == 1


def test_an_assertion_tells_true_from_one() -> None:
    from yiemagent.testing.parity._expectations import matches

    assert matches({"is_error": True}, {"is_error": True})
    assert not matches({"is_error": 1}, {"is_error": True})
    assert not matches({"n": True}, {"n": 1}) and not matches(False, 0)
    assert matches({"n": 2}, {"n": 2.0})

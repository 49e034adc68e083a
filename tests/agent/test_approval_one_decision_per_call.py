"""One decision per call shown, and none taken from a file: a reply with two calls of one id,
an id reused from an earlier batch, and a session file edited by hand can never make one
decision cover two calls, apply a decision to a batch it was not given for, or run a call of a
tool that needs approval without a decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_approval import WAIT, Ran, agent, calls, results

from yiemagent import Approve, Deny, Edit, PendingApproval, YiemAgent
from yiemagent.errors import ApprovalError, SessionError
from yiemagent.testing import ScriptedModel

# -- two calls of one id in one reply -----------------------------------------------------------


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
def test_two_calls_with_one_id_are_shown_apart_and_the_denied_one_never_runs(mode: str) -> None:
    ran = Ran()
    tools = [ran.tool("rm", needs_approval=True, parallel=True), ran.tool("ls", parallel=True)]
    replies = [calls(("dup", "rm", {"path": "/a"}), ("dup", "rm", {"path": "/b"})), "done"]
    with agent(ran, replies, tools=tools, tool_execution=mode) as a:
        assert a.prompt("go", timeout=WAIT).stop_reason == "awaiting_approval"
        pending = a.pending_approvals
        assert [p.arguments for p in pending] == [{"path": "/a"}, {"path": "/b"}]
        first, second = (p.tool_call_id for p in pending)
        assert first == "dup" and second != "dup"  # the second got a fresh id, as id-less calls do
        a.resume({first: Deny("not /a"), second: Approve()})
        assert a.take_response(timeout=WAIT).stop_reason == "stop"
        assert ran.calls == [(second, {"path": "/b"})]
        assert [(r[0], r[2]) for r in results(a)] == [(first, "denied"), (second, None)]
        request_ids = [c.id for c in a.messages[1].content]  # what the provider is sent next
        assert request_ids == [first, second]


def test_two_calls_with_one_id_and_no_approval_each_get_a_result_of_their_own() -> None:
    """Without approval too: each call's result answers it alone, so the next request pairs
    every call with one result (providers refuse two results for one id)."""
    ran = Ran()
    replies = [calls(("dup", "ls", {"path": "/a"}), ("dup", "ls", {"path": "/b"})), "done"]
    with agent(ran, replies) as a:
        assert a.prompt("go", timeout=WAIT).stop_reason == "stop"
        ids = [c.id for c in a.messages[1].content]
        assert ids[0] == "dup" and len(set(ids)) == 2
        assert [r[0] for r in results(a)] == ids and [c for c, _ in ran.calls] == ids


def test_one_decision_cannot_cover_two_calls_of_one_id() -> None:
    ran = Ran()
    replies = [calls(("dup", "rm", {"path": "/a"}), ("dup", "rm", {"path": "/b"})), "done"]
    with agent(ran, replies) as a:
        a.prompt("go", timeout=WAIT)
        with pytest.raises(ApprovalError, match=r"no decision for .* \(rm\)"):
            a.resume({"dup": Approve()})
        assert ran.calls == []


def test_a_history_given_with_two_waiting_calls_of_one_id_refuses_the_second(tmp_path: Path) -> None:
    """A history the agent did not build (given as messages) can hold a reply whose calls share
    an id: the second is refused in its place rather than shown under an id that names two."""
    ran = Ran()
    source = Ran()
    with agent(source, [calls(("dup", "rm", {"path": "/a"}), ("dup", "rm", {"path": "/b"}))]) as a:
        a.prompt("go", timeout=WAIT)
    reply = a.messages[1]
    first, second = reply.content
    history = [a.messages[0], attrs.evolve(reply, content=[first, attrs.evolve(second, id="dup")])]
    with YiemAgent(llm_call=ScriptedModel(["done"]), tools=[ran.tool("rm", needs_approval=True)]) as b:
        b.messages = history
        b.resume()
        assert b.take_response(timeout=WAIT).stop_reason == "awaiting_approval"
        assert b.pending_approvals == [PendingApproval("dup", "rm", {"path": "/a"})]
        b.save(tmp_path / "s.json")  # the refused call ended: the batch is one a file can hold
        with YiemAgent.load(tmp_path / "s.json", llm_call=ScriptedModel([]), tools=b.tools) as reloaded:
            assert reloaded.pending_approvals == b.pending_approvals
        b.resume({"dup": Approve()})
        b.take_response(timeout=WAIT)
        assert ran.calls == [("dup", {"path": "/a"})]
        assert [r[2] for r in results(b)] == [None, "denied"]
        assert "same id (dup)" in results(b)[1][3]


# -- an id reused after the batch it named ------------------------------------------------------


def test_an_approve_for_a_superseded_batch_never_applies_to_a_later_batch_reusing_its_id() -> None:
    ran = Ran()
    replies = [calls(("c1", "rm", {"path": "/a"})), calls(("c1", "rm", {"path": "/important"})), "done"]
    with agent(ran, replies) as a:
        a.prompt("delete /a", timeout=WAIT)
        shown = a.pending_approvals  # what the user is looking at
        a.run_agent("actually, do something else")  # ends the pause: c1 is denied
        assert a.take_response(timeout=WAIT).stop_reason == "awaiting_approval"
        assert [p.arguments for p in a.pending_approvals] == [{"path": "/important"}]
        assert a.pending_approvals[0].tool_call_id != shown[0].tool_call_id
        with pytest.raises(ApprovalError, match="not waiting for approval: c1"):
            a.resume({shown[0].tool_call_id: Approve()})  # the stale decision
        assert ran.calls == []


def test_an_id_used_earlier_in_the_history_is_not_shown_for_approval_again() -> None:
    ran = Ran()
    replies = [calls(("c1", "ls", {})), calls(("c1", "rm", {"path": "/a"})), "done"]
    with agent(ran, replies) as a:
        assert a.prompt("go", timeout=WAIT).stop_reason == "awaiting_approval"
        (waiting,) = a.pending_approvals
        assert waiting.tool_call_id != "c1"
        a.resume({waiting.tool_call_id: Approve()})
        a.take_response(timeout=WAIT)
        assert ran.calls == [("c1", {}), (waiting.tool_call_id, {"path": "/a"})]


# -- a session file edited by hand --------------------------------------------------------------


def _paused_session(tmp_path: Path, replies: list[Any], **kw: Any) -> Path:
    path = tmp_path / "s.json"
    with agent(Ran(), replies, **kw) as a:
        assert a.prompt("go", timeout=WAIT).stop_reason == "awaiting_approval"
        a.save(path)
    return path


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data["paused_batch"])
    path.write_text(json.dumps(data), encoding="utf-8")


def test_a_call_marked_as_needing_no_approval_in_the_file_still_waits_for_a_decision(tmp_path: Path) -> None:
    path = _paused_session(tmp_path, [calls(("c1", "rm", {"path": "/a"}), ("c2", "ls", {}))])

    def no_approval_and_other_arguments(batch: dict[str, Any]) -> None:
        batch["calls"][0]["needs_approval"] = False
        batch["calls"][0]["arguments"] = {"path": "/etc/passwd"}

    _edit(path, no_approval_and_other_arguments)
    loaded = Ran()
    tools = [loaded.tool("rm", needs_approval=True), loaded.tool("ls")]
    with YiemAgent.load(path, llm_call=ScriptedModel(["done", "done"]), tools=tools) as b:
        # exactly what an Approve would run
        assert b.pending_approvals == [PendingApproval("c1", "rm", {"path": "/etc/passwd"})]
        with pytest.raises(ValueError, match=r"no decision for c1 \(rm\)"):
            b.resume()  # a plain resume decides nothing
        with pytest.raises(ApprovalError, match=r"no decision for c1 \(rm\)"):
            b.resume({})
        b.resume({"c1": Deny("no")})
        b.take_response(timeout=WAIT)
        assert loaded.calls == [("c2", {})]
        assert [(r[0], r[2]) for r in results(b)] == [("c1", "denied"), ("c2", None)]


def test_the_agents_policy_keeps_asking_after_a_load_whatever_the_file_says(tmp_path: Path) -> None:
    def policy(tool: Any, _args: Any, _context: Any) -> bool:
        return bool(tool.name == "ls")

    path = _paused_session(tmp_path, [calls(("c1", "ls", {}))], needs_approval=policy)
    _edit(path, lambda batch: batch["calls"][0].update(needs_approval=False))
    loaded = Ran()
    with YiemAgent.load(
        path, llm_call=ScriptedModel(["done"]), tools=[loaded.tool("ls")], needs_approval=policy
    ) as b:
        assert [p.tool_call_id for p in b.pending_approvals] == ["c1"]
        b.resume({"c1": Deny()})
        b.take_response(timeout=WAIT)
    assert loaded.calls == []


def test_arguments_a_file_holds_for_a_call_without_approval_are_checked_again(tmp_path: Path) -> None:
    path = _paused_session(tmp_path, [calls(("c1", "rm", {"path": "/a"}), ("c2", "ls", {"path": "/"}))])
    _edit(path, lambda batch: batch["calls"][1].update(arguments={"path": 5}))
    loaded = Ran()
    tools = [loaded.tool("rm", needs_approval=True), loaded.tool("ls")]
    with YiemAgent.load(path, llm_call=ScriptedModel(["done"]), tools=tools) as b:
        b.resume({"c1": Approve()})
        b.take_response(timeout=WAIT)
        assert loaded.calls == [("c1", {"path": "/a"})]
        assert results(b)[1][:3] == ("c2", True, "schema_violation")


def _set_call(index: int, **fields: Any) -> Any:
    return lambda batch: batch["calls"][index].update(fields)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_set_call(0, arguments="rm -rf /"), "arguments must be an object or null"),
        (_set_call(0, arguments=None), "neither arguments nor an outcome"),
        (_set_call(0, needs_approval="no"), "needs_approval must be true or false"),
        (_set_call(0, started=1), "started must be true or false"),
        (_set_call(0, outcome={"result": 3, "is_error": False}), "outcome needs a result object"),
        (_set_call(0, tool_call={"id": "c2", "name": "ls", "arguments": {}}), "two open calls with one id"),
        (
            _set_call(0, tool_call={"id": "zz", "name": "rm", "arguments": {}}),
            "not calls of the batch's reply",
        ),
        (
            _set_call(0, tool_call={"id": "c1", "name": "ls", "arguments": {}}),
            "not calls of the batch's reply",
        ),
        (lambda batch: batch.update(calls=[]), "at least one call"),
        (lambda batch: batch.update(calls={"c1": {}}), "calls must be a list"),
        (lambda batch: batch.update(parallel="yes"), "parallel must be true or false"),
    ],
)
def test_a_paused_batch_that_cannot_be_read_is_a_session_error_at_load(
    tmp_path: Path, change: Any, says: str
) -> None:
    path = _paused_session(tmp_path, [calls(("c1", "rm", {"path": "/a"}), ("c2", "ls", {}))])
    _edit(path, change)
    with pytest.raises(SessionError, match=r"s\.json") as caught:
        YiemAgent.load(path, llm_call=ScriptedModel([]), tools=[Ran().tool("rm", needs_approval=True)])
    assert says in str(caught.value)


# -- an edit nested too deep --------------------------------------------------------------------


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_an_edit_nested_too_deep_is_an_approval_error_not_a_recursion_error(depth: int) -> None:
    deep: Any = "leaf"
    for _ in range(depth):
        deep = {"a": deep}
    with pytest.raises(ApprovalError, match="nested more than 64 levels deep"):
        Edit({"path": deep})
    with pytest.raises(ValueError):
        Edit({"path": [deep]})

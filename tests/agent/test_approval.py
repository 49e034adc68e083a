"""Approval before a tool runs: a batch with calls that need approval pauses as a whole, the
decisions run it with exactly the arguments shown (or the edit), denied calls never run, and
nothing slips past a pause: not a new message, not an abort, not a reload of the session."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from yiemagent import AgentTool, AgentToolResult, Approve, Deny, Edit, PendingApproval, YiemAgent
from yiemagent.errors import ApprovalError
from yiemagent.testing import ScriptedModel

WAIT = 10.0


class Ran:
    """What the tools executed: (call id, arguments), in order, from any thread."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def tool(
        self,
        name: str,
        needs_approval: Any = False,
        parallel: bool = False,
        terminate: bool = False,
        **kw: Any,
    ) -> AgentTool:
        def execute(call_id: str, args: dict[str, Any], _signal: Any, _update: Any) -> AgentToolResult:
            with self.lock:
                self.calls.append((call_id, dict(args)))
            return AgentToolResult(f"{name} did {json.dumps(args, sort_keys=True)}", terminate=terminate)

        schema = {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": True}
        return AgentTool(
            name,
            name,
            f"{name} things",
            schema,
            execute,
            needs_approval=needs_approval,
            parallel_tool_execute=parallel,
            **kw,
        )

    def ids(self) -> list[str]:
        return [c for c, _ in self.calls]


def calls(*items: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in items]}


def agent(ran: Ran, replies: list[Any], **kw: Any) -> YiemAgent:
    kw.setdefault("tools", [ran.tool("rm", needs_approval=True), ran.tool("ls")])
    return YiemAgent(llm_call=ScriptedModel(replies), **kw)


def results(a: YiemAgent) -> list[tuple[str, bool, str | None, str]]:
    return [
        (m.tool_call_id, m.is_error, m.details.get("error_kind"), m.content[0].text if m.content else "")
        for m in a.messages
        if m.role == "toolResult"
    ]


# -- the pause --------------------------------------------------------------------------------


def test_a_batch_with_a_call_that_needs_approval_pauses_and_nothing_runs() -> None:
    ran, events = Ran(), []
    replies = [calls(("c1", "ls", {}), ("c2", "rm", {"path": "/a"})), "done"]
    with agent(ran, replies, agent_event_sink=events.append) as a:
        response = a.prompt("go", timeout=WAIT)
        assert response.stop_reason == "awaiting_approval" and response.error_message is None
        assert ran.calls == []  # not even the call that needs no approval
        assert a.pending_approvals == [PendingApproval("c2", "rm", {"path": "/a"})]
        requested = [e for e in events if e.event_type == "approval_requested"]
        assert [p.tool_call_id for p in requested[0].pending] == ["c2"]
        assert requested[0].to_dict()["pending"] == [
            {"tool_call_id": "c2", "tool_name": "rm", "arguments": {"path": "/a"}}
        ]
        assert a.messages[-1].role == "assistant"  # no result yet, not even for c1


def test_the_arguments_shown_are_the_prepared_ones_and_those_run() -> None:
    ran = Ran()
    rm = ran.tool("rm", needs_approval=True, prepare_arguments=lambda a: {**a, "path": a["path"].upper()})
    with agent(ran, [calls(("c1", "rm", {"path": "/a"})), "done"], tools=[rm]) as a:
        a.prompt("go", timeout=WAIT)
        assert a.pending_approvals[0].arguments == {"path": "/A"}
        with pytest.raises(TypeError):
            a.pending_approvals[0].arguments["path"] = "/etc"  # type: ignore[index]
        a.resume({"c1": Approve()})
        assert a.take_response(timeout=WAIT).stop_reason == "stop"
    assert ran.calls == [("c1", {"path": "/A"})]


def test_approve_deny_and_edit_each_do_what_they_say() -> None:
    ran = Ran()
    replies = [
        calls(
            ("c1", "rm", {"path": "/a"}),
            ("c2", "ls", {}),
            ("c3", "rm", {"path": "/b"}),
            ("c4", "rm", {"path": "/c"}),
        ),
        "done",
    ]
    with agent(ran, replies) as a:
        a.prompt("go", timeout=WAIT)
        a.resume({"c1": Approve(), "c3": Deny("Not that one."), "c4": Edit({"path": "/tmp/c"})})
        assert a.take_response(timeout=WAIT).stop_reason == "stop"
        assert ran.calls == [("c1", {"path": "/a"}), ("c2", {}), ("c4", {"path": "/tmp/c"})]
        assert results(a) == [
            ("c1", False, None, 'rm did {"path": "/a"}'),
            ("c2", False, None, "ls did {}"),
            ("c3", True, "denied", "Not that one."),
            ("c4", False, None, 'rm did {"path": "/tmp/c"}'),
        ]
        assert a.pending_approvals == []


@pytest.mark.parametrize(
    ("approvals", "says"),
    [
        ({}, "no decision for c1 (rm)"),
        ({"c1": Approve(), "zz": Approve()}, "not waiting for approval: zz"),
        ({"c1": Edit({"path": 3})}, "args.path: 3 is not of type 'string'"),
        ({"c1": "yes"}, "must be Approve(), Deny(reason) or Edit(arguments), got str"),
        ({"c1": Edit({"path": float("nan")})}, "args.path is nan, which is not a JSON number"),
    ],
)
def test_unusable_decisions_are_refused_at_the_call_and_nothing_runs(
    approvals: dict[str, Any], says: str
) -> None:
    ran = Ran()
    with agent(ran, [calls(("c1", "rm", {"path": "/a"}), ("c2", "ls", {})), "done"]) as a:
        a.prompt("go", timeout=WAIT)
        with pytest.raises(ApprovalError, match="nothing ran") as caught:
            a.resume(approvals)
        assert says in str(caught.value)
        assert ran.calls == [] and [p.tool_call_id for p in a.pending_approvals] == ["c1"]
        a.resume({"c1": Approve()})  # still resumable with good decisions
        assert a.take_response(timeout=WAIT).stop_reason == "stop"


def test_a_plain_resume_or_decisions_without_a_pause_are_refused() -> None:
    ran = Ran()
    with agent(ran, [calls(("c1", "rm", {"path": "/a"})), "done"]) as a:
        with pytest.raises(ApprovalError, match="no tool calls are waiting for approval"):
            a.resume({"c1": Approve()})
        a.prompt("go", timeout=WAIT)
        with pytest.raises(ApprovalError, match="no decision for c1"):
            a.resume()


def test_a_blocked_call_is_blocked_not_asked_about() -> None:
    ran = Ran()
    block = lambda ctx, _s: {"block": True, "reason": "never"} if ctx.tool_call.id == "c1" else None  # noqa: E731
    with agent(
        ran,
        [calls(("c1", "rm", {"path": "/a"}), ("c2", "rm", {"path": "/b"})), "done"],
        before_tool_call=block,
    ) as a:
        a.prompt("go", timeout=WAIT)
        assert [p.tool_call_id for p in a.pending_approvals] == ["c2"]
        a.resume({"c2": Approve()})
        a.take_response(timeout=WAIT)
        assert results(a)[0] == ("c1", True, "blocked", "never") and ran.ids() == ["c2"]


def test_needs_approval_per_call_and_the_agents_policy() -> None:
    ran = Ran()
    outside = lambda args, _ctx: not args["path"].startswith("/tmp/")  # noqa: E731
    tools = [ran.tool("rm", needs_approval=outside), ran.tool("ls")]
    policy_seen: list[str] = []

    def policy(tool: AgentTool, args: dict[str, Any], _ctx: Any) -> bool:
        policy_seen.append(tool.name)
        return tool.name == "ls" and args.get("all") is True

    replies = [
        calls(
            ("c1", "rm", {"path": "/tmp/x"}),
            ("c2", "rm", {"path": "/etc"}),
            ("c3", "ls", {"all": True}),
            ("c4", "ls", {}),
        ),
        "done",
    ]
    with agent(ran, replies, tools=tools, needs_approval=policy) as a:
        a.prompt("go", timeout=WAIT)
        assert [p.tool_call_id for p in a.pending_approvals] == ["c2", "c3"]
        assert "ls" in policy_seen


def test_a_rule_that_raises_asks_instead_of_running() -> None:
    ran = Ran()
    tools = [ran.tool("rm", needs_approval=lambda _a, _c: 1 / 0)]
    with agent(ran, [calls(("c1", "rm", {"path": "/a"})), "done"], tools=tools) as a:
        assert a.prompt("go", timeout=WAIT).stop_reason == "awaiting_approval"
        assert ran.calls == []


def test_eight_parallel_calls_each_get_their_own_decision() -> None:
    ran = Ran()
    rm = ran.tool("rm", needs_approval=True, parallel=True)
    replies = [calls(*[(f"c{i}", "rm", {"path": f"/{i}"}) for i in range(8)]), "done"]
    decisions: dict[str, Any] = {}
    for i in range(8):
        decisions[f"c{i}"] = [Approve(), Deny(f"no {i}"), Edit({"path": f"/edited/{i}"})][i % 3]
    with agent(ran, replies, tools=[rm], tool_execution="parallel") as a:
        a.prompt("go", timeout=WAIT)
        assert len(a.pending_approvals) == 8
        a.resume(decisions)
        a.take_response(timeout=WAIT)
        got = {r[0]: r for r in results(a)}
        assert [r[0] for r in results(a)] == [f"c{i}" for i in range(8)]  # call order
    for i in range(8):
        kind = i % 3
        if kind == 0:
            assert got[f"c{i}"][3] == f'rm did {{"path": "/{i}"}}'
        elif kind == 1:
            assert got[f"c{i}"][1:] == (True, "denied", f"no {i}")
        else:
            assert got[f"c{i}"][3] == f'rm did {{"path": "/edited/{i}"}}'
    assert sorted(ran.calls) == sorted(
        (f"c{i}", {"path": f"/{i}"} if i % 3 == 0 else {"path": f"/edited/{i}"})
        for i in range(8)
        if i % 3 != 1
    )


def test_terminate_after_the_decisions_ends_the_run() -> None:
    ran = Ran()
    rm = ran.tool("rm", needs_approval=True, terminate=True)
    with agent(ran, [calls(("c1", "rm", {"path": "/a"})), "never asked"], tools=[rm]) as a:
        a.prompt("go", timeout=WAIT)
        a.resume({"c1": Approve()})
        assert a.take_response(timeout=WAIT).stop_reason == "tool_use_terminated"


# -- nothing slips past a pause ----------------------------------------------------------------


@pytest.mark.parametrize("channel", ["run_agent", "follow_up"])
def test_a_message_during_the_pause_supersedes_it_with_denials(channel: str) -> None:
    ran = Ran()
    with agent(ran, [calls(("c1", "rm", {"path": "/a"}), ("c2", "ls", {})), "ok, I will not"]) as a:
        a.prompt("go", timeout=WAIT)
        getattr(a, channel)("stop, do not delete anything")
        assert a.take_response(timeout=WAIT).stop_reason == "stop"
        assert ran.calls == []
        kinds = [(r[0], r[2]) for r in results(a)]
        assert kinds == [("c1", "denied"), ("c2", "skipped")]
        assert "superseded by a new message" in results(a)[0][3]
        roles = [m.role for m in a.messages]
        assert roles == ["user", "assistant", "toolResult", "toolResult", "user", "assistant"]
        assert a.pending_approvals == []


def test_abort_during_the_pause_ends_the_waiting_calls_as_aborted() -> None:
    ran = Ran()
    with agent(ran, [calls(("c1", "rm", {"path": "/a"}), ("c2", "ls", {})), "unused"]) as a:
        a.prompt("go", timeout=WAIT)
        a.abort()
        assert a.take_response(timeout=WAIT).stop_reason == "aborted"
        assert [(r[0], r[2]) for r in results(a)] == [("c1", "aborted"), ("c2", "aborted")]
        assert ran.calls == [] and a.pending_approvals == []


def test_a_tool_gone_before_the_decision_gets_an_error_result() -> None:
    ran = Ran()
    with agent(ran, [calls(("c1", "rm", {"path": "/a"})), "done"]) as a:
        a.prompt("go", timeout=WAIT)
        a.tools = [ran.tool("ls")]
        a.resume({"c1": Approve()})
        a.take_response(timeout=WAIT)
        assert results(a) == [
            ("c1", True, "tool_not_found", 'Tool "rm" no longer exists, so the approved call was not run.')
        ]
        assert ran.calls == []


# -- across a reload ---------------------------------------------------------------------------


def test_the_session_keeps_the_pause_and_a_loaded_agent_resumes_it(tmp_path: Path) -> None:
    ran = Ran()
    path = tmp_path / "s.json"
    with agent(ran, [calls(("c1", "rm", {"path": "/a"}), ("c2", "ls", {}))]) as a:
        a.prompt("go", timeout=WAIT)
        a.save(path)
    loaded_ran = Ran()
    tools = [loaded_ran.tool("rm", needs_approval=True), loaded_ran.tool("ls")]
    with YiemAgent.load(path, llm_call=ScriptedModel(["done"]), tools=tools) as b:
        assert b.pending_approvals == [PendingApproval("c1", "rm", {"path": "/a"})]
        b.resume({"c1": Edit({"path": "/b"})})
        assert b.take_response(timeout=WAIT).stop_reason == "stop"
        assert loaded_ran.calls == [("c1", {"path": "/b"}), ("c2", {})]
        assert [r[0] for r in results(b)] == ["c1", "c2"]
    assert ran.calls == []


def test_a_call_that_had_started_is_never_run_again(tmp_path: Path) -> None:
    """What a crash leaves: the session recorded that c1 started (and c2 ended) but not how c1
    ended. The loaded agent gives c1 an error result saying so and does not run it again."""
    ran = Ran()
    path = tmp_path / "s.json"
    with agent(
        ran, [calls(("c1", "rm", {"path": "/a"}), ("c2", "rm", {"path": "/b"}), ("c3", "ls", {}))]
    ) as a:
        a.prompt("go", timeout=WAIT)
        a.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    first, second, _ = data["paused_batch"]["calls"]
    first["started"] = True
    second.update(
        started=True,
        outcome={
            "result": {
                "content": [{"type": "text", "text": "done before"}],
                "details": {},
                "usage": None,
                "terminate": False,
            },
            "is_error": False,
        },
    )
    path.write_text(json.dumps(data), encoding="utf-8")
    loaded = Ran()
    with YiemAgent.load(
        path,
        llm_call=ScriptedModel(["done"]),
        tools=[loaded.tool("rm", needs_approval=True), loaded.tool("ls")],
    ) as b:
        assert b.pending_approvals == []  # nothing is left to decide
        b.resume()
        b.take_response(timeout=WAIT)
        got = results(b)
    assert got[0][:3] == ("c1", True, "interrupted") and "not run again" in got[0][3]
    assert got[1] == ("c2", False, None, "done before")
    assert loaded.calls == [("c3", {})]


def test_the_session_file_is_saved_before_each_approved_call_runs(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    seen: list[dict[str, Any]] = []

    def execute(call_id: str, args: dict[str, Any], _s: Any, _u: Any) -> AgentToolResult:
        calls_now = json.loads(path.read_text(encoding="utf-8"))["paused_batch"]["calls"]
        seen.append({c["tool_call"]["id"]: (c["started"], c["outcome"] is not None) for c in calls_now})
        return AgentToolResult("ok")

    rm = AgentTool("rm", "rm", "rm", {"type": "object"}, execute, needs_approval=True)
    replies = [calls(("c1", "rm", {}), ("c2", "rm", {})), "done"]
    with YiemAgent(llm_call=ScriptedModel(replies), tools=[rm], session_file=path) as a:
        a.prompt("go", timeout=WAIT)
        assert "paused_batch" in json.loads(path.read_text(encoding="utf-8"))  # saved after the run
        a.resume({"c1": Approve(), "c2": Approve()})
        a.take_response(timeout=WAIT)
        assert a.wait_for_idle(WAIT)
    assert seen == [{"c1": (True, False), "c2": (False, False)}, {"c1": (True, True), "c2": (True, False)}]
    final = json.loads(path.read_text(encoding="utf-8"))
    assert "paused_batch" not in final and [m["role"] for m in final["messages"]][-3:] == [
        "toolResult",
        "toolResult",
        "assistant",
    ]


def test_reset_or_a_new_history_drops_the_waiting_calls() -> None:
    for change in ("reset", "history"):
        ran = Ran()
        with agent(ran, [calls(("c1", "rm", {"path": "/a"})), "hello"]) as a:
            a.prompt("go", timeout=WAIT)
            if change == "reset":
                a.reset()
            else:
                a.messages = []
            assert a.pending_approvals == []
            with pytest.raises(ValueError, match="history is empty"):
                a.resume()
            assert a.prompt("hi", timeout=WAIT).stop_reason == "stop"
        assert ran.calls == []


# -- found in review: each once let a call run undecided, lost a result or a skip -------------


def test_a_plain_resume_queued_before_the_pause_decides_nothing() -> None:
    ran, gate = Ran(), threading.Event()
    replies = [lambda _r: gate.wait(WAIT) and calls(("c1", "ls", {}), ("c2", "rm", {"path": "/a"})), "done"]
    with agent(ran, replies) as a:
        a.run_agent("go")
        a.resume()  # queued behind the run, which then pauses
        gate.set()
        assert a.take_response(timeout=WAIT).stop_reason == "awaiting_approval"
        refused = a.take_response(timeout=WAIT)
        assert refused.stop_reason == "error" and "use resume(approvals=...)" in (refused.error_message or "")
        assert ran.calls == [] and [p.tool_call_id for p in a.pending_approvals] == ["c2"]


def test_a_save_during_the_run_that_pauses_holds_no_half_of_it(tmp_path: Path) -> None:
    ran, path = Ran(), tmp_path / "s.json"
    holder: list[YiemAgent] = []
    sink = lambda e: e.event_type == "approval_requested" and holder[0].save(path)  # noqa: E731
    with agent(ran, [calls(("c1", "rm", {"path": "/a"})), "done"], agent_event_sink=sink) as a:
        holder.append(a)
        a.prompt("go", timeout=WAIT)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert "paused_batch" not in saved and saved["messages"] == []  # the run had not ended


def test_a_steering_message_still_skips_the_rest_of_a_batch_an_approval_rule_looks_at() -> None:
    ran, started = Ran(), threading.Event()
    release = threading.Event()

    def slow(call_id: str, args: dict[str, Any], _s: Any, _u: Any) -> AgentToolResult:
        ran.calls.append((call_id, args))
        started.set()
        release.wait(WAIT)
        return AgentToolResult("slow done")

    schema = {"type": "object"}
    tools = [AgentTool("slow", "slow", "slow", schema, slow), ran.tool("ls")]
    replies = [calls(("c1", "slow", {}), ("c2", "ls", {}), ("c3", "ls", {})), "ok"]
    policy = lambda *_: False  # noqa: E731  (asked about every call, never gates one)
    with agent(ran, replies, tools=tools, needs_approval=policy, skip_tools_on_steer=True) as a:
        a.run_agent("go")
        assert started.wait(WAIT)
        a.run_agent("stop")
        release.set()
        assert a.take_response(timeout=WAIT).stop_reason == "stop"
        assert [(r[0], r[2]) for r in results(a)] == [("c1", None), ("c2", "skipped"), ("c3", "skipped")]


def test_nothing_is_pending_while_the_decisions_run() -> None:
    seen: list[list[PendingApproval]] = []
    holder: list[YiemAgent] = []

    def look(call_id: str, args: dict[str, Any], _s: Any, _u: Any) -> AgentToolResult:
        seen.append(holder[0].pending_approvals)
        return AgentToolResult("ok")

    rm = AgentTool("rm", "rm", "rm", {"type": "object"}, look, needs_approval=True)
    with agent(Ran(), [calls(("c1", "rm", {}), ("c2", "rm", {})), "done"], tools=[rm]) as a:
        holder.append(a)
        a.prompt("go", timeout=WAIT)
        a.resume({"c1": Approve(), "c2": Approve()})
        a.take_response(timeout=WAIT)
    assert seen == [[], []]


def test_in_parallel_each_outcome_is_saved_as_its_call_ends(tmp_path: Path) -> None:
    path, release = tmp_path / "s.json", threading.Event()

    def run(call_id: str, args: dict[str, Any], _s: Any, _u: Any) -> AgentToolResult:
        if call_id == "slow":
            release.wait(WAIT)
        return AgentToolResult(call_id)

    tool = AgentTool("t", "t", "t", {"type": "object"}, run, needs_approval=True, parallel_tool_execute=True)
    replies = [calls(("fast", "t", {}), ("slow", "t", {})), "done"]
    with YiemAgent(
        llm_call=ScriptedModel(replies), tools=[tool], tool_execution="parallel", session_file=path
    ) as a:
        a.prompt("go", timeout=WAIT)
        a.resume({"fast": Approve(), "slow": Approve()})
        deadline = threading.Event()
        snapshot: dict[str, Any] = {}
        # Bounded: until the file shows the fast call ended while the slow one (which waits for
        # the release) has started; before the fix the fast outcome came only with the slow one.
        for _ in range(1000):
            progress = json.loads(path.read_text(encoding="utf-8")).get("paused_batch", {}).get("calls", [])
            snapshot = {c["tool_call"]["id"]: (c["started"], c["outcome"] is not None) for c in progress}
            if snapshot == {"fast": (True, True), "slow": (True, False)}:
                break
            deadline.wait(0.01)
        release.set()
        assert a.take_response(timeout=WAIT).stop_reason == "stop"
    assert snapshot == {"fast": (True, True), "slow": (True, False)}

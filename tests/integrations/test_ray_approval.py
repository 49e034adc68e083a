"""Approval before a tool runs, on a real local Ray cluster: a ``RemoteAgent`` and an
``AgentPool`` session pause on a call that needs approval, list it, and resume with decisions,
also after the session was saved and taken up by another actor.

The module starts its own cluster (as ``test_ray_cluster`` does) with this folder on the
workers' PYTHONPATH too, so they import ``ray_approval_helpers`` (a ``ScriptedModel`` and the
``record`` tool, which needs approval and appends a line with its process id to a file). Every
wait is on a response, with generous timeouts; no test sleeps or asserts a duration.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from pathlib import Path
from typing import Any

import pytest
from paths import TESTS
from tiers import absent

ray = pytest.importorskip("ray", reason=absent("ray"))

import ray_helpers as helpers  # noqa: E402

from yiemagent import (  # noqa: E402
    AgentToolCall,
    Approve,
    AssistantMessage,
    Deny,
    Edit,
    PendingApproval,
    TextContent,
    ToolResultMessage,
)
from yiemagent.errors import ApprovalError  # noqa: E402
from yiemagent.integrations.ray import AgentPool, AgentSettings, DirectoryStore, RemoteAgent  # noqa: E402

pytestmark = pytest.mark.timeout(300)

HERE = str(Path(__file__).resolve().parent)
W = 120.0  # seconds any test waits for a response before failing


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Any:
    """A local Ray cluster for this module whose workers import both helper modules."""
    with helpers.local_cluster(os.pathsep.join([str(TESTS), HERE])):
        yield


def settings() -> AgentSettings:
    return AgentSettings(
        model_spec="scripted",
        llm_factory="ray_approval_helpers:make_llm",
        tool_imports=("ray_approval_helpers:approval_tools",),
        system_prompt="You are a test.",
    )


def text(message: AssistantMessage | ToolResultMessage | Any) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def record_call(log: Path, words: str = " hello ") -> str:
    return "call record " + json.dumps({"path": str(log), "text": words})


def paused_call(response: AssistantMessage, messages: list[Any]) -> AgentToolCall:
    """The one call of the model's last reply in ``messages``, for which the run that gave
    ``response`` paused."""
    assert response.stop_reason == "awaiting_approval", response
    reply = [m for m in messages if isinstance(m, AssistantMessage)][-1]
    calls = [b for b in reply.content if isinstance(b, AgentToolCall)]
    assert len(calls) == 1 and calls[0].name == "record"
    assert not isinstance(messages[-1], ToolResultMessage)  # nothing answered it yet
    return calls[0]


def stored_messages(store: DirectoryStore, session_id: str) -> list[Any]:
    data = store.load(session_id)
    assert data is not None
    return list(data.messages)


def check_pending(pending: list[PendingApproval], call: AgentToolCall, log: Path) -> None:
    """``pending`` lists ``call`` alone, with its prepared arguments (text stripped, upper-cased)."""
    assert [(p.tool_call_id, p.tool_name) for p in pending] == [(call.id, "record")]
    assert dict(pending[0].arguments) == {"path": str(log), "text": "HELLO"}


def last_result(messages: list[Any]) -> ToolResultMessage:
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert results, messages
    return results[-1]


# -- a remote agent -------------------------------------------------------------------------


def test_a_remote_agent_pauses_and_an_approved_call_runs_in_its_actor(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    agent = RemoteAgent.start(settings())
    try:
        call = paused_call(agent.prompt(record_call(log), W), agent.messages)
        check_pending(agent.pending_approvals, call, log)
        assert not log.exists() and not agent.is_running

        agent.resume(approvals={call.id: Approve()})
        assert text(agent.take_response(W)) == "done: recorded HELLO"
        assert log.read_text() == f"HELLO {agent.pid}\n"  # it ran once, in the actor's process
        assert agent.pid != os.getpid()
        assert agent.pending_approvals == []
        result = last_result(agent.messages)
        assert result.tool_call_id == call.id and not result.is_error
        assert agent.session_data().paused is None
    finally:
        agent.shutdown(timeout=W)


def test_a_denied_call_gets_the_reason_and_does_not_run(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    agent = RemoteAgent.start(settings())
    try:
        call = paused_call(agent.prompt(record_call(log), W), agent.messages)
        agent.resume(approvals={call.id: Deny("not this file")})
        assert text(agent.take_response(W)) == "done: not this file"
        result = last_result(agent.messages)
        assert result.tool_call_id == call.id and result.is_error and text(result) == "not this file"
        assert not log.exists()
        assert agent.pending_approvals == []
    finally:
        agent.shutdown(timeout=W)


def test_unusable_decisions_raise_approval_error_at_the_caller_and_nothing_runs(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    agent = RemoteAgent.start(settings())
    try:
        call = paused_call(agent.prompt(record_call(log), W), agent.messages)
        with pytest.raises(ApprovalError) as caught:
            agent.resume(approvals={call.id: Edit({"path": str(log)})})  # no "text": the schema says no
        assert type(caught.value) is ApprovalError
        assert "nothing ran" in str(caught.value) and f"the edit of {call.id} (record)" in str(caught.value)
        with pytest.raises(ApprovalError, match="no decision for"):
            agent.resume()
        with pytest.raises(ApprovalError, match="not waiting for approval: c-nope"):
            agent.resume(approvals={call.id: Approve(), "c-nope": Approve()})
        assert not log.exists() and not agent.is_running
        check_pending(agent.pending_approvals, call, log)  # still waiting, as it was

        agent.resume(approvals={call.id: Edit({"path": str(log), "text": "edited"})})
        assert text(agent.take_response(W)) == "done: recorded edited"  # the edit, as given
        assert log.read_text() == f"edited {agent.pid}\n"
        with pytest.raises(ApprovalError, match="no tool calls are waiting"):
            agent.resume(approvals={call.id: Approve()})
    finally:
        agent.shutdown(timeout=W)


def test_a_saved_paused_session_resumes_in_another_remote_agent(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    store = DirectoryStore(tmp_path / "store")
    first = RemoteAgent.start(settings(), session_id="paused-remote")
    try:
        call = paused_call(first.prompt(record_call(log), W), first.messages)
        first.save(store)
    finally:
        first.shutdown(timeout=W)
    saved = store.load("paused-remote")
    assert saved is not None and saved.paused is not None
    check_pending(saved.paused.pending(), call, log)

    again = RemoteAgent.load(store, settings(), session_id="paused-remote")
    try:
        assert again.pid != first.pid
        check_pending(again.pending_approvals, call, log)
        again.resume(approvals={call.id: Approve()})
        assert text(again.take_response(W)) == "done: recorded HELLO"
        assert log.read_text() == f"HELLO {again.pid}\n"
        assert again.pending_approvals == []
    finally:
        again.shutdown(timeout=W)


# -- a pool ---------------------------------------------------------------------------------


def test_a_pool_session_pauses_and_resumes_after_a_save_and_a_move(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    store = DirectoryStore(tmp_path / "store")
    with AgentPool(2, settings(), store, idle_timeout_s=None) as pool:
        call = paused_call(
            pool.prompt("approve-me", record_call(log), W), stored_messages(store, "approve-me")
        )
        check_pending(pool.pending_approvals("approve-me"), call, log)
        saved = store.load("approve-me")
        assert saved is not None and saved.paused is not None  # saved after the run, paused
        with pytest.raises(ApprovalError, match=f"the edit of {call.id}"):
            pool.resume("approve-me", {call.id: Edit({"text": "no path"})}, W)
        assert pool.evict("approve-me")
        check_pending(pool.pending_approvals("approve-me"), call, log)  # from the store
        assert pool.pending_approvals("never-seen") == []
        first_pids = {s["pid"] for s in pool.stats()}
    assert not log.exists()

    # A new pool of another size: new actors, and the session may sit in another slot.
    with AgentPool(3, settings(), store, idle_timeout_s=None) as moved:
        check_pending(moved.pending_approvals("approve-me"), call, log)
        response = moved.resume("approve-me", {call.id: Approve()}, W)
        assert text(response) == "done: recorded HELLO"
        pid = int(log.read_text().split()[1])
        assert pid == moved.stats()[moved.slot_of("approve-me")]["pid"] and pid not in first_pids
        assert moved.pending_approvals("approve-me") == []
        with pytest.raises(ApprovalError, match="no tool calls are waiting"):
            moved.resume("approve-me", {call.id: Approve()}, W)
        assert text(moved.prompt("approve-me", "and now", W)) == "#2 and now"
    saved = store.load("approve-me")
    assert saved is not None and saved.paused is None
    result = last_result(saved.messages)
    assert result.tool_call_id == call.id and not result.is_error
    assert log.read_text().count("\n") == 1  # it ran once


def test_a_pool_session_denied_after_a_reload_does_not_run(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    store = DirectoryStore(tmp_path / "store")
    with AgentPool(2, settings(), store, idle_timeout_s=None) as pool:
        call = paused_call(pool.prompt("deny-me", record_call(log), W), stored_messages(store, "deny-me"))
        assert pool.evict("deny-me")
        response = pool.resume("deny-me", {call.id: Deny("no, thanks")}, W)  # loads it again
        assert text(response) == "done: no, thanks"
        assert pool.pending_approvals("deny-me") == []
    assert not log.exists()
    saved = store.load("deny-me")
    assert saved is not None and saved.paused is None
    result = last_result(saved.messages)
    assert result.is_error and text(result) == "no, thanks"


def test_a_pool_actor_that_dies_during_an_approved_call_never_runs_it_again(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "store")
    with AgentPool(1, settings(), store, idle_timeout_s=None) as pool:
        reply = pool.prompt("doomed", 'call gated {"key": "approval-kill"}', W)
        assert reply.stop_reason == "awaiting_approval"
        [waiting] = pool.pending_approvals("doomed")
        doomed = pool.actor_for("doomed")
        with concurrent.futures.ThreadPoolExecutor(1) as caller:
            in_flight = caller.submit(pool.resume, "doomed", {waiting.tool_call_id: Approve()}, W)
            assert helpers.latch_wait("started:approval-kill", W)
            ray.kill(doomed)
            lost = in_flight.result(W)  # an answer, not a hang
        assert lost.stop_reason == "error" and "actor died" in (lost.error_message or "")
        saved = store.load("doomed")  # saved before the call started: marked as started
        assert saved is not None and saved.paused is not None
        assert [c.started for c in saved.paused.calls] == [True]
        assert pool.pending_approvals("doomed") == []  # a started call waits for nothing
        with pytest.raises(ApprovalError, match="not waiting for approval"):
            pool.resume("doomed", {waiting.tool_call_id: Approve()}, W)
        finished = pool.resume("doomed", timeout=W)  # ends the batch: the call is interrupted
        assert finished.stop_reason != "awaiting_approval"
        assert pool.restarts == 1
    saved = store.load("doomed")
    assert saved is not None and saved.paused is None
    result = last_result(saved.messages)
    assert result.tool_call_id == waiting.tool_call_id and result.is_error
    assert "it was not run again" in text(result)  # interrupted: never run a second time
    assert text(finished) == "done: " + text(result)

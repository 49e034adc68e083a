"""``settle_approvals`` in-process: what the command does when the agent refuses the decisions
(``ApprovalError``: shown, then asked again) and when a resumed run pauses again. A stand-in
agent plays the approval API, so each path is reached exactly."""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from yiemagent import Approve, Deny, Edit, PendingApproval
from yiemagent.cli._approve import Approver, settle_approvals
from yiemagent.core._messages import AssistantMessage
from yiemagent.errors import ApprovalError, CliError


class PausingAgent:
    """Waits for approval of ``batches`` in turn; ``refusals`` resumes raise ``ApprovalError``."""

    def __init__(self, batches: list[list[PendingApproval]], refusals: int = 0) -> None:
        self.batches = batches
        self.refusals = refusals
        self.resumed: list[Mapping[str, Any]] = []
        self.tools: dict[str, Any] = {}

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        return list(self.batches[0]) if self.batches else []

    def resume(self, approvals: Mapping[str, Any]) -> None:
        if self.refusals:
            self.refusals -= 1
            raise ApprovalError(
                "the approvals cannot be used, so nothing ran:\n- the edit of call_1 is not valid"
            )
        self.resumed.append(dict(approvals))
        self.batches.pop(0)

    def response(self) -> AssistantMessage:
        return AssistantMessage(stop_reason="awaiting_approval" if self.batches else "stop")


def answers(*lines: str) -> Any:
    it: Iterator[str] = iter(lines)

    def read_line(_prompt: str) -> str:
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None

    return read_line


def call(n: int) -> PendingApproval:
    return PendingApproval(f"call_{n}", "echo", {"text": str(n)})


def settle(agent: PausingAgent, approver: Approver) -> AssistantMessage:
    return settle_approvals(agent, agent.response(), approver, agent.response)  # type: ignore[arg-type]


def test_refused_decisions_are_shown_and_asked_again() -> None:
    said: list[str] = []
    agent = PausingAgent([[call(1)]], refusals=1)
    approver = Approver(said.append, read_line=answers("e", '{"text": "x"}', "y"), stdin=io.StringIO())
    assert settle(agent, approver).stop_reason == "stop"
    assert agent.resumed == [{"call_1": Approve()}]
    assert any("the edit of call_1 is not valid" in s for s in said)
    assert sum("The model wants to call echo with:" in s for s in said) == 2


def test_a_resumed_run_that_pauses_again_is_asked_about_again() -> None:
    agent = PausingAgent([[call(1), call(2)], [call(3)]])
    approver = Approver(lambda _s: None, read_line=answers("y", "n", "y"), stdin=io.StringIO())
    assert settle(agent, approver).stop_reason == "stop"
    assert agent.resumed == [{"call_1": Approve(), "call_2": Deny()}, {"call_3": Approve()}]


def test_refused_approvals_without_an_edit_end_the_command() -> None:
    agent = PausingAgent([[call(1)]], refusals=1)
    with pytest.raises(CliError, match="the decisions were refused"):
        settle(agent, Approver(lambda _s: None, yes=True))


def test_an_edit_of_a_tool_that_is_gone_is_passed_on() -> None:
    agent = PausingAgent([[call(1)]])
    approver = Approver(lambda _s: None, read_line=answers("e", '{"text": "x"}'), stdin=io.StringIO())
    settle(agent, approver)
    assert agent.resumed == [{"call_1": Edit({"text": "x"})}]

"""Approval before a tool runs: the decisions, what waits for them, and how it is stored.

A batch holding calls that need approval is prepared in full (prepare_arguments, validation,
``before_tool_call``) and then pauses as a whole: nothing of it executes before the decisions
(docs/approval.md). ``PausedBatch`` is that batch: per call, in call order, either the outcome
its preparation already gave (an error result) or its prepared arguments, whether it waits for
a decision, and (once resumed) whether it has started and how it ended. It round-trips through
JSON, so a session holds it and another process resumes it; a call that had started when the
process stopped, and has no outcome, ends as ``interrupted`` and is never run twice.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from yiemagent.core._content import AgentToolCall, content_from_dict
from yiemagent.core._messages import AgentMessage, AssistantMessage, LlmUsage, ToolResultMessage
from yiemagent.core._tool_calls import extract_tool_calls
from yiemagent.core._tools import AgentToolResult, NeedsApproval

__all__ = [
    "Approve",
    "Decision",
    "Deny",
    "Edit",
    "NeedsApproval",
    "PausedBatch",
    "PausedCall",
    "PendingApproval",
    "paused_batch_from_dict",
    "paused_belongs",
    "result_from_dict",
]


@attrs.frozen
class Approve:
    """Run the call with exactly the arguments shown in its ``PendingApproval``."""


@attrs.frozen
class Deny:
    """Do not run the call: it gets an error result with ``reason`` (kind ``denied``)."""

    reason: str = attrs.field(
        default="The user denied this tool call.", validator=attrs.validators.instance_of(str)
    )


def _frozen_arguments(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"Edit arguments must be a dict, got {type(value).__name__}")
    return MappingProxyType(copy.deepcopy(dict(value)))


@attrs.frozen
class Edit:
    """Run the call with these ``arguments`` instead (validated against the tool's schema again
    when the decision is given; an invalid edit is refused there and nothing runs)."""

    arguments: Mapping[str, Any] = attrs.field(converter=_frozen_arguments)


Decision = Approve | Deny | Edit


@attrs.frozen
class PendingApproval:
    """A call waiting for a decision: its id, its tool, and the arguments that will execute if
    it is approved (prepared and validated; a read-only copy)."""

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, Any] = attrs.field(converter=_frozen_arguments)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments": dict(self.arguments),
        }


@attrs.define
class PausedCall:
    """One call of a paused batch. ``outcome`` is ``(content_and_details, is_error)`` as a
    JSON-ready ``AgentToolResult`` dict once the call has ended (at preparation, or after it
    ran); ``arguments`` are the prepared arguments of a call that has not ended;
    ``needs_approval`` whether it waits for a decision; ``started`` whether it began to run."""

    tool_call: AgentToolCall
    arguments: dict[str, Any] | None = None
    needs_approval: bool = False
    outcome: tuple[dict[str, Any], bool] | None = None
    started: bool = False

    def to_dict(self) -> dict[str, Any]:
        call = self.tool_call
        return {
            "tool_call": {"id": call.id, "name": call.name, "arguments": call.arguments},
            "arguments": self.arguments,
            "needs_approval": self.needs_approval,
            "outcome": None
            if self.outcome is None
            else {"result": self.outcome[0], "is_error": self.outcome[1]},
            "started": self.started,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PausedCall:
        raw = data["tool_call"]
        outcome = data.get("outcome")
        return cls(
            AgentToolCall(str(raw["id"]), str(raw["name"]), raw.get("arguments")),
            dict(data["arguments"]) if isinstance(data.get("arguments"), Mapping) else None,
            bool(data.get("needs_approval")),
            None if outcome is None else (dict(outcome["result"]), bool(outcome["is_error"])),
            bool(data.get("started")),
        )


@attrs.define
class PausedBatch:
    """A batch waiting for decisions: the reply that made its calls, the calls in call order,
    and whether it runs in parallel once resumed (decided when it paused)."""

    message: AssistantMessage
    calls: list[PausedCall]
    parallel: bool = False
    settled: bool = attrs.field(default=False, kw_only=True)  # run in this process; not stored

    def pending(self) -> list[PendingApproval]:
        """The calls that wait for a decision (not yet started, no outcome), in call order."""
        return [
            PendingApproval(c.tool_call.id, c.tool_call.name, c.arguments or {})
            for c in self.calls
            if c.needs_approval and c.outcome is None and not c.started
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message.to_dict(),
            "calls": [c.to_dict() for c in self.calls],
            "parallel": self.parallel,
        }


def paused_belongs(paused: PausedBatch, history: Sequence[AgentMessage]) -> bool:
    """Whether ``history`` holds the reply that made ``paused``'s calls, and none of their
    results: only then can the batch be resumed there (a session saved while its run was still
    going, or a history given anew, does not)."""
    ids = {c.tool_call.id for c in paused.calls}
    answered = {m.tool_call_id for m in history if isinstance(m, ToolResultMessage)}
    if ids & answered:
        return False
    return any(
        isinstance(m, AssistantMessage) and ids <= {c.id for c in extract_tool_calls(m.content)[1]}
        for m in history
    )


def paused_batch_from_dict(data: Mapping[str, Any]) -> PausedBatch:
    """Rebuild a ``PausedBatch`` from ``to_dict`` output; raises ``TypeError``/``ValueError``/
    ``KeyError`` for data that is not one (the session reader names the file)."""
    message = AgentMessage.from_dict(data["message"])
    if not isinstance(message, AssistantMessage):
        raise ValueError("a paused batch's message must be an assistant message")
    calls = data["calls"]
    if not isinstance(calls, list):
        raise TypeError("a paused batch's calls must be a list")
    return PausedBatch(message, [PausedCall.from_dict(c) for c in calls], bool(data.get("parallel")))


def result_from_dict(data: Mapping[str, Any]) -> AgentToolResult:
    """An ``AgentToolResult`` from its ``to_dict`` form (as a paused call stores its outcome)."""
    usage = data.get("usage")
    return AgentToolResult(
        [content_from_dict(b) for b in data.get("content") or []],
        dict(data.get("details") or {}),
        None if usage is None else LlmUsage.from_dict(usage),
        terminate=bool(data.get("terminate")),
    )

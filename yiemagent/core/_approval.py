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
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from yiemagent.core._content import AgentToolCall, content_from_dict
from yiemagent.core._json_safety import MAX_JSON_DEPTH, argument_problem, nested_too_deep
from yiemagent.core._messages import AgentMessage, AssistantMessage, LlmUsage, ToolResultMessage
from yiemagent.core._tool_calls import extract_tool_calls
from yiemagent.core._tool_result import AgentToolResult
from yiemagent.errors import ApprovalError

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


def _edit_arguments(value: Any) -> Mapping[str, Any]:
    """A read-only deep copy of ``value``; ``ApprovalError`` (a ``ValueError``) for arguments
    nested deeper than ``MAX_JSON_DEPTH`` (checked without recursion, before the copy, which
    would recurse). Other problems (``NaN``, a key that is not text) are named when the decision
    is given to ``resume``."""
    if isinstance(value, Mapping) and nested_too_deep(dict(value)):
        raise ApprovalError(
            f"Edit arguments cannot be used: they are nested more than {MAX_JSON_DEPTH} levels deep"
        )
    return _frozen_arguments(value)


@attrs.frozen
class Edit:
    """Run the call with these ``arguments`` instead (validated against the tool's schema again
    when the decision is given; an invalid edit is refused there and nothing runs)."""

    arguments: Mapping[str, Any] = attrs.field(converter=_edit_arguments)


Decision = Approve | Deny | Edit

# A tool's ``needs_approval``: a flag, or a function of the call's arguments and the context.
NeedsApproval = bool | Callable[[dict[str, Any], Any], bool]


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
    ``needs_approval`` whether it waits for a decision; ``started`` whether it began to run;
    ``limit`` the verdict of the tool-call limit that refused it (such as ``max_tool_calls=3
    reached``), which ends the run that settles the batch."""

    tool_call: AgentToolCall
    arguments: dict[str, Any] | None = None
    needs_approval: bool = False
    outcome: tuple[dict[str, Any], bool] | None = None
    started: bool = False
    limit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        call = self.tool_call
        data: dict[str, Any] = {
            "tool_call": {"id": call.id, "name": call.name, "arguments": call.arguments},
            "arguments": self.arguments,
            "needs_approval": self.needs_approval,
            "outcome": None
            if self.outcome is None
            else {"result": self.outcome[0], "is_error": self.outcome[1]},
            "started": self.started,
        }
        if self.limit is not None:
            data["limit"] = self.limit
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PausedCall:
        """Rebuild a call from ``to_dict`` output, checking every field's type; ``ValueError``
        (or ``TypeError``) saying which field is wrong. A call that has not ended must hold its
        arguments as finite JSON: nothing of a file is run on a guess."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a paused call must be an object, got {type(data).__name__}")
        raw = data.get("tool_call")
        if not isinstance(raw, Mapping):
            raise TypeError("a paused call's tool_call must be an object")
        call_id, name = raw.get("id"), raw.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            raise ValueError("a paused call's tool_call needs a text id and a text name")
        arguments, outcome = data.get("arguments"), data.get("outcome")
        flags = {key: data.get(key, False) for key in ("needs_approval", "started")}
        for key, flag in flags.items():
            if not isinstance(flag, bool):
                raise TypeError(f"paused call {call_id}: {key} must be true or false, got {flag!r}")
        if arguments is not None:
            if not isinstance(arguments, dict):
                raise TypeError(f"paused call {call_id}: arguments must be an object or null")
            problem = argument_problem(arguments)
            if problem is not None:
                raise ValueError(f"paused call {call_id}: {problem}")
        limit = data.get("limit")
        if limit is not None and (outcome is None or not isinstance(limit, str)):
            # Only a call refused when its batch paused carries a verdict: one on a call still
            # to run would keep it out of the run's count.
            raise ValueError(
                f"paused call {call_id}: limit must be null, or a text on a call with an outcome"
            )
        return cls(
            AgentToolCall(call_id, name, raw.get("arguments")),
            None if arguments is None else dict(arguments),
            flags["needs_approval"],
            _outcome_from_dict(call_id, outcome, arguments is None),
            flags["started"],
            limit,
        )


def _outcome_from_dict(call_id: str, outcome: Any, no_arguments: bool) -> tuple[dict[str, Any], bool] | None:
    """A stored call's outcome, checked; a call without one must have its arguments."""
    if outcome is None:
        if no_arguments:
            raise ValueError(f"paused call {call_id} has neither arguments nor an outcome")
        return None
    if not isinstance(outcome, Mapping):
        raise TypeError(f"paused call {call_id}: outcome must be an object or null")
    result, is_error = outcome.get("result"), outcome.get("is_error")
    if not isinstance(result, Mapping) or not isinstance(is_error, bool):
        raise TypeError(f"paused call {call_id}: outcome needs a result object and is_error true or false")
    result_from_dict(result)  # a result that cannot be rebuilt fails here, at load, not at the resume
    return dict(result), is_error


@attrs.define
class PausedBatch:
    """A batch waiting for decisions: the reply that made its calls, the calls in call order,
    and whether it runs in parallel once resumed (decided when it paused)."""

    message: AssistantMessage
    calls: list[PausedCall]
    parallel: bool = False
    settled: bool = attrs.field(default=False, kw_only=True)  # run in this process; not stored
    # Read from a file (a session): its arguments are checked against the tools again before
    # they run, and whether a call waits for a decision is asked of the tools, not the file.
    from_file: bool = attrs.field(default=False, kw_only=True)

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
    """Whether ``history`` holds the reply that made ``paused``'s calls (each id with the same
    tool name), and none of their results: only then can the batch be resumed there (a session
    saved while its run was still going, or a history given anew, does not). When it does,
    ``paused.message`` becomes that reply of the history: what runs is the history's call, never
    a second copy of it."""
    names = {c.tool_call.id: c.tool_call.name for c in paused.calls}
    answered = {m.tool_call_id for m in history if isinstance(m, ToolResultMessage)}
    if names.keys() & answered:
        return False
    for message in reversed(history):
        if not isinstance(message, AssistantMessage):
            continue
        made = {c.id: c.name for c in extract_tool_calls(message.content)[1]}
        if all(made.get(call_id) == name for call_id, name in names.items()):
            paused.message = message
            return True
    return False


def paused_batch_from_dict(data: Mapping[str, Any]) -> PausedBatch:
    """Rebuild a ``PausedBatch`` from ``to_dict`` output, marked ``from_file``; raises
    ``TypeError``/``ValueError``/``KeyError`` for data that is not one (the session reader
    names the file): every field is checked, the calls must be those of the batch's reply, and
    no two calls that have not ended may share an id (one decision must never cover two)."""
    message = AgentMessage.from_dict(data["message"])
    if not isinstance(message, AssistantMessage):
        raise ValueError("a paused batch's message must be an assistant message")
    calls = data["calls"]
    if not isinstance(calls, list) or not calls:
        raise TypeError("a paused batch's calls must be a list of at least one call")
    paused_calls = [PausedCall.from_dict(c) for c in calls]
    open_ids = [c.tool_call.id for c in paused_calls if c.outcome is None]
    if len(set(open_ids)) != len(open_ids):
        raise ValueError(f"a paused batch holds two open calls with one id ({', '.join(open_ids)})")
    made = {c.id: c.name for c in extract_tool_calls(message.content)[1]}
    strays = [c.tool_call.id for c in paused_calls if made.get(c.tool_call.id) != c.tool_call.name]
    if strays:
        raise ValueError(f"paused calls {', '.join(strays)} are not calls of the batch's reply")
    parallel = data.get("parallel", False)
    if not isinstance(parallel, bool):
        raise TypeError(f"a paused batch's parallel must be true or false, got {parallel!r}")
    return PausedBatch(message, paused_calls, parallel, from_file=True)


def result_from_dict(data: Mapping[str, Any]) -> AgentToolResult:
    """An ``AgentToolResult`` from its ``to_dict`` form (as a paused call stores its outcome)."""
    usage, content, details = data.get("usage"), data.get("content") or [], data.get("details") or {}
    if not isinstance(content, list) or not isinstance(details, Mapping):
        raise TypeError("a stored tool result needs a content list and a details object")
    return AgentToolResult(
        [content_from_dict(b) for b in content],
        dict(details),
        None if usage is None else LlmUsage.from_dict(usage),
        terminate=bool(data.get("terminate")),
    )

"""Checking the decisions given to ``resume(approvals=...)`` before anything runs.

Every waiting call needs exactly one decision (``Approve``, ``Deny`` or ``Edit``), no decision may
name a call that is not waiting, and an edit must pass the tool's schema (and its own validator)
again. Anything else raises one ``ApprovalError`` listing every problem, and nothing runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yiemagent.core._approval import Approve, Decision, Deny, Edit, PausedBatch
from yiemagent.core._arguments import validate_tool_arguments
from yiemagent.core._content import AgentToolCall
from yiemagent.core._json_safety import argument_problem
from yiemagent.core._tools import ToolMapping
from yiemagent.errors import ApprovalError, ToolArgumentError, describe_error

__all__ = ["check_decisions"]


def _edit_problem(tool_call_id: str, name: str, edit: Edit, tools: ToolMapping) -> str | None:
    unusable = argument_problem(dict(edit.arguments))  # NaN, a non-string key, nested too deep
    if unusable is not None:
        return f"the edit of {tool_call_id} ({name}) is not usable JSON: {unusable}"
    tool = tools.get(name)
    if tool is None:
        return None  # the call will get an error result saying the tool no longer exists
    try:
        validate_tool_arguments(tool, AgentToolCall(tool_call_id, name, dict(edit.arguments)))
    except ToolArgumentError as exc:
        return f"the edit of {tool_call_id} ({name}) is not valid: {exc}"
    except Exception as exc:  # the tool's own validator raised
        return f"the edit of {tool_call_id} ({name}) could not be checked: {describe_error(exc)}"
    return None


def check_decisions(
    paused: PausedBatch, approvals: Mapping[str, Any] | None, tools: ToolMapping
) -> dict[str, Decision]:
    """The decisions for ``paused``'s waiting calls, checked; raises ``ApprovalError`` naming
    each missing, unknown or unusable decision and each violation of an edit."""
    if approvals is not None and not isinstance(approvals, Mapping):
        raise ApprovalError(
            f"approvals must be a dict of tool_call_id -> decision, got {type(approvals).__name__}"
        )
    given = dict(approvals or {})
    waiting = {p.tool_call_id: p.tool_name for p in paused.pending()}
    problems: list[str] = []
    missing = [i for i in waiting if i not in given]
    if missing:
        listed = ", ".join(f"{i} ({waiting[i]})" for i in missing)
        problems.append(f"no decision for {listed}: give Approve(), Deny(reason) or Edit(arguments) for each")
    unknown = [i for i in given if i not in waiting]
    if unknown:
        names, known = ", ".join(map(str, unknown)), ", ".join(waiting) or "none"
        problems.append(f"not waiting for approval: {names} (waiting: {known})")
    for tool_call_id, decision in given.items():
        if tool_call_id not in waiting:
            continue
        if not isinstance(decision, (Approve, Deny, Edit)):
            problems.append(
                f"the decision for {tool_call_id} must be Approve(), Deny(reason) or "
                f"Edit(arguments), got {type(decision).__name__}"
            )
        elif isinstance(decision, Edit):
            problem = _edit_problem(tool_call_id, waiting[tool_call_id], decision, tools)
            if problem is not None:
                problems.append(problem)
    if problems:
        raise ApprovalError("the approvals cannot be used, so nothing ran:\n- " + "\n- ".join(problems))
    return given

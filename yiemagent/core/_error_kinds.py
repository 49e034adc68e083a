"""The stable kinds of the error results the tool pipeline makes, one per way a call can fail.

An error result's text is written for the model and may change between versions (and differs
between implementations of the design); its kind does not. The pipeline stores the kind in the
result's ``details`` under ``"error_kind"``, so it reaches ``ToolExecEndEvent.result``, the
``ToolResultMessage`` in the history and saved sessions, and is never sent to the model (only
``content`` is). Results a tool or hook made itself have no kind. Where each kind arises:

=====================  ==========  ==========================================================
kind                   phase       cause
=====================  ==========  ==========================================================
``aborted``            any         the run's signal was aborted before the call (or its
                                   execution) started, or during ``before_tool_call``
``tool_not_found``     prepare     no tool of that name
``invalid_json``       prepare     the arguments text is not JSON (``NaN`` included)
``invalid_arguments``  prepare     JSON, but not an object, or nested too deep
``prepare_failed``     prepare     ``prepare_arguments`` or a custom validator raised, or
                                   ``prepare_arguments`` returned something else than a dict
``schema_violation``   prepare     the arguments break the input schema (or the tool's own
                                   ``validate_required_args`` rejected them)
``blocked``            prepare     ``before_tool_call`` blocked the call
``hook_failed``        prepare or  ``before_tool_call`` or ``after_tool_call`` raised or
                       finalize    returned something unusable
``tool_raised``        execute     ``execute`` raised (an async tool's cancellation included)
``invalid_result``     execute     ``execute`` returned something else than an
                                   ``AgentToolResult``, or details that are not a dict
``timeout``            execute     the call ran past its timeout
``skipped``            batch       a new message arrived and ``skip_tools_on_steer`` gave it
                                   the floor before the call started
``repeated_call``      prepare     the run already made this call (same tool, same prepared
                                   arguments) in ``max_repeated_calls`` earlier batches
``denied``             approval    the call needed approval and was denied (or a new message
                                   superseded the batch that waited for it)
``interrupted``        approval    an approved call had started when the process stopped; its
                                   outcome is unknown, so it is never run again
``usage_limit``        batch       running the call would pass the run's ``max_tool_calls`` or
                                   ``max_calls_per_tool`` (``UsageLimits``); the run ends
=====================  ==========  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ABORTED",
    "BLOCKED",
    "DENIED",
    "ERROR_KINDS",
    "ERROR_KIND_KEY",
    "HOOK_FAILED",
    "INTERRUPTED",
    "INVALID_ARGUMENTS",
    "INVALID_JSON",
    "INVALID_RESULT",
    "PREPARE_FAILED",
    "REPEATED_CALL",
    "SCHEMA_VIOLATION",
    "SKIPPED",
    "TIMEOUT",
    "TOOL_NOT_FOUND",
    "TOOL_RAISED",
    "USAGE_LIMIT",
    "error_kind",
]

ERROR_KIND_KEY = "error_kind"

ABORTED = "aborted"
TOOL_NOT_FOUND = "tool_not_found"
INVALID_JSON = "invalid_json"
INVALID_ARGUMENTS = "invalid_arguments"
PREPARE_FAILED = "prepare_failed"
SCHEMA_VIOLATION = "schema_violation"
BLOCKED = "blocked"
HOOK_FAILED = "hook_failed"
TOOL_RAISED = "tool_raised"
INVALID_RESULT = "invalid_result"
TIMEOUT = "timeout"
SKIPPED = "skipped"
REPEATED_CALL = "repeated_call"
DENIED = "denied"
INTERRUPTED = "interrupted"
USAGE_LIMIT = "usage_limit"

ERROR_KINDS = (
    ABORTED,
    TOOL_NOT_FOUND,
    INVALID_JSON,
    INVALID_ARGUMENTS,
    PREPARE_FAILED,
    SCHEMA_VIOLATION,
    BLOCKED,
    HOOK_FAILED,
    TOOL_RAISED,
    INVALID_RESULT,
    TIMEOUT,
    SKIPPED,
    REPEATED_CALL,
    DENIED,
    INTERRUPTED,
    USAGE_LIMIT,
)


def error_kind(details: Any) -> str | None:
    """The error kind recorded in a result's (or result message's) ``details``, or ``None``
    when it has none (a success, or an error a tool or hook made itself). Never raises."""
    kind = details.get(ERROR_KIND_KEY) if isinstance(details, Mapping) else None
    return kind if isinstance(kind, str) else None

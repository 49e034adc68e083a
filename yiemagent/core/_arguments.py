"""Argument preparation and validation for tool calls (spec section 8.1, decision 3 of docs/design.md).

The default validator checks the whole JSON Schema and lists the violations with their paths,
then the arguments received, so the model can correct its call. However large or wrong the
arguments, that text stays within a few KB: at most ``MAX_VIOLATIONS`` lines (and how many more
there were), each at most ``MAX_VIOLATION_CHARS`` characters with the bad value quoted in at most
``MAX_QUOTED_CHARS``, and the echo of the arguments cut to ``MAX_ECHO_CHARS``.
"""

from __future__ import annotations

import functools
import itertools
import json
import reprlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import jsonschema.exceptions
import referencing.exceptions

from yiemagent.core._content import AgentToolCall
from yiemagent.core._error_kinds import PREPARE_FAILED, SCHEMA_VIOLATION
from yiemagent.core._json_safety import MAX_ECHO_CHARS, clip
from yiemagent.core._schema_fast import json_copy
from yiemagent.core._tools import AgentTool, compile_schema_validator
from yiemagent.errors import ToolArgumentError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

MAX_VIOLATIONS = 10  # violation lines one error text lists; the rest are counted
# Violations looked at, at most: a 20 MB value can break a schema millions of times, and building,
# sorting and counting every one took a minute; the first ones say what is wrong.
MAX_COUNTED_VIOLATIONS = 1000
MAX_VIOLATION_CHARS = 240  # characters of one violation line (path and message)
MAX_QUOTED_CHARS = 50  # characters of the bad value a violation line quotes
MAX_PROBLEM_CHARS = 2000  # characters of what a tool's own validate_required_args returned

__all__ = [
    "ToolArgumentError",
    "format_arguments",
    "prepare_tool_call_arguments",
    "schema_violations",
    "validate_required_args",
    "validate_tool_arguments",
]


def format_arguments(args: Any) -> str:
    """Render arguments as indented JSON for error messages (``repr`` if not JSON-ready), cut
    to ``MAX_ECHO_CHARS`` characters with the size of the rest, so a huge argument never makes
    a huge error text."""
    if isinstance(args, str) and len(args) > MAX_ECHO_CHARS:
        return clip(repr(args))
    try:
        text = json.dumps(args, indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = reprlib.repr(args)
    return clip(text)


def _error_path(error: jsonschema.exceptions.ValidationError, root: str = "args") -> str:
    path = root
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _cut_middle(text: str, limit: int) -> str:
    """``text`` in at most about ``limit`` characters: its start and its end (where a message
    says what is wrong), with the number of characters left out between them."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}… ({len(text) - head - tail} characters left out) …{text[-tail:]}"


def _violation_line(error: jsonschema.exceptions.ValidationError, root: str = "args") -> str:
    """One violation as ``<path>: <message>``, short whatever the value: ``jsonschema`` quotes
    the whole bad value (its ``repr``) in the message, so a long quote is cut first, then the
    whole line."""
    message = error.message
    if len(message) > MAX_VIOLATION_CHARS:
        quoted = _safe_repr(error.instance)
        if len(quoted) > MAX_QUOTED_CHARS and quoted in message:
            message = message.replace(quoted, clip(quoted, MAX_QUOTED_CHARS))
    return _cut_middle(f"{_error_path(error, root)}: {message}", MAX_VIOLATION_CHARS)


def _safe_repr(value: Any) -> str:
    """``repr(value)`` as ``jsonschema`` writes it into messages, or ``""`` if it fails."""
    try:
        return repr(value)
    except Exception:  # a value that is not JSON may have a broken __repr__
        return ""


def _order(error: jsonschema.exceptions.ValidationError) -> tuple[Any, ...]:
    """Where a violation sorts: by its path, indexes as numbers (``[2]`` before ``[10]``)."""
    return tuple(
        (0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in error.absolute_path
    )


def _violations(validator: Validator, args: Any, root: str = "args") -> str | None:
    """The violations of ``args`` as lines ``  - <path>: <message>`` (paths start at ``root``),
    sorted by path, at most ``MAX_VIOLATIONS`` of them (then how many more there were, counted
    up to ``MAX_COUNTED_VIOLATIONS``), each cut to ``MAX_VIOLATION_CHARS``; ``None`` when
    ``args`` is valid. A reference that cannot be resolved (the tool was checked when built, so
    only one reached in a way no check foresaw) is one violation, never a fetch."""
    try:
        if validator.is_valid(args):
            return None
        errors: Iterable[jsonschema.exceptions.ValidationError] = itertools.islice(
            validator.iter_errors(args), MAX_COUNTED_VIOLATIONS + 1
        )
        lines = [line for _key, line in sorted((_order(e), _violation_line(e, root)) for e in errors)]
    except referencing.exceptions.Unresolvable as exc:
        return (
            f"  - the tool's input schema has a reference that does not resolve within it "
            f"({clip(str(exc), MAX_QUOTED_CHARS)}); schemas are never fetched"
        )
    shown = [f"  - {line}" for line in lines[:MAX_VIOLATIONS]]
    if len(lines) > MAX_COUNTED_VIOLATIONS:
        shown.append(
            f"  ... and more than {MAX_COUNTED_VIOLATIONS - MAX_VIOLATIONS} more violations (not shown)"
        )
    elif len(lines) > MAX_VIOLATIONS:
        shown.append(f"  ... and {len(lines) - MAX_VIOLATIONS} more violations (not shown)")
    return "\n".join(shown)


def schema_violations(value: Any, schema: Mapping[str, Any], root: str) -> str | None:
    """``validate_required_args`` for any value: its violations of the whole ``schema`` as
    lines ``  - <root><path>: <message>``, or ``None`` when it is valid (the run's output uses
    it with ``root="output"``)."""
    return _violations(_validator_for(schema), value, root)


def validate_required_args(args: Any, input_schema: Mapping[str, Any]) -> str | None:
    """Check ``args`` against the whole ``input_schema``; return ``None`` or the violations.

    Each violation is one line ``  - <path>: <message>`` with paths like ``args.items[0].name``,
    capped as the module docstring says. Never raises for invalid arguments; raises
    ``ValueError`` only if the schema itself is invalid or has a reference that does not resolve.
    """
    return _violations(_validator_for(input_schema), args)


@functools.lru_cache(maxsize=256)
def _cached_validator(schema_json: str) -> Validator:
    return compile_schema_validator(None, json.loads(schema_json))


def _validator_for(schema: Mapping[str, Any]) -> Validator:
    """A validator for ``schema``, compiled once per distinct schema (custom validators call
    ``validate_required_args`` on every tool call)."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):  # not JSON-ready: compile it afresh
        return compile_schema_validator(None, schema)
    return _cached_validator(key)


def prepare_tool_call_arguments(tool: AgentTool, tool_call: AgentToolCall) -> AgentToolCall:
    """Apply ``tool.prepare_arguments`` and return the call with the prepared arguments.

    The hook gets a deep copy, so one that edits the arguments in place cannot change the call
    stored in the assistant message. Returns ``tool_call`` itself when the tool has no hook or the
    arguments did not change; raises ``ToolArgumentError`` when the hook does not return a dict.
    """
    if tool.prepare_arguments is None:
        return tool_call
    prepared = tool.prepare_arguments(json_copy(tool_call.arguments))
    if not isinstance(prepared, dict):
        raise ToolArgumentError(
            f'prepare_arguments of tool "{tool.name}" returned {type(prepared).__name__}; '
            "it must return the arguments as a dict",
            kind=PREPARE_FAILED,
        )
    if prepared == tool_call.arguments:
        return tool_call
    return attrs.evolve(tool_call, arguments=prepared)


def validate_tool_arguments(tool: AgentTool, tool_call: AgentToolCall) -> dict[str, Any]:
    """Return the call's arguments if valid, else raise ``ToolArgumentError`` for the model.

    Uses the tool's own ``validate_required_args`` when it has one, else the full schema check.
    Validators and the tool work on a deep copy, so none of them can change the call in the
    history. The error names the tool, lists what is wrong and shows the arguments received.
    """
    args = json_copy(tool_call.arguments)
    if tool.validate_required_args is not None:
        problem: Any = tool.validate_required_args(args)
        detail = f"  - {clip(str(problem), MAX_PROBLEM_CHARS)}" if problem else None
    elif tool.fast_check is not None and tool.fast_check(args):
        return args if type(args) is dict else dict(args)
    else:
        detail = _violations(tool.schema_validator, args)
    if detail is None:
        return args if type(args) is dict else dict(args)
    raise ToolArgumentError(
        f'Validation failed for tool "{tool.name}":\n{detail}\n\n'
        f"Received arguments:\n{format_arguments(tool_call.arguments)}",
        kind=SCHEMA_VIOLATION,
    )

"""Turn a plain Python function into an ``AgentTool`` (``@function_tool``).

The input schema comes from the type hints (``str``, ``int``, ``float``, ``bool``, ``None``,
``list[X]``, ``dict[str, X]``, ``Optional[X]``/``X | None``, other unions, ``Literal``, ``Enum``,
``Annotated[X, "description"]``, ``Any``), the descriptions from the docstring (Google or NumPy
style), and defaults make a parameter optional. Parameters named ``signal`` and
``on_partial_result`` receive the abort signal and the progress callback instead of arguments.
An ``async def`` runs to completion on the tool's thread, on an event loop of its own, and an
abort of the signal cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import json
import re
import threading
import types
import typing
from collections.abc import Callable, Coroutine
from typing import Any, Literal, overload

import attrs

from yiemagent.core._content import TextContent
from yiemagent.core._tools import AbortSignal, AgentTool, AgentToolResult, NeedsApproval

__all__ = ["function_tool", "parse_docstring", "to_tool_result"]

Converter = Callable[[Any], Any]

SPECIAL_PARAMETERS = ("signal", "on_partial_result")
_SUPPORTED = (
    "str, int, float, bool, None, Any, list[X], dict[str, X], Optional[X] / X | None, unions, "
    "Literal[...], Enum subclasses and Annotated[X, 'description']"
)


# ---------------------------------------------------------------------------------------------
# Docstrings
# ---------------------------------------------------------------------------------------------

_PARAM_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "other parameters",
}
_SECTIONS = _PARAM_SECTIONS | {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "examples",
    "example",
    "note",
    "notes",
    "see also",
    "attributes",
    "todo",
    "warning",
    "warnings",
    "references",
    "methods",
}
_DASHES = re.compile(r"^\s*-{3,}\s*$")
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ENTRY = re.compile(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ENTRY = re.compile(r"^\**(\w+(?:\s*,\s*\**\w+)*)\s*(?::.*)?$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _split_sections(lines: list[str]) -> tuple[list[str], dict[str, tuple[str, list[str]]]]:
    """Split docstring lines into the text before any section and ``name -> (style, lines)``."""
    intro: list[str] = []
    sections: dict[str, tuple[str, list[str]]] = {}
    current: list[str] = intro
    i = 0
    while i < len(lines):
        line = lines[i]
        title = line.strip().lower()
        is_numpy = title in _SECTIONS and i + 1 < len(lines) and _DASHES.match(lines[i + 1]) is not None
        google = _GOOGLE_HEADER.match(line) if _indent(line) == 0 else None
        if is_numpy:
            current = []
            sections[title] = ("numpy", current)
            i += 2
            continue
        if google is not None and google.group(1).strip().lower() in _SECTIONS:
            current = []
            sections[google.group(1).strip().lower()] = ("google", current)
        else:
            current.append(line)
        i += 1
    return intro, sections


def _parse_entries(lines: list[str], style: str) -> dict[str, str]:
    """Return ``parameter -> description`` from the lines of one parameter section."""
    body = [line for line in lines if line.strip()]
    if not body:
        return {}
    base = min(_indent(line) for line in body)
    out: dict[str, str] = {}
    names: list[str] = []
    for line in body:
        text = line.strip()
        if _indent(line) == base:
            entry = (_GOOGLE_ENTRY if style == "google" else _NUMPY_ENTRY).match(text)
            if entry is None:
                names = []
                continue
            names = [n.strip().lstrip("*") for n in entry.group(1).split(",")]
            first = entry.group(2).strip() if style == "google" else ""
            for name in names:
                out[name] = first
        else:
            for name in names:
                out[name] = f"{out[name]} {text}".strip()
    return out


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return ``(description, {parameter: description})`` from a Google or NumPy docstring.

    The description is the text before the first section (summary and extended description);
    parameter descriptions come from ``Args:``/``Arguments:``/``Parameters:`` sections (Google)
    or ``Parameters``/``Other Parameters`` with a dashed underline (NumPy). Never raises.
    """
    if not doc:
        return "", {}
    intro, sections = _split_sections(inspect.cleandoc(doc).splitlines())
    params: dict[str, str] = {}
    for title, (style, lines) in sections.items():
        if title in _PARAM_SECTIONS:
            params.update(_parse_entries(lines, style))
    return "\n".join(intro).strip(), params


# ---------------------------------------------------------------------------------------------
# Type hints -> JSON Schema
# ---------------------------------------------------------------------------------------------


def _json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


def _enum_schema(values: list[Any], where: str, hint: Any) -> dict[str, Any]:
    kinds = [_json_type(v) for v in values]
    if None in kinds:
        raise TypeError(
            f"{where}: {hint!r} has values that are not JSON scalars; use str, int, "
            "float, bool or None values"
        )
    schema: dict[str, Any] = {"enum": list(values)}
    if len(set(kinds)) == 1:
        schema = {"type": kinds[0], "enum": list(values)}
    return schema


def _union_schema(members: tuple[Any, ...], where: str) -> dict[str, Any]:
    schemas = [_schema_for(m, where) for m in members]
    simple = [s.get("type") for s in schemas if set(s) == {"type"} and isinstance(s.get("type"), str)]
    if len(simple) == len(schemas):
        return {"type": list(dict.fromkeys(simple))}
    return {"anyOf": schemas}


def _is_union(origin: Any) -> bool:
    return origin is typing.Union or origin is types.UnionType


def _schema_for(hint: Any, where: str) -> dict[str, Any]:
    """Return the JSON Schema of one type hint; raise ``TypeError`` naming ``where`` if unsupported."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = _schema_for(args[0], where)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": notes[0]} if notes else schema
    if hint is Any:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if isinstance(hint, type) and hint in simple:
        return {"type": simple[hint]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([m.value for m in hint], where, hint)
    if origin is Literal:
        return _enum_schema(list(args), where, hint)
    if _is_union(origin):
        return _union_schema(args, where)
    if hint is list or origin is list:
        return {"type": "array", "items": _schema_for(args[0], where)} if args else {"type": "array"}
    if hint is dict or origin is dict:
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise TypeError(f"{where}: dict keys must be str in JSON, got {hint!r}")
        return {"type": "object", "additionalProperties": _schema_for(args[1], where)}
    raise TypeError(f"{where}: unsupported type hint {hint!r}. Supported: {_SUPPORTED}")


def _converter_for(hint: Any) -> Converter | None:
    """Return a function turning a JSON value back into ``hint``'s Python form, or ``None``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _converter_for(args[0])
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if hint is int:
        return lambda v: int(v) if isinstance(v, float) and v.is_integer() else v
    if origin is list and args:
        item = _converter_for(args[0])
        return None if item is None else (lambda v: [item(x) for x in v] if isinstance(v, list) else v)
    if origin is dict and len(args) == 2:
        value = _converter_for(args[1])
        return (
            None
            if value is None
            else (lambda v: {k: value(x) for k, x in v.items()} if isinstance(v, dict) else v)
        )
    if _is_union(origin):
        return _union_converter([c for c in map(_converter_for, args) if c is not None])
    return None


def _union_converter(converters: list[Converter]) -> Converter | None:
    if not converters:
        return None

    def convert(value: Any) -> Any:
        if value is None:
            return None
        for converter in converters:
            try:
                return converter(value)
            except (ValueError, TypeError):
                continue
        return value

    return convert


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


def to_tool_result(value: Any, tool_name: str = "tool") -> AgentToolResult:
    """Turn what a tool function returned into an ``AgentToolResult``.

    An ``AgentToolResult`` is returned as is, a ``str`` becomes one text block, and any other
    JSON-ready value becomes its JSON text with the value in ``details["result"]``. Anything
    else raises ``TypeError`` naming the tool and the type.
    """
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, str):
        return AgentToolResult([TextContent(value)])
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        raise TypeError(
            f'tool "{tool_name}" returned {type(value).__name__}, which is not JSON-ready; return '
            "a str, a JSON-ready value (dict, list, number, bool, None) or an AgentToolResult"
        ) from None
    return AgentToolResult([TextContent(text)], {"result": value})


# ---------------------------------------------------------------------------------------------
# The decorator
# ---------------------------------------------------------------------------------------------


@attrs.define(frozen=True)
class _Param:
    """How one function parameter is filled: from the arguments, or a special value."""

    name: str
    kind: Any
    default: Any
    convert: Converter | None = None


def _label_from(name: str) -> str:
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).replace("_", " ").split()
    return " ".join(w[:1].upper() + w[1:] for w in words) or name


def _json_ready(value: Any, where: str) -> bool:
    """Whether a default can go into the schema as JSON; raise ``TypeError`` for NaN or infinity,
    which ``json.dumps`` would write as tokens that no JSON parser (nor provider) accepts."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        pass
    else:
        return True
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False  # not JSON at all (an object, a cycle): left out of the schema
    raise TypeError(
        f"{where} has the default {value!r}, which holds NaN or infinity; JSON cannot "
        "carry those, so use None or a finite number"
    )


def _property(hint: Any, param: inspect.Parameter, where: str, doc: str | None) -> dict[str, Any]:
    schema = _schema_for(hint, where)
    if doc and "description" not in schema:
        schema["description"] = doc
    if param.default is inspect.Parameter.empty:
        return schema
    default = param.default.value if isinstance(param.default, enum.Enum) else param.default
    if default is None and schema and schema.get("type") not in (None, "null"):
        schema = _union_schema_with_null(schema)
    if _json_ready(default, where):
        schema["default"] = default
    return schema


def _union_schema_with_null(schema: dict[str, Any]) -> dict[str, Any]:
    """Allow ``null`` in a schema whose default is ``None`` (``x: str = None``)."""
    if "enum" in schema and None not in schema["enum"]:
        schema = {**schema, "enum": [*schema["enum"], None]}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    return schema


def _resolve_hints(fn: Callable[..., Any], label: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"function_tool: cannot resolve the type hints of {label}: {exc}") from None


def _build(fn: Callable[..., Any]) -> tuple[dict[str, Any], list[_Param], str]:
    """Return ``(input_schema, parameters, description)`` for ``fn``; raise ``TypeError`` if unusable."""
    label = f"function {fn.__qualname__!r}"
    hints = _resolve_hints(fn, label)
    description, docs = parse_docstring(fn.__doc__)
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[_Param] = []
    for p in inspect.signature(fn).parameters.values():
        where = f"parameter {p.name!r} of {label}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"function_tool: {where} is *{p.name} or **{p.name}; tools need named parameters")
        if p.name in SPECIAL_PARAMETERS:
            params.append(_Param(p.name, p.kind, p.default))
            continue
        if p.name not in hints:
            raise TypeError(f"function_tool: {where} has no type hint; add one (e.g. {p.name}: str)")
        properties[p.name] = _property(hints[p.name], p, f"function_tool: {where}", docs.get(p.name))
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        params.append(_Param(p.name, p.kind, p.default, _converter_for(hints[p.name])))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema, params, description


def _call_arguments(
    params: list[_Param], args: dict[str, Any], signal: AbortSignal | None, on_partial: Any
) -> tuple[list[Any], dict[str, Any]]:
    """Map validated tool arguments (and the special values) onto the function's parameters."""
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    specials = {"signal": signal, "on_partial_result": on_partial}
    for p in params:
        if p.name in specials:
            value = specials[p.name]
        elif p.name in args:
            value = args[p.name] if p.convert is None else p.convert(args[p.name])
        elif p.kind is inspect.Parameter.POSITIONAL_ONLY:
            value = p.default
        else:
            continue
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(value)
        else:
            keywords[p.name] = value
    return positional, keywords


def _aborted(signal: AbortSignal) -> asyncio.CancelledError:
    reason = f" ({signal.reason})" if signal.reason else ""
    return asyncio.CancelledError(f"the operation was aborted{reason}")


async def _until_aborted(coro: Coroutine[Any, Any, Any], signal: AbortSignal | None) -> Any:
    """Await ``coro`` as a task that an abort of ``signal`` cancels (from any thread).

    A coroutine that lets the cancellation through ends in ``CancelledError`` saying the
    operation was aborted; one that catches it and returns keeps its answer.
    """
    task = asyncio.ensure_future(coro)
    if signal is None:
        return await task
    loop = asyncio.get_running_loop()

    def cancel() -> None:
        # abort() runs this on the aborting thread, possibly just as the loop closes.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(task.cancel)

    unlink = signal.on_abort(cancel)
    try:
        return await task
    except asyncio.CancelledError:
        if signal.aborted and task.cancelled():
            raise _aborted(signal) from None
        raise
    finally:
        unlink()


def _run_coroutine(coro: Coroutine[Any, Any, Any], signal: AbortSignal | None, tool_name: str) -> Any:
    """Run ``coro`` to completion on a fresh event loop on this thread and return its value (or
    raise its exception); an abort of ``signal`` cancels it.

    A thread that already runs an event loop (a notebook, an async caller calling the tool
    directly) cannot run a second one, so there the coroutine runs on a thread of its own while
    this one waits for it.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_until_aborted(coro, signal))
    box: list[Any] = [None, None]

    def target() -> None:
        try:
            box[0] = asyncio.run(_until_aborted(coro, signal))
        except BaseException as exc:  # handed to the waiting caller, not lost in the thread
            box[1] = exc

    runner = threading.Thread(target=target, name=f"yiemagent-async-{tool_name}", daemon=True)
    runner.start()
    runner.join()
    if box[1] is not None:
        raise box[1]
    return box[0]


def _make_tool(
    fn: Callable[..., Any],
    name: str | None,
    label: str | None,
    description: str | None,
    parallel: bool,
    timeout_s: float | None,
    needs_approval: NeedsApproval = False,
) -> AgentTool:
    if inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"function_tool: function {fn.__qualname__!r} is an async generator; a tool "
            "returns one value, so make it a plain async def that returns it"
        )
    schema, params, doc_description = _build(fn)
    tool_name = name or fn.__name__

    def execute(
        _tool_call_id: str, args: dict[str, Any], signal: AbortSignal | None, on_partial_result: Any
    ) -> AgentToolResult:
        positional, keywords = _call_arguments(params, args, signal, on_partial_result)
        value = fn(*positional, **keywords)
        if inspect.iscoroutine(value):  # an async def: run it here, on the tool's thread
            value = _run_coroutine(value, signal, tool_name)
        return to_tool_result(value, tool_name)

    execute.__doc__ = f"Run {fn.__qualname__} with the tool call's arguments."
    return AgentTool(
        name=tool_name,
        label=label or _label_from(tool_name),
        description=description or doc_description or _label_from(tool_name),
        input_schema=schema,
        execute=execute,
        parallel_tool_execute=parallel,
        timeout_s=timeout_s,
        needs_approval=needs_approval,
    )


@overload
def function_tool(fn: Callable[..., Any], /) -> AgentTool: ...


@overload
def function_tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    parallel: bool = False,
    timeout_s: float | None = None,
    needs_approval: NeedsApproval = False,
) -> Callable[[Callable[..., Any]], AgentTool]: ...


def function_tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    parallel: bool = False,
    timeout_s: float | None = None,
    needs_approval: NeedsApproval = False,
) -> AgentTool | Callable[[Callable[..., Any]], AgentTool]:
    """Build an ``AgentTool`` from a function; use as ``@function_tool`` or ``@function_tool(...)``.

    The name defaults to the function's name, the label to that name in words, the description
    to the docstring's summary and extended text. The function's return value becomes the result
    (see ``to_tool_result``); ``Enum`` arguments arrive as members. An ``async def`` is run to
    completion on the calling thread with ``asyncio.run`` (on a helper thread if that thread
    already runs an event loop); an abort of the call's signal cancels it, which ends the call in
    ``CancelledError`` unless the coroutine catches it and returns. ``needs_approval`` (``True``
    or ``fn(args, context) -> bool``) makes its calls wait for a decision (docs/approval.md).
    Raises ``TypeError`` at decoration time, naming the function and parameter, for a missing or
    unsupported type hint, and for an async generator.
    """
    if fn is not None:
        if not callable(fn):
            raise TypeError(f"function_tool expects a function, got {type(fn).__name__}")
        return _make_tool(fn, name, label, description, parallel, timeout_s, needs_approval)

    def decorate(func: Callable[..., Any]) -> AgentTool:
        return _make_tool(func, name, label, description, parallel, timeout_s, needs_approval)

    return decorate

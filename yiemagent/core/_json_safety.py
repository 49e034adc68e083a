"""What may enter the history: finite JSON of a bounded depth, checked at the door.

One bad item must not break every later run or save. Tool-call arguments that are not finite
JSON, or are nested deeper than ``MAX_JSON_DEPTH``, give that call an error result (the loop
keeps a short text in their place, so the history stays sendable to every provider). Tool
``details`` that are not JSON-ready are converted (datetimes to ISO text, sets and tuples to
lists, non-finite numbers to text, other objects to their ``repr``, cycles and excess depth to
a note), never stored raw, so ``save()`` always works. Every walk here is iterative: a
structure nested 100,000 deep is reported, not a ``RecursionError``.
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import math
from typing import Any

__all__ = [
    "MAX_ECHO_CHARS",
    "MAX_JSON_DEPTH",
    "argument_problem",
    "clip",
    "json_ready",
    "nested_too_deep",
    "reject_constant",
]

MAX_JSON_DEPTH = 64  # levels of objects/arrays in tool arguments and details
MAX_ECHO_CHARS = 4000  # characters of received arguments an error text repeats

_SCALARS = (str, int, bool, type(None))
_EXACT_SCALARS = frozenset(_SCALARS)


def _flat_json_object(value: Any) -> bool:
    """Whether ``value`` is a ``dict`` with string keys whose values are all JSON scalars (finite
    numbers): the shape of most tool arguments and details, answered in one pass with no
    allocation, so the common case never pays for the general walk."""
    if type(value) is not dict:
        return False
    for key, item in value.items():
        if type(key) is not str:
            return False
        kind = type(item)
        if kind in _EXACT_SCALARS:
            continue
        if kind is not float or not math.isfinite(item):
            return False
    return True


def _render_path(path: tuple[Any, ...]) -> str:
    """``("args", "a", 0)`` as ``args.a[0]``: paths are built only when a problem is found."""
    text = str(path[0])
    for part in path[1:]:
        text += f"[{part}]" if type(part) is int else f".{part}"
    return text


def argument_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a tool call's arguments in the history, or ``None`` when it is
    finite JSON (dicts with string keys, lists, strings, numbers, booleans, ``None``) at most
    ``MAX_JSON_DEPTH`` levels deep. Never raises."""
    if _flat_json_object(value):
        return None
    # Each entry holds its parent's entry and its key: the path is rendered only on a problem.
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ("args",))]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, _SCALARS):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{_render_path(path)} is {item!r}, which is not a JSON number"
            continue
        if depth > MAX_JSON_DEPTH:
            return f"the arguments are nested more than {MAX_JSON_DEPTH} levels deep"
        if isinstance(item, dict):
            for key, sub in item.items():
                if not isinstance(key, str):
                    return f"{_render_path(path)} has a key {key!r} that is not a string"
                stack.append((sub, depth + 1, (*path, key)))
        elif isinstance(item, (list, tuple)):
            stack.extend((sub, depth + 1, (*path, i)) for i, sub in enumerate(item))
        else:
            return f"{_render_path(path)} is a {type(item).__name__}, which is not JSON"
    return None


def nested_too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value``'s dicts, lists and tuples nest more than ``limit`` levels deep (walked
    without recursion, and without looking into anything else). Never raises."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def reject_constant(name: str) -> Any:
    """``parse_constant`` for ``json.loads``: ``NaN`` and ``Infinity`` are not JSON."""
    raise ValueError(f"{name} is not a JSON number")


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters not shown)"


def _is_json_ready(value: Any) -> bool:
    """Whether ``value`` is finite JSON within the depth limit, with no shared or cyclic
    containers left to worry about (a quick pass before any copy is made)."""
    if _flat_json_object(value):
        return True
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if type(item) in _EXACT_SCALARS:
            continue
        if type(item) is float:
            if not math.isfinite(item):
                return False
            continue
        if depth > MAX_JSON_DEPTH or id(item) in seen:
            return False
        if type(item) is dict:
            if not all(type(k) is str for k in item):
                return False
            seen.add(id(item))
            stack.extend((v, depth + 1) for v in item.values())
        elif type(item) is list:
            seen.add(id(item))
            stack.extend((v, depth + 1) for v in item)
        else:
            return False
    return True


def json_ready(value: Any) -> Any:
    """``value`` as finite JSON: returned as it is when it already is, else a converted copy
    (see the module docstring for the rules). Never raises."""
    if _is_json_ready(value):
        return value
    return _convert(value)


def _scalar(item: Any) -> tuple[bool, Any]:
    """``(True, converted)`` for a value that is not a container, else ``(False, None)``."""
    if item is None or type(item) in (str, int, bool):
        return True, item
    if isinstance(item, float):
        return True, item if math.isfinite(item) else repr(item)
    if isinstance(item, enum.Enum):
        return True, item.value if isinstance(item.value, (str, int, float)) else repr(item)
    if isinstance(item, str):
        return True, str(item)
    if isinstance(item, int):
        return True, int(item)
    if isinstance(item, (datetime.datetime, datetime.date, datetime.time)):
        return True, item.isoformat()
    if isinstance(item, (dict, list, tuple, set, frozenset)):
        return False, None
    try:
        return True, repr(item)
    except Exception as exc:  # a broken __repr__ must not lose the whole result
        return True, f"<{type(item).__name__} object: repr failed with {type(exc).__name__}>"


def _convert(value: Any) -> Any:
    """The converted copy, built without recursion: each container is copied into a new one
    that is filled as its items are converted."""
    root: list[Any] = [None]
    # (source, destination container, key or index in it, depth, ids of the containers above)
    stack: list[tuple[Any, Any, Any, int, frozenset[int]]] = [(value, root, 0, 1, frozenset())]
    while stack:
        item, dest, slot, depth, above = stack.pop()
        simple, converted = _scalar(item)
        if simple:
            dest[slot] = converted
        elif id(item) in above:
            dest[slot] = "<a cycle: this value contains itself>"
        elif depth > MAX_JSON_DEPTH:
            dest[slot] = f"<nested more than {MAX_JSON_DEPTH} levels deep: not kept>"
        elif isinstance(item, dict):
            out: dict[str, Any] = {}
            dest[slot] = out
            inner = above | {id(item)}
            for key, sub in item.items():
                name = key if isinstance(key, str) else str(_scalar(key)[1])
                out[name] = None
                stack.append((sub, out, name, depth + 1, inner))
        else:
            items = list(item)
            if isinstance(item, (set, frozenset)):
                with contextlib.suppress(TypeError):  # mixed types: keep the set's own order
                    items = sorted(items)
            seq: list[Any] = [None] * len(items)
            dest[slot] = seq
            inner = above | {id(item)}
            stack.extend((sub, seq, i, depth + 1, inner) for i, sub in enumerate(items))
    return root[0]

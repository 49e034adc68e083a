"""A fast "certainly valid" check for the simple JSON Schemas most tools have.

``jsonschema`` validates any schema and explains every violation, but costs several
microseconds even for ``{"type": "object", "properties": {"n": {"type": "integer"}}}``; on a
tight tool loop that is the largest single cost of a turn. ``compile_fast_check`` compiles a
schema that uses only common keywords into a plain Python function that answers ``True`` only
when ``jsonschema`` would accept the arguments. Anything else (a keyword it does not know, or
arguments it is not sure about) answers ``False`` and the caller runs ``jsonschema``, which then
decides and writes the messages. So the fast check can make validation faster, never laxer.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Callable, Mapping, Sized
from typing import Any

from yiemagent.core._schema_patterns import PatternRefused, linear_pattern

__all__ = ["compile_fast_check", "json_copy"]

Check = Callable[[Any], bool]

# Keywords that never make an instance invalid (annotations; ``format`` is not asserted by the
# validators this library builds, which have no format checker).
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "format",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$id",
        "$schema",
    }
)
_DRAFTS = frozenset(
    {
        # Not draft 4 (nor 3): there 1.0 is not an integer.
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)


def _is_integer(x: Any) -> bool:
    t = type(x)
    return t is int or (t is float and x.is_integer())


def _is_number(x: Any) -> bool:
    t = type(x)
    return t is int or t is float


_TYPES: dict[str, Check] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda x: type(x) is bool,
    "null": lambda x: x is None,
}


class _Unsupported(Exception):
    """The schema uses something the fast check does not handle."""


def compile_fast_check(schema: Any) -> Check | None:
    """A function that returns ``True`` only for instances ``jsonschema`` accepts under
    ``schema``, or ``None`` when the schema uses a keyword outside the supported set (``type``,
    ``properties``, ``required``, ``additionalProperties``, ``items``, string ``enum``,
    ``minimum``/``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems``,
    ``pattern`` and annotations). Never raises."""
    if isinstance(schema, Mapping) and "$schema" in schema and schema["$schema"] not in _DRAFTS:
        return None
    try:
        return _compile(schema)
    except (_Unsupported, TypeError, ValueError, RecursionError):
        return None


def _compile(schema: Any) -> Check:
    if schema is True or (isinstance(schema, Mapping) and not schema):
        return lambda _x: True
    if not isinstance(schema, Mapping):
        raise _Unsupported
    checks: list[Check] = []
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        builder = _BUILDERS.get(key)
        if builder is None:
            raise _Unsupported(key)
        check = builder(value, schema)
        if check is not None:
            checks.append(check)
    return _all_of(checks)


def _all_of(checks: list[Check]) -> Check:
    if not checks:
        return lambda _x: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda x: first(x) and second(x)

    def check(x: Any) -> bool:
        for one in checks:  # noqa: SIM110 - a plain loop: all() with a generator costs twice as much
            if not one(x):
                return False
        return True

    return check


def _type(value: Any, _schema: Mapping[str, Any]) -> Check:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
        raise _Unsupported("type")
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]

    def check(x: Any) -> bool:
        for test in tests:  # noqa: SIM110 - a plain loop: any() with a generator costs twice as much
            if test(x):
                return True
        return False

    return check


def _properties(value: Any, schema: Mapping[str, Any]) -> Check:
    if not isinstance(value, Mapping):
        raise _Unsupported("properties")
    props = {name: _compile(sub) for name, sub in value.items()}
    extra = schema.get("additionalProperties", True)
    extra_check = None if extra is True else _compile(extra) if isinstance(extra, Mapping) else None
    closed = extra is False

    def check(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        for key, item in x.items():
            sub = props.get(key)
            if sub is not None:
                if not sub(item):
                    return False
            elif closed or (extra_check is not None and not extra_check(item)):
                return False
        return True

    return check


def _additional(value: Any, schema: Mapping[str, Any]) -> Check | None:
    if "properties" in schema:
        return None  # handled with the properties
    if value is True:
        return None
    if value is False:
        return lambda x: not isinstance(x, dict) or not x
    sub = _compile(value)
    return lambda x: not isinstance(x, dict) or all(sub(v) for v in x.values())


def _required(value: Any, _schema: Mapping[str, Any]) -> Check:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise _Unsupported("required")
    names = frozenset(value)
    return lambda x: not isinstance(x, dict) or names <= x.keys()


def _items(value: Any, _schema: Mapping[str, Any]) -> Check:
    if isinstance(value, list):  # the tuple form of older drafts
        raise _Unsupported("items")
    sub = _compile(value)

    def check(x: Any) -> bool:
        if isinstance(x, list):
            for item in x:
                if not sub(item):
                    return False
        return True

    return check


def _enum(value: Any, _schema: Mapping[str, Any]) -> Check:
    # Only strings: jsonschema tells True from 1 and compares containers its own way.
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise _Unsupported("enum")
    allowed = frozenset(value)
    return lambda x: isinstance(x, str) and x in allowed


def _bound(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Mapping[str, Any]], Check]:
    def build(value: Any, _schema: Mapping[str, Any]) -> Check:
        if not _is_number(value):
            raise _Unsupported("bound")

        def check(x: Any) -> bool:
            if _is_number(x):
                return compare(x, value)
            # Other numbers (Decimal, Fraction) are bounded too: leave them to jsonschema.
            return type(x) is bool or not isinstance(x, numbers.Number)

        return check

    return build


def _length(
    kind: type[Sized], compare: Callable[[int, int], bool]
) -> Callable[[Any, Mapping[str, Any]], Check]:
    def build(value: Any, _schema: Mapping[str, Any]) -> Check:
        if type(value) is not int or value < 0:
            raise _Unsupported("length")
        return lambda x: not isinstance(x, kind) or compare(len(x), value)

    return build


def _pattern(value: Any, _schema: Mapping[str, Any]) -> Check:
    # The engine the validators use (RE2, linear time); a pattern RE2 refuses, or a text too
    # long to match, is left to the validator, which knows what to do with it.
    if not isinstance(value, str):
        raise _Unsupported("pattern")
    try:
        accepts = linear_pattern(value).accepts
    except PatternRefused:
        raise _Unsupported("pattern") from None
    return lambda x: not isinstance(x, str) or accepts(x)


_BUILDERS: dict[str, Callable[[Any, Mapping[str, Any]], Check | None]] = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "items": _items,
    "enum": _enum,
    "minimum": _bound(lambda x, v: x >= v),
    "maximum": _bound(lambda x, v: x <= v),
    "minLength": _length(str, lambda n, v: n >= v),
    "maxLength": _length(str, lambda n, v: n <= v),
    "minItems": _length(list, lambda n, v: n >= v),
    "maxItems": _length(list, lambda n, v: n <= v),
    "pattern": _pattern,
}


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def json_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, strings, numbers, booleans, ``None``),
    several times faster than ``copy.deepcopy``; anything else goes through ``copy.deepcopy``."""
    t = type(value)
    # Immutable scalars are kept in place without a call each: most arguments are flat.
    if t is dict:
        return {k: v if type(v) in _IMMUTABLE else json_copy(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _IMMUTABLE else json_copy(v) for v in value]
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    return copy.deepcopy(value)

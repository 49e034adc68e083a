"""Python types as JSON Schemas, and JSON back as those types: what ``output_schema=`` accepts.

``schema_of(hint)`` gives the JSON Schema of a dataclass, a ``TypedDict``, an attrs class, a
pydantic model (its own ``model_json_schema``) or any type hint built from ``str``, ``int``,
``float``, ``bool``, ``None``, ``Any``, ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``, unions,
``Literal``, ``Enum`` and ``Annotated[X, "description"]``, nested as deep as they go. A class's
fields without a default are required and no other key is allowed (``additionalProperties:
false``), which the strict response formats of providers need. ``converter_of(hint)`` turns JSON
that matches that schema into the type: instances of the classes (pydantic by
``model_validate``), enum members, ints for integral floats. An unsupported hint or a type that
contains itself raises ``TypeError`` naming where.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

import attrs

__all__ = ["Converter", "converter_of", "is_model_class", "schema_of", "type_label"]

Converter = Callable[[Any], Any]
_SIMPLE = {str: "string", bool: "boolean", int: "integer", float: "number"}
_SUPPORTED = (
    "a dataclass, a TypedDict, an attrs class, a pydantic model, str, int, float, bool, None, "
    "Any, list[X], tuple[X, ...], dict[str, X], unions, Literal[...], Enum subclasses and "
    "Annotated[X, 'description']"
)


def is_model_class(hint: Any) -> bool:
    """Whether ``hint`` is a pydantic model class (checked without importing pydantic)."""
    return (
        isinstance(hint, type)
        and callable(getattr(hint, "model_json_schema", None))
        and callable(getattr(hint, "model_validate", None))
    )


def _is_class_with_fields(hint: Any) -> bool:
    return isinstance(hint, type) and (
        dataclasses.is_dataclass(hint) or typing.is_typeddict(hint) or attrs.has(hint) or is_model_class(hint)
    )


def type_label(hint: Any) -> str:
    """A short name of ``hint`` for messages (``Person``, ``list[int]``)."""
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def _fields(cls: type) -> list[tuple[str, Any, bool]]:
    """``(name, hint, required)`` of each field of a dataclass, TypedDict or attrs class."""
    hints = typing.get_type_hints(cls, include_extras=True)
    if dataclasses.is_dataclass(cls):
        return [
            (
                f.name,
                hints.get(f.name, Any),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
            if f.init
        ]
    if typing.is_typeddict(cls):
        required = getattr(cls, "__required_keys__", frozenset(hints))
        return [(name, hint, name in required) for name, hint in hints.items()]
    return [
        (a.alias or a.name, hints.get(a.name, Any), a.default is attrs.NOTHING)
        for a in attrs.fields(cls)
        if a.init
    ]


class _SchemaBuilder:
    """Builds one schema, hoisting nested pydantic models' ``$defs`` to the root."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.open: list[type] = []

    def build(self, hint: Any, where: str) -> dict[str, Any]:
        schema = self.schema(hint, where)
        if self.defs:
            schema = {**schema, "$defs": {**self.defs, **schema.get("$defs", {})}}
        return schema

    def schema(self, hint: Any, where: str) -> dict[str, Any]:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Annotated:
            inner = self.schema(args[0], where)
            notes = [a for a in args[1:] if isinstance(a, str)]
            return {**inner, "description": notes[0]} if notes else inner
        if hint is Any:
            return {}
        if hint is None or hint is type(None):
            return {"type": "null"}
        if isinstance(hint, type) and hint in _SIMPLE:
            return {"type": _SIMPLE[hint]}
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _enum_schema([m.value for m in hint], where, hint)
        if origin is Literal:
            return _enum_schema(list(args), where, hint)
        if origin is typing.Union or origin is types.UnionType:
            return {"anyOf": [self.schema(a, where) for a in args]}
        if hint in (list, tuple) or origin in (list, tuple):
            variadic = origin is list or (len(args) == 2 and args[1] is Ellipsis)
            if origin is tuple and args and not variadic:
                raise TypeError(f"{where}: fixed-length tuples are not supported; use tuple[X, ...]")
            if not args:
                return {"type": "array"}
            return {"type": "array", "items": self.schema(args[0], where)}
        if hint is dict or origin is dict:
            if not args:
                return {"type": "object"}
            if args[0] is not str:
                raise TypeError(f"{where}: dict keys must be str in JSON, got {hint!r}")
            return {"type": "object", "additionalProperties": self.schema(args[1], where)}
        if is_model_class(hint):
            model = dict(hint.model_json_schema(ref_template="#/$defs/{model}"))
            self.defs.update(model.pop("$defs", {}))
            return model
        if _is_class_with_fields(hint):
            return self.class_schema(hint, where)
        raise TypeError(f"{where}: unsupported type {hint!r}. Supported: {_SUPPORTED}")

    def class_schema(self, cls: type, where: str) -> dict[str, Any]:
        if cls in self.open:
            raise TypeError(f"{where}: {cls.__name__} contains itself; recursive types are not supported")
        self.open.append(cls)
        try:
            fields = _fields(cls)
            properties = {name: self.schema(hint, f"{where}.{name}") for name, hint, _ in fields}
        finally:
            self.open.pop()
        schema: dict[str, Any] = {
            "type": "object",
            "title": cls.__name__,
            "properties": properties,
            "required": [name for name, _, required in fields if required],
            "additionalProperties": False,
        }
        return schema


def _enum_schema(values: list[Any], where: str, hint: Any) -> dict[str, Any]:
    kinds = {type(v) for v in values}
    if not all(v is None or type(v) in (str, int, float, bool) for v in values):
        raise TypeError(f"{where}: {hint!r} has values that are not JSON scalars")
    if len(kinds) == 1 and (kind := next(iter(kinds))) in _SIMPLE:
        return {"type": _SIMPLE[kind], "enum": list(values)}
    return {"enum": list(values)}


def schema_of(hint: Any) -> dict[str, Any]:
    """The JSON Schema of ``hint`` (see the module docstring); ``TypeError`` when unsupported."""
    return _SchemaBuilder().build(hint, type_label(hint))


def converter_of(hint: Any) -> Converter:
    """A function from JSON matching ``schema_of(hint)`` to ``hint``'s Python form."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return converter_of(args[0])
    if is_model_class(hint):
        return typing.cast(Converter, hint.model_validate)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if hint is int:
        return lambda v: int(v) if isinstance(v, float) and v.is_integer() else v
    if origin in (list, tuple) and args:
        item, make = converter_of(args[0]), (list if origin is list else tuple)
        return lambda v: make(item(x) for x in v) if isinstance(v, list) else v
    if origin is dict and len(args) == 2:
        value = converter_of(args[1])
        return lambda v: {k: value(x) for k, x in v.items()} if isinstance(v, dict) else v
    if origin is typing.Union or origin is types.UnionType:
        return _union_converter(hint, [converter_of(a) for a in args])
    if isinstance(hint, type) and _is_class_with_fields(hint):
        return _class_converter(hint)
    return _same


def _same(value: Any) -> Any:
    return value


def _union_converter(hint: Any, converters: list[Converter]) -> Converter:
    members = typing.get_args(hint)

    def convert(value: Any) -> Any:
        if value is None and type(None) in members:
            return None
        for converter in converters:
            try:
                return converter(value)
            except (ValueError, TypeError, KeyError):
                continue
        return value

    return convert


def _class_converter(cls: type) -> Converter:
    fields = {name: converter_of(hint) for name, hint, _ in _fields(cls)}
    make: Callable[..., Any] = dict if typing.is_typeddict(cls) else cls

    def convert(value: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"{cls.__name__} needs a JSON object, got {type(value).__name__}")
        return make(**{k: fields[k](v) if k in fields else v for k, v in value.items()})

    return convert

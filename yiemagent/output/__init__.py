"""Structured answers: a run that ends in data matching a schema (docs/output.md).

``output_spec(schema, mode=..., retries=..., validate=...)`` turns what ``output_schema=``
accepts (a JSON Schema dict, a dataclass, a ``TypedDict``, an attrs class, a pydantic model, or
any supported type hint) into the core's ``OutputSpec``; ``YiemAgent`` and ``prompt`` call it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from yiemagent.core._output import OUTPUT_MODES, OUTPUT_TOOL_NAME, OutputSpec
from yiemagent.output._types import converter_of, schema_of, type_label

__all__ = ["OUTPUT_MODES", "OUTPUT_TOOL_NAME", "OutputSpec", "output_spec", "schema_of"]


def output_spec(
    schema: Any,
    *,
    mode: str = "tool",
    retries: int = 2,
    validate: Callable[[Any], Any] | None = None,
) -> OutputSpec:
    """The ``OutputSpec`` of ``schema``: a dict is the JSON Schema itself (the output is the
    parsed JSON); a class or type hint gives its schema and makes the output an instance of it.
    Raises ``TypeError`` for what is neither, naming what is supported, and ``ValueError`` for
    a schema, mode or retry count that cannot be used."""
    if isinstance(schema, OutputSpec):
        return schema
    if isinstance(schema, Mapping):
        return OutputSpec(schema=dict(schema), mode=mode, retries=retries, validate=validate)
    if schema is None or isinstance(schema, (str, bytes, int, float, list)):
        raise TypeError(
            "output_schema must be a JSON Schema (a dict), a dataclass, a TypedDict, an attrs "
            f"class, a pydantic model or a type hint; got {type(schema).__name__} {schema!r:.80}"
        )
    return OutputSpec(
        schema=schema_of(schema),
        mode=mode,
        retries=retries,
        validate=validate,
        convert=converter_of(schema),
        type_name=type_label(schema),
    )

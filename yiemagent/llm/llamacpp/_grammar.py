"""Grammars that keep the embedded model's JSON to a schema, and to a size that ends.

llama.cpp compiles a JSON Schema with LLGuidance (the ``%llguidance`` form of its ``grammar``
field). A small model under a schema's grammar alone can still run on for its whole token
budget: whitespace between every token, a string that never closes, a list that never ends,
properties the schema never named. The grammar here is made from a copy of the schema that
closes those doors (a compact layout, every object closed to unnamed properties where the
schema leaves that open, and, for a structured answer, every string, list and number bounded),
and a structured answer's token budget is sized to that bounded schema. The schema itself still
judges the answer: only what the model may write is narrowed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANY_OBJECT",
    "MAX_ANSWER_ITEMS",
    "MAX_ANSWER_NUMBER",
    "MAX_ANSWER_STRING",
    "bounded_output_grammar",
    "schema_grammar",
]

MAX_ANSWER_STRING = 120  # characters of a string of a structured answer the schema leaves unbounded
MAX_ANSWER_ITEMS = 8  # items of a list of a structured answer the schema leaves unbounded
MAX_ANSWER_NUMBER = 10**15  # magnitude of a number of a structured answer the schema leaves unbounded
_MIN_BUDGET = 32
_LAYOUT = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}
ANY_OBJECT = "%llguidance {}\nstart: %json " + json.dumps({"type": "object", "x-guidance": _LAYOUT})


def _llguidance(schema: Mapping[str, Any]) -> str:
    """llama.cpp's ``grammar`` for JSON following ``schema``, laid out compactly."""
    return "%llguidance {}\nstart: %json " + json.dumps({**schema, "x-guidance": _LAYOUT})


def _walk(schema: Any, bound: bool) -> Any:
    """A copy of ``schema`` with every object closed to unnamed properties (where the schema
    says nothing of them) and, with ``bound``, every string and list given a bound."""
    if isinstance(schema, list):
        return [_walk(item, bound) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {key: _walk(value, bound) for key, value in schema.items()}
    kinds = out.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    composed = any(key in out for key in ("allOf", "anyOf", "oneOf", "patternProperties", "$ref"))
    if "object" in kinds and "properties" in out and "additionalProperties" not in out and not composed:
        out["additionalProperties"] = False
    if bound and "string" in kinds and "enum" not in out and "const" not in out:
        out["maxLength"] = min(int(out.get("maxLength", MAX_ANSWER_STRING)), MAX_ANSWER_STRING)
    if bound and kinds & {"integer", "number"} and "enum" not in out and "const" not in out:
        _bound_number(out)
    if bound and "array" in kinds:
        out["maxItems"] = min(int(out.get("maxItems", MAX_ANSWER_ITEMS)), MAX_ANSWER_ITEMS)
    return out


def _bound_number(schema: dict[str, Any]) -> None:
    """Give a number the schema leaves unbounded a range of at most ``MAX_ANSWER_NUMBER`` either
    side of 0, since a small model's digits otherwise run on until its token budget ends."""
    for key, limit in (("minimum", -MAX_ANSWER_NUMBER), ("maximum", MAX_ANSWER_NUMBER)):
        exclusive = "exclusiveMinimum" if key == "minimum" else "exclusiveMaximum"
        if not isinstance(schema.get(key), (int, float)) and not isinstance(
            schema.get(exclusive), (int, float)
        ):
            schema[key] = limit


def schema_grammar(schema: Any) -> str:
    """The grammar of a tool call's arguments: a JSON object following ``schema`` (any object
    when there is none), compact, with no property the schema does not name."""
    if not isinstance(schema, Mapping) or not schema:
        return ANY_OBJECT
    return _llguidance(_walk(copy.deepcopy(dict(schema)), bound=False))


def _tokens(schema: Any, defs: Mapping[str, Any], depth: int) -> int | None:
    """An upper estimate of the tokens of JSON following the bounded ``schema`` (two characters
    a token for text, a few tokens for a number), ``None`` when it cannot be told (a reference
    deeper than a few levels: a recursive schema)."""
    if depth > 6 or not isinstance(schema, Mapping):
        return None if depth > 6 else 4
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        return _tokens(target, defs, depth + 1) if target is not None else None
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            known = [size for o in options if (size := _tokens(o, defs, depth + 1)) is not None]
            return max(known) if len(known) == len(options) else None
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return 2 + max((len(json.dumps(v)) // 2 for v in values), default=1)
    kinds = schema.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    sizes: list[int] = []
    if "string" in kinds:
        sizes.append(2 + int(schema.get("maxLength", MAX_ANSWER_STRING)) // 2)
    if "array" in kinds:
        item = _tokens(schema.get("items", {}), defs, depth + 1)
        if item is None:
            return None
        sizes.append(2 + int(schema.get("maxItems", MAX_ANSWER_ITEMS)) * (item + 1))
    if "object" in kinds or "properties" in schema:
        total = 2
        for name, value in (schema.get("properties") or {}).items():
            size = _tokens(value, defs, depth + 1)
            if size is None:
                return None
            total += 3 + len(name) // 2 + size
        sizes.append(total)
    return max(sizes) if sizes else 18  # a number (up to 16 digits, a token each), a boolean, null


def bounded_output_grammar(schema: Mapping[str, Any], max_tokens: int) -> tuple[str, int]:
    """The grammar of a structured answer following ``schema`` (strings and lists bounded, a
    compact layout, no unnamed property) and its token budget: the bounded schema's size, at
    most ``max_tokens``."""
    bounded = _walk(copy.deepcopy(dict(schema)), bound=True)
    defs = {**(bounded.get("definitions") or {}), **(bounded.get("$defs") or {})}
    estimate = _tokens(bounded, defs, 0)
    budget = max_tokens if estimate is None else min(max_tokens, max(_MIN_BUDGET, estimate))
    return _llguidance(bounded), budget

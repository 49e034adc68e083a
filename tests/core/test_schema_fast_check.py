"""The fast schema check never says "valid" where the tools' validator (jsonschema, with RE2 for
patterns) would not, and copies like deepcopy."""

from __future__ import annotations

import copy
import decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from yiemagent.core._schema_fast import compile_fast_check, json_copy
from yiemagent.core._tools import compile_schema_validator

SCALAR_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False)
    | st.sampled_from([0.0, 1.0, 2.5, -1.0])
    | st.sampled_from(["", "a", "ab", "abc", "x1", "B"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "n"]), children, max_size=3)
    ),
    max_leaves=8,
)

leaf_schemas = st.one_of(
    st.builds(lambda t: {"type": t}, st.sampled_from(SCALAR_TYPES)),
    st.builds(
        lambda ts: {"type": ts}, st.lists(st.sampled_from(SCALAR_TYPES), min_size=1, max_size=3, unique=True)
    ),
    st.builds(lambda e: {"enum": e}, st.lists(st.sampled_from(["a", "ab", "B"]), min_size=1, max_size=3)),
    st.builds(lambda v: {"minimum": v}, st.integers(-2, 2) | st.sampled_from([0.5, 1.5])),
    st.builds(lambda v: {"maximum": v}, st.integers(-2, 2)),
    st.builds(lambda v: {"minLength": v}, st.integers(0, 3)),
    st.builds(lambda v: {"maxLength": v}, st.integers(0, 3)),
    st.builds(lambda v: {"minItems": v}, st.integers(0, 2)),
    st.builds(lambda v: {"maxItems": v}, st.integers(0, 2)),
    st.builds(lambda p: {"pattern": p}, st.sampled_from(["^a", "b$", "[0-9]"])),
    st.just({"description": "only an annotation", "format": "date-time"}),
    st.just({}),
)


def _combine(children: Any) -> Any:
    return st.one_of(
        st.builds(
            lambda props, req, extra: {
                "type": "object",
                "properties": props,
                "required": req,
                "additionalProperties": extra,
            },
            st.dictionaries(st.sampled_from(["a", "b", "n"]), children, max_size=3),
            st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
            st.booleans() | children,
        ),
        st.builds(lambda items: {"type": "array", "items": items}, children),
        st.builds(lambda a, b: {**a, **b}, children, children),
    )


schemas = st.recursive(leaf_schemas, _combine, max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(schemas, json_values)
def test_the_fast_check_is_never_laxer_than_jsonschema(schema: dict[str, Any], value: Any) -> None:
    check = compile_fast_check(schema)
    assert check is not None  # the generated schemas use supported keywords only
    if check(value):
        assert compile_schema_validator(None, schema).is_valid(value), (schema, value)


@settings(max_examples=200, deadline=None)
@given(schemas, json_values)
def test_the_fast_check_accepts_what_it_can(schema: dict[str, Any], value: Any) -> None:
    # Not a guarantee the library relies on, but the fast path must be worth having: for the
    # supported keywords it agrees with jsonschema on plain JSON values.
    check = compile_fast_check(schema)
    assert check is not None
    assert check(value) == compile_schema_validator(None, schema).is_valid(value), (schema, value)


def test_schemas_it_does_not_understand_get_no_fast_check() -> None:
    for schema in (
        {"anyOf": [{"type": "string"}]},
        {"$ref": "#/$defs/x"},
        {"const": 1},
        {"type": "object", "patternProperties": {"^a": {}}},
        {"items": [{"type": "string"}]},
        {"enum": [1, 2]},
        {"$schema": "http://json-schema.org/draft-04/schema#"},
        {"type": "widget"},
        {"minimum": "1"},
        {"properties": {"a": {"not": {}}}},
    ):
        assert compile_fast_check(schema) is None, schema


def test_numbers_it_cannot_compare_are_left_to_jsonschema() -> None:
    check = compile_fast_check({"minimum": 1})
    assert check is not None
    assert not check(decimal.Decimal("0.5"))  # jsonschema bounds Decimals too: let it decide
    assert check(True) and check("text") and check(2)


def test_json_copy_copies_json_and_falls_back_to_deepcopy() -> None:
    value = {"a": [1, {"b": "c"}], "t": (1, 2), "f": 1.5, "n": None}
    copied = json_copy(value)
    assert copied == copy.deepcopy(value)
    assert copied["a"] is not value["a"] and copied["a"][1] is not value["a"][1]

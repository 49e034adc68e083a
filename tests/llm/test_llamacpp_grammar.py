"""The grammars that keep the embedded model's JSON to a schema and to a size that ends (pure
data; ``test_output_real.py`` runs them on the model): a compact layout, objects closed to
properties the schema does not name, and for a structured answer every string and list bounded,
with a token budget sized to the bounded schema."""

from __future__ import annotations

import json
from typing import Any

from yiemagent.llm.llamacpp._grammar import (
    ANY_OBJECT,
    MAX_ANSWER_ITEMS,
    MAX_ANSWER_NUMBER,
    MAX_ANSWER_STRING,
    bounded_output_grammar,
    schema_grammar,
)

CITY = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "country": {"type": "string", "maxLength": 40},
        "population": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "country", "population"],
}


def schema_in(grammar: str) -> dict[str, Any]:
    head, _, schema = grammar.partition("start: %json ")
    assert head == "%llguidance {}\n"
    parsed: dict[str, Any] = json.loads(schema)
    return parsed


def test_an_answers_grammar_bounds_every_string_and_list_and_closes_its_objects() -> None:
    grammar, budget = bounded_output_grammar(CITY, max_tokens=512)
    schema = schema_in(grammar)
    props = schema["properties"]
    assert props["name"]["maxLength"] == MAX_ANSWER_STRING
    assert props["country"]["maxLength"] == 40  # a tighter bound of the schema's own stays
    assert props["tags"]["maxItems"] == MAX_ANSWER_ITEMS
    assert props["tags"]["items"]["maxLength"] == MAX_ANSWER_STRING
    assert schema["additionalProperties"] is False
    assert schema["x-guidance"]["whitespace_flexible"] is False  # no runaway whitespace
    assert "maxLength" not in CITY["properties"]["name"]  # the schema given is not changed
    assert budget == 512  # eight tags of 120 characters could take that many
    three_fields = {**CITY, "properties": {k: v for k, v in CITY["properties"].items() if k != "tags"}}
    assert 32 <= bounded_output_grammar(three_fields, max_tokens=512)[1] < 140  # sized to the schema


def test_an_answers_grammar_bounds_every_number_the_schema_leaves_open() -> None:
    schema = {
        "type": "object",
        "properties": {
            "open": {"type": "integer"},
            "ranged": {"type": "number", "minimum": 0, "maximum": 10},
            "exclusive": {"type": "integer", "exclusiveMinimum": 0},
            "choice": {"type": "integer", "enum": [1, 2]},
        },
    }
    props = schema_in(bounded_output_grammar(schema, max_tokens=512)[0])["properties"]
    assert props["open"]["minimum"] == -MAX_ANSWER_NUMBER and props["open"]["maximum"] == MAX_ANSWER_NUMBER
    assert props["ranged"]["minimum"] == 0 and props["ranged"]["maximum"] == 10  # its own range stays
    assert "minimum" not in props["exclusive"] and props["exclusive"]["maximum"] == MAX_ANSWER_NUMBER
    assert "minimum" not in props["choice"] and "maximum" not in props["choice"]
    assert "minimum" not in schema_in(schema_grammar(schema))["properties"]["open"]  # not for arguments


def test_the_budget_is_the_reply_limit_when_the_schema_cannot_be_sized() -> None:
    tree = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
        "$defs": {"Node": {"$ref": "#/$defs/Node"}},
    }
    assert bounded_output_grammar(tree, max_tokens=300)[1] == 300
    assert bounded_output_grammar(CITY, max_tokens=40)[1] == 40  # never over the limit


def test_an_objects_own_word_on_other_properties_is_kept() -> None:
    open_schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True}
    assert schema_in(schema_grammar(open_schema))["additionalProperties"] is True
    composed = {"type": "object", "properties": {"a": {"type": "string"}}, "allOf": [{"required": ["a"]}]}
    assert "additionalProperties" not in schema_in(schema_grammar(composed))


def test_a_tool_calls_arguments_are_closed_but_not_bounded() -> None:
    """A tool's arguments may be long (writeTool's code): only the answer's strings are bounded."""
    schema = schema_in(schema_grammar(CITY))
    assert "maxLength" not in schema["properties"]["name"] and schema["additionalProperties"] is False
    assert schema_grammar(None) == schema_grammar({}) == ANY_OBJECT

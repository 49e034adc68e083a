"""The prompts and grammars of LlamaCppClient's constrained steps (pure text; the grammars are
also compiled by llama.cpp's own parser, which the ``local`` extra brings)."""

from __future__ import annotations

import json

import pytest
from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

from yiemagent.llm.llamacpp._prompts import (
    ANSWER_HINT,
    FAILED_LEAD,
    answer_grammar,
    choice_grammar,
    failed_result,
    fill_prefix,
    first_sentence,
    gbnf_literal,
    result_value,
    shares_a_word,
    strict_strings,
    transcript,
)

TIME_TOOL = {"name": "getTime", "description": "Get the current local time for a city or an IANA "
             "time zone (e.g. Tokyo, New York, Europe/London, UTC)."}
WEATHER_TOOL = {"name": "getWeather", "description": "Fetch the current weather (conditions, "
                "temperature, humidity, wind) for a city, from Open-Meteo."}


@pytest.mark.parametrize(("text", "first"), [
    ("Get the time (e.g. Tokyo, UTC). More text.", "Get the time (e.g. Tokyo, UTC)."),
    ("One. Two.", "One."),
    ("No full stop", "No full stop"),
    ("Use e.g. Tokyo. Then", "Use e.g. Tokyo."),
    ("Spread\n  over   lines. Next", "Spread over lines."),
])
def test_first_sentence(text: str, first: str) -> None:
    assert first_sentence(text) == first


@pytest.mark.parametrize(("result", "value"), [
    ("Current time in Tokyo: 2026-12-01T01:16:10+09:00 (Tuesday, time zone Asia/Tokyo, JST)",
     "2026-12-01T01:16:10+09:00"),
    ("Weather in Paris, Île-de-France, France: overcast, 11.2°C (feels like 9.0°C), humidity 81%",
     "overcast, 11.2°C"),
    ("42", "42"),
    ("Available tools:\n- getTime: Time\n- listTools: List", "Available tools:\n- getTime: Time\n"
     "- listTools: List"),
    ('Tool "getWeather" failed: WeatherLookupError: Unknown city "Xy".',
     'WeatherLookupError: Unknown city "Xy".'),
])
def test_result_value_is_the_fact_an_answer_must_state(result: str, value: str) -> None:
    assert result_value(result) == value


def test_failed_results_are_recognised() -> None:
    assert failed_result('Tool "getTime" failed: ValueError: Unknown place "Xy".')
    assert not failed_result("Current time in Tokyo: 10:00")


def test_grammars_compile_in_llama_cpp() -> None:
    for grammar in (choice_grammar(["getTime", "getWeather"]),
                    choice_grammar(["a\"b"], allow_none=False),
                    answer_grammar('2026 "quoted" \\ back\nslash'),
                    answer_grammar("boom", failed=True),
                    strict_strings(json_schema_to_gbnf(json.dumps(
                        {"type": "object", "properties": {"city": {"type": "string"}}})))):
        LlamaGrammar.from_string(grammar, verbose=False)  # raises on a malformed grammar


def test_choice_grammar_names_every_option_once() -> None:
    assert choice_grammar(["getTime", "getWeather"]) == 'root ::= "getTime" | "getWeather" | "none"\n'
    assert choice_grammar(["x"], allow_none=False) == 'root ::= "x"\n'


def test_a_failed_call_is_answered_with_a_fixed_lead() -> None:
    assert gbnf_literal(FAILED_LEAD) in answer_grammar("boom", failed=True)


def test_strict_strings_forbid_control_characters() -> None:
    gbnf = strict_strings(json_schema_to_gbnf(json.dumps({"type": "string"})))
    assert 'char ::= [^"\\\\\\x00-\\x1f]' in gbnf


def test_gbnf_literal_escapes() -> None:
    assert gbnf_literal('a"b\\c\nd\x01') == '"a\\"b\\\\c\\nd\\x01"'


def test_fill_prefix_opens_the_call() -> None:
    assert fill_prefix("getTime") == '<tool_call>{"name": "getTime", "arguments": '


@pytest.mark.parametrize(("question", "tool", "shares"), [
    ("What time is it in Tokyo?", TIME_TOOL, True),
    ("What's the weather in Paris?", WEATHER_TOOL, True),
    ("Is it raining in London?", TIME_TOOL, True),  # London is in the description's examples
    ("What's the weather in Paris?", TIME_TOOL, False),
    ("Hello, who are you?", TIME_TOOL, False),
    ("Hello, who are you?", WEATHER_TOOL, False),
    ("List your tools", {"name": "listTools", "description": "List every tool."}, True),
])
def test_shares_a_word(question: str, tool: dict[str, str], shares: bool) -> None:
    assert shares_a_word(question, tool) is shares


def test_transcript_renders_calls_and_results_for_any_template() -> None:
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Time in Tokyo?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "getTime", "arguments": '{"city": "Tokyo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "10:00"},
    ]
    assert transcript(messages, "default") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Time in Tokyo?"},
        {"role": "assistant",
         "content": '<tool_call>{"name": "getTime", "arguments": {"city": "Tokyo"}}</tool_call>'},
        {"role": "user", "content": f"<tool_response>\n10:00\n</tool_response>\n{ANSWER_HINT}"},
    ]
    assert transcript([{"role": "user", "content": "hi"}], "default")[0] == {
        "role": "system", "content": "default"}

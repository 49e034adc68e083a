"""The prompts and grammars of LlamaCppClient's constrained steps (pure text; the grammars are
also compiled by llama.cpp's own parser, which the ``local`` extra brings, and run there)."""

from __future__ import annotations

import pytest

from yiemagent.llm.llamacpp._prompts import (
    ANSWER_HINT,
    FAILED_LEAD,
    answer_grammar,
    answer_words,
    candidates,
    choice_grammar,
    clarification,
    failed_result,
    fill_prefix,
    first_sentence,
    gbnf_literal,
    grounding,
    relevance,
    result_label,
    result_value,
    sentence_end,
    transcript,
)

TIME_TOOL = {
    "name": "getTime",
    "description": "Get the current local time for a city or an IANA "
    "time zone (e.g. Tokyo, New York, Europe/London, UTC).",
}
WEATHER_TOOL = {
    "name": "getWeather",
    "description": "Fetch the current weather (conditions, "
    "temperature, humidity, wind) for a city, from Open-Meteo.",
}
WRITE_TOOL = {
    "name": "writeTool",
    "description": "Create a new tool from Python code when no "
    "existing tool can do the job. The tool is saved as a file and registered at once, "
    "so you can call it in your next step. Call listTools first to check the name is "
    "free.",
}
LIST_TOOL = {
    "name": "listTools",
    "description": "List every tool you can call, with its label and "
    "description. Call it to discover tools, and before creating a new tool to avoid a "
    "name that is already taken.",
}
EXAMPLE_TOOLS = [TIME_TOOL, WEATHER_TOOL, WRITE_TOOL, LIST_TOOL]  # as the example folder loads them
TOKYO_RESULT = "Current time in Tokyo: 2026-12-01T01:16:10+09:00 (Tuesday, time zone Asia/Tokyo, JST)"


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Get the time (e.g. Tokyo, UTC). More text.", "Get the time (e.g. Tokyo, UTC)."),
        ("One. Two.", "One."),
        ("No full stop", "No full stop"),
        ("Use e.g. Tokyo. Then", "Use e.g. Tokyo."),
        ("Spread\n  over   lines. Next", "Spread over lines."),
    ],
)
def test_first_sentence(text: str, first: str) -> None:
    assert first_sentence(text) == first


@pytest.mark.parametrize(
    ("result", "value"),
    [
        (
            "Current time in Tokyo: 2026-12-01T01:16:10+09:00 (Tuesday, time zone Asia/Tokyo, JST)",
            "2026-12-01T01:16:10+09:00",
        ),
        (
            "Weather in Paris, Île-de-France, France: overcast, 11.2°C (feels like 9.0°C), humidity 81%",
            "overcast, 11.2°C",
        ),
        ("42", "42"),
        (
            "Available tools:\n- getTime: Time\n- listTools: List",
            "Available tools:\n- getTime: Time\n- listTools: List",
        ),
        (
            'Tool "getWeather" failed: WeatherLookupError: Unknown city "Xy".',
            'WeatherLookupError: Unknown city "Xy".',
        ),
    ],
)
def test_result_value_is_the_fact_an_answer_must_state(result: str, value: str) -> None:
    assert result_value(result) == value


def test_failed_results_are_recognised() -> None:
    assert failed_result('Tool "getTime" failed: ValueError: Unknown place "Xy".')
    assert not failed_result("Current time in Tokyo: 10:00")


@pytest.mark.needs("local")
def test_grammars_compile_in_llama_cpp() -> None:
    """Each grammar runs in llama.cpp: one that does not parse ends the completion with an
    error chunk, which the client raises as ``LlmError``."""
    from yiemagent.llm import LlamaCppClient, LlmError

    client = LlamaCppClient(max_tokens=2)
    try:
        engine = client._load()
        grammars = (
            choice_grammar(["getTime", "getWeather"]),
            choice_grammar(['a"b'], allow_none=False),
            answer_grammar('2026 "quoted" \\ back\nslash'),
            answer_grammar("boom", ["Sorry: "]),
            answer_grammar("ok.", (), ["l'été", "Zürich"]),
            *(
                g.grammar
                for r in (TOKYO_RESULT, 'Tool "x" failed: Boom.', "42\n43")
                if (g := grounding(r, "What is it?")) is not None
            ),
        )
        for grammar in grammars:
            client._generate(engine, "Hi", grammar, 2, None, None, [0, 0])  # raises when it does not parse
        with pytest.raises(LlmError, match="failed to parse grammar"):
            client._generate(engine, "Hi", "root ::= nothere", 2, None, None, [0, 0])
    finally:
        client.close()


def test_choice_grammar_names_every_option_once() -> None:
    assert choice_grammar(["getTime", "getWeather"]) == 'root ::= "getTime" | "getWeather" | "none"\n'
    assert choice_grammar(["x"], allow_none=False) == 'root ::= "x"\n'


def test_a_failed_call_is_answered_with_a_fixed_lead() -> None:
    grounded = grounding('Tool "getWeather" failed: WeatherLookupError: Unknown city "Xy".', "?")
    assert grounded is not None and grounded.leads == (FAILED_LEAD,)
    assert gbnf_literal(FAILED_LEAD) in grounded.grammar
    assert grounded.answer(FAILED_LEAD + "Weather") == (
        FAILED_LEAD + 'WeatherLookupError: Unknown city "Xy".'
    )  # no full stop added after one


def test_a_labelled_result_is_answered_after_a_lead_made_of_its_label() -> None:
    grounded = grounding(TOKYO_RESULT, "What time is it in Tokyo?")
    assert grounded is not None and result_label(TOKYO_RESULT) == "Current time in Tokyo"
    assert grounded.leads == (
        "The current time in Tokyo is ",
        "The current time in Tokyo are ",
        "Current time in Tokyo: ",
    )
    assert grounded.grammar.startswith('root ::= lead "2026-12-01T01:16:10+09:00" "."\n')
    # The rest of the value is forced once it has begun, so it is filled in, not generated.
    assert grounded.answer("The current time in Tokyo") is None
    assert grounded.answer("The current time in Tokyo is 20") == (
        "The current time in Tokyo is 2026-12-01T01:16:10+09:00."
    )


def test_an_unlabelled_result_is_answered_in_words_of_the_question_and_the_result() -> None:
    grounded = grounding("It rains (light)", "Is it raining in Zürich?")
    assert grounded is not None and grounded.value == "It rains" and not grounded.leads
    words = answer_words(["Is it raining in Zürich?", " (light)"])
    assert {"Zürich", "raining", "Raining", "light", "the", "The"} <= set(words)
    assert not any(c.isdigit() for w in words for c in w)  # no number can be made up
    assert grounded.answer("Zürich: It") == "Zürich: It rains."
    assert grounded.answer("Zürich") is None  # not after a space or a colon: still the lead


def test_gbnf_literal_escapes() -> None:
    assert gbnf_literal('a"b\\c\nd\x01') == '"a\\"b\\\\c\\nd\\x01"'


def test_fill_prefix_opens_the_call() -> None:
    assert fill_prefix("getTime") == '<tool_call>{"name": "getTime", "arguments": '


@pytest.mark.parametrize(
    ("question", "tool", "topic"),
    [
        ("What time is it in Tokyo?", TIME_TOOL, 2),
        ("What's the weather in Paris?", WEATHER_TOOL, 2),
        ("What is the temperature in Berlin?", WEATHER_TOOL, 1),  # a word of the description
        ("What's the weather in Paris?", TIME_TOOL, 0),
        ("Hello, who are you?", TIME_TOOL, 0),
        ("Hello, who are you?", WEATHER_TOOL, 0),
        ("List your tools", LIST_TOOL, 2),
        ("Write a new tool that reverses a string", WRITE_TOOL, 2),
        # A request verb, even the one in the tool's name, is no topic ...
        ("Write an email to my boss asking for Friday off.", WRITE_TOOL, 0),
        ("Write two sentences about the sea.", WRITE_TOOL, 0),
        ("Get me a coffee", TIME_TOOL, 0),
        # ... nor is a name among the tool's examples.
        ("Is it raining in London?", TIME_TOOL, 0),
        ("How hot is it in Tokyo?", TIME_TOOL, 0),
    ],
)
def test_relevance_needs_a_topic_word_not_a_verb_or_an_example(
    question: str, tool: dict[str, str], topic: int
) -> None:
    assert relevance(question, tool).topic == topic


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What time is it in Tokyo?", ["getTime"]),
        ("What's the weather in Tokyo?", ["getWeather"]),  # Tokyo among getTime's examples is no rival
        ("What is the temperature in Berlin?", ["getWeather"]),
        ("List your tools", ["listTools", "writeTool"]),  # the one named by two shared words first
        ("Write an email to my boss asking for Friday off.", []),
        ("Write two sentences about the sea.", []),
        ("Hello!", []),
        ("What is 2 + 2?", []),
        ("Quelle heure est-il à Tokyo ?", []),
        ("Quel temps fait-il à Tokyo ?", []),
    ],
)
def test_candidates_among_the_example_tools(question: str, expected: list[str]) -> None:
    assert [t["name"] for t in candidates(question, EXAMPLE_TOOLS)] == expected


def test_a_question_naming_only_an_example_gets_a_clarification() -> None:
    text = clarification("Quel temps fait-il à Tokyo ?", EXAMPLE_TOOLS)
    assert text is not None
    assert text.startswith(
        "I can't tell what you want to know about Tokyo. What I can do: Get the current local time for a city"
    )
    assert clarification("Write two sentences about the sea.", EXAMPLE_TOOLS) is None


@pytest.mark.parametrize(
    ("text", "final", "end"),
    [
        ("Dear Boss,\n\nI hope this. I und", False, len("Dear Boss,\n\nI hope this.")),
        ("It is 2.5 km", False, 0),  # a decimal point ends nothing
        ("Done.", False, 0),  # more may follow: "Done.5"
        ("Done.", True, 5),
        ('He said "ok." Then', False, len('He said "ok."')),
    ],
)
def test_sentence_end(text: str, final: bool, end: int) -> None:
    assert sentence_end(text, final) == end


def test_transcript_renders_calls_and_results_for_any_template() -> None:
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Time in Tokyo?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "getTime", "arguments": '{"city": "Tokyo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "10:00"},
    ]
    assert transcript(messages, "default") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Time in Tokyo?"},
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "getTime", "arguments": {"city": "Tokyo"}}</tool_call>',
        },
        {"role": "user", "content": f"<tool_response>\n10:00\n</tool_response>\n{ANSWER_HINT}"},
    ]
    assert transcript([{"role": "user", "content": "hi"}], "default")[0] == {
        "role": "system",
        "content": "default",
    }

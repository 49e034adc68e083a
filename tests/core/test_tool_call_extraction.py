"""extract_tool_calls over every tool-call form (docs/design.md, decision 2), and what the pipeline
does with bad JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pipeline_helpers import assert_batch_well_formed, echo_execute, make_tool, run, text

from yiemagent import (
    AgentLoopConfig,
    AgentToolCall,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    extract_tool_calls,
)
from yiemagent.core._tool_calls import parse_arguments


def _one(content: list[Any]) -> AgentToolCall:
    found, calls = extract_tool_calls(content)
    assert found is True
    assert len(calls) == 1
    return calls[0]


def test_spec_tool_calls_list_with_flat_entries() -> None:
    block = {
        "type": "tool_calls",
        "tool_calls": [
            {"id": "call_1", "name": "getWeather", "arguments": {"city": "Tokyo"}},
            {"id": "call_2", "name": "getTime", "arguments": {"timezone": "Asia/Tokyo"}},
        ],
    }
    found, calls = extract_tool_calls([block])
    assert found
    assert calls == [
        AgentToolCall("call_1", "getWeather", {"city": "Tokyo"}),
        AgentToolCall("call_2", "getTime", {"timezone": "Asia/Tokyo"}),
    ]
    assert all(c.type == "function" for c in calls)


def test_spec_tool_calls_list_with_openai_function_entries() -> None:
    block = {
        "type": "tool_calls",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "getWeather", "arguments": '{"city": "Tokyo"}'},
            },
            {"id": "call_2", "function": {"name": "getTime", "arguments": {"timezone": "UTC"}}},
        ],
    }
    _, calls = extract_tool_calls([block])
    assert calls == [
        AgentToolCall("call_1", "getWeather", {"city": "Tokyo"}),
        AgentToolCall("call_2", "getTime", {"timezone": "UTC"}),
    ]


def test_single_tool_call_block() -> None:
    block = {"type": "tool_call", "id": "call_1", "name": "getWeather", "arguments": {"city": "Tokyo"}}
    assert _one([block]) == AgentToolCall("call_1", "getWeather", {"city": "Tokyo"})


def test_openai_wire_block_alone() -> None:
    block = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "getTime", "arguments": '{"timezone": "Europe/Oslo"}'},
    }
    assert _one([block]) == AgentToolCall("call_9", "getTime", {"timezone": "Europe/Oslo"})


def test_typed_tool_call_block_is_returned_as_is() -> None:
    call = AgentToolCall("call_t", "getTime", {"timezone": "UTC"})
    assert _one([TextContent("thinking aloud"), call]) is call


def test_all_forms_mixed_keep_content_order() -> None:
    content: list[Any] = [
        TextContent("Let me check."),
        ThinkingContent("plan"),
        AgentToolCall("a", "t1", {}),
        {
            "type": "tool_calls",
            "tool_calls": [
                {"id": "b", "name": "t2", "arguments": {}},
                {"id": "c", "function": {"name": "t3", "arguments": ""}},
            ],
        },
        {"type": "text", "text": "raw text block"},
        {"type": "tool_call", "id": "d", "name": "t4"},
        {"id": "e", "type": "function", "function": {"name": "t5", "arguments": None}},
    ]
    found, calls = extract_tool_calls(content)
    assert found
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "t1", {}),
        ("b", "t2", {}),
        ("c", "t3", {}),
        ("d", "t4", {}),
        ("e", "t5", {}),
    ]


def test_no_tool_calls() -> None:
    assert extract_tool_calls([]) == (False, [])
    assert extract_tool_calls([TextContent("hi"), {"type": "text", "text": "x"}]) == (False, [])
    # a "function" block without a function dict is not a call
    assert extract_tool_calls([{"type": "function", "name": "x"}]) == (False, [])


def test_malformed_entries_are_skipped_not_raised() -> None:
    block = {"type": "tool_calls", "tool_calls": ["not a dict", None, {"id": "ok", "name": "t"}]}
    found, calls = extract_tool_calls([block, {"type": "tool_calls", "tool_calls": None}])
    assert found
    assert [c.id for c in calls] == ["ok"]


def test_missing_ids_are_generated_and_unique() -> None:
    content = [
        {
            "type": "tool_calls",
            "tool_calls": [{"name": "t", "arguments": {}}, {"function": {"name": "t", "arguments": "{}"}}],
        },
        {"type": "tool_call", "name": "t"},
        {"type": "tool_call", "id": "", "name": "t"},
        {"type": "function", "function": {"name": "t", "arguments": "{}"}},
    ]
    _, calls = extract_tool_calls(content)
    ids = [c.id for c in calls]
    assert len(ids) == 5
    assert len(set(ids)) == 5
    assert all(i.startswith("call_") and len(i) > len("call_") for i in ids)


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"a": 1, "b": [true, null]}', {"a": 1, "b": [True, None]}),
        ("", {}),
        (None, {}),
        ({"a": 1}, {"a": 1}),
        ("[1, 2]", [1, 2]),  # valid JSON that is not an object: the pipeline reports it
        ('"{\\"a\\": 1}"', {"a": 1}),  # double-encoded object
    ],
)
def test_json_string_arguments_are_parsed(raw: Any, parsed: Any) -> None:
    assert parse_arguments(raw) == parsed
    assert _one([{"type": "tool_call", "id": "x", "name": "t", "arguments": raw}]).arguments == parsed


@pytest.mark.parametrize("raw", ['{"city": ', "not json", '"just a string"', "{'single': 1}"])
def test_unusable_json_is_kept_raw_so_the_pipeline_can_report_it(raw: str) -> None:
    call = _one([{"id": "x", "type": "function", "function": {"name": "t", "arguments": raw}}])
    assert call.arguments == raw


def test_invalid_json_gives_that_call_an_error_and_the_rest_of_the_batch_runs() -> None:
    message = AssistantMessage(
        [
            {
                "type": "tool_calls",
                "tool_calls": [
                    {
                        "id": "good1",
                        "type": "function",
                        "function": {"name": "echo", "arguments": '{"n": 1}'},
                    },
                    {"id": "bad", "type": "function", "function": {"name": "echo", "arguments": '{"n": '}},
                    {
                        "id": "good2",
                        "type": "function",
                        "function": {"name": "echo", "arguments": '{"n": 2}'},
                    },
                ],
            }
        ]
    )
    _, calls = extract_tool_calls(message.content)
    tool = make_tool("echo", echo_execute, parallel=True)
    for mode in ("sequential", "parallel"):
        batch, rec = run([tool], calls, AgentLoopConfig([tool], tool_execution=mode))
        assert_batch_well_formed(calls, batch, rec.events)
        good1, bad, good2 = batch.messages
        assert not good1.is_error and text(good1) == "good1:[('n', 1)]"
        assert not good2.is_error and text(good2) == "good2:[('n', 2)]"
        assert bad.is_error
        error = text(bad)
        assert 'The arguments for tool "echo" are not valid JSON' in error
        assert "Expecting value" in error  # the parser's own message
        assert '{"n": ' in error  # what the model sent


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("[1, 2]", "must be a JSON object, got list"),
        ('"just a string"', 'must be a JSON object, got str: "just a string"'),
        ("42", "must be a JSON object, got int: 42"),
    ],
)
def test_valid_json_that_is_not_an_object_is_reported_as_such(arguments: str, expected: str) -> None:
    _, calls = extract_tool_calls([{"type": "tool_call", "id": "x", "name": "echo", "arguments": arguments}])
    batch, _ = run([make_tool("echo", echo_execute)], calls)
    assert batch.messages[0].is_error
    assert expected in text(batch.messages[0])
    assert "not valid JSON" not in text(batch.messages[0])


def test_typed_call_with_json_string_arguments_runs() -> None:
    calls = [AgentToolCall("t1", "echo", json.dumps({"k": "v"}))]
    batch, _ = run([make_tool("echo", echo_execute)], calls)
    assert not batch.messages[0].is_error
    assert text(batch.messages[0]) == "t1:[('k', 'v')]"

"""Events as JSON: every event class has a ``to_dict()`` of the shape docs/cli.md documents, and the
JSON-lines writer numbers turns and always writes valid JSON, whatever a tool put in its results."""

from __future__ import annotations

import io
import json
import math
import re
from typing import Any

import pytest
from paths import ROOT

import yiemagent.core._events as events
from yiemagent import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    ApprovalRequestedEvent,
    AssistantMessage,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    PendingApproval,
    TextContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    ToolResultMessage,
    TurnEndEvent,
    TurnStartEvent,
    UserMessage,
    YiemAgent,
)
from yiemagent.integrations._event_log import JsonlEventWriter, event_line

USER = UserMessage("hi", timestamp=1)
REPLY = AssistantMessage(content=[AgentToolCall("c1", "echo", {"text": "a"})], timestamp=2)
RESULT = ToolResultMessage("c1", "echo", [TextContent("A")], timestamp=3)
TOOL_RESULT = AgentToolResult([TextContent("A")], {"n": 1})
TOOL_RESULT_DICT = {
    "content": [{"type": "text", "text": "A"}],
    "details": {"n": 1},
    "usage": None,
    "terminate": False,
}

# Every event class with one instance and the to_dict() docs/cli.md documents for it.
SHAPES: list[tuple[AgentEvent, dict[str, Any]]] = [
    (AgentStartEvent(), {"type": "agent_start"}),
    (TurnStartEvent(2), {"type": "turn_start", "turn": 2}),
    (MessageStartEvent(USER), {"type": "message_start", "message": USER.to_dict()}),
    (MessageStartEvent(None), {"type": "message_start", "message": None}),
    (
        MessageUpdateEvent("text", "Hel", 0),
        {
            "type": "message_update",
            "kind": "text",
            "delta": "Hel",
            "content_index": 0,
            "tool_call_id": None,
            "tool_name": None,
        },
    ),
    (MessageEndEvent(REPLY), {"type": "message_end", "message": REPLY.to_dict()}),
    (
        ToolExecStartEvent("c1", "echo", {"text": "a"}),
        {
            "type": "tool_execution_start",
            "tool_call_id": "c1",
            "tool_name": "echo",
            "arguments": {"text": "a"},
        },
    ),
    (
        ToolExecUpdateEvent("c1", "echo", {"text": "a"}, TOOL_RESULT),
        {
            "type": "tool_execution_update",
            "tool_call_id": "c1",
            "tool_name": "echo",
            "arguments": {"text": "a"},
            "text": "A",
            "partial_result": TOOL_RESULT_DICT,
        },
    ),
    (
        ToolExecUpdateEvent("c1", "echo", {"text": "a"}, {"done": 0.5}),
        {
            "type": "tool_execution_update",
            "tool_call_id": "c1",
            "tool_name": "echo",
            "arguments": {"text": "a"},
            "text": "",
            "partial_result": {"done": 0.5},
        },
    ),
    (
        ToolExecEndEvent("c1", "echo", TOOL_RESULT, False),
        {
            "type": "tool_execution_end",
            "tool_call_id": "c1",
            "tool_name": "echo",
            "is_error": False,
            "error_kind": None,
            "text": "A",
            "result": TOOL_RESULT_DICT,
        },
    ),
    (
        TurnEndEvent(REPLY, [RESULT]),
        {"type": "turn_end", "message": REPLY.to_dict(), "tool_results": [RESULT.to_dict()]},
    ),
    (
        AgentEndEvent([USER, REPLY]),
        {"type": "agent_end", "messages": [USER.to_dict(), REPLY.to_dict()], "response": None},
    ),
    (
        ApprovalRequestedEvent([PendingApproval("c1", "echo", {"text": "a"})]),
        {
            "type": "approval_requested",
            "pending": [{"tool_call_id": "c1", "tool_name": "echo", "arguments": {"text": "a"}}],
        },
    ),
]


def test_every_event_class_has_a_documented_shape() -> None:
    covered = {type(event) for event, _ in SHAPES}
    defined = {
        getattr(events, name)
        for name in events.__all__
        if isinstance(getattr(events, name), type) and issubclass(getattr(events, name), AgentEvent)
    } - {AgentEvent}
    assert covered == defined


@pytest.mark.parametrize(("event", "shape"), SHAPES, ids=lambda v: getattr(v, "event_type", ""))
def test_to_dict_gives_the_documented_shape(event: AgentEvent, shape: dict[str, Any]) -> None:
    data = event.to_dict()
    assert data == shape
    assert data["type"] == event.event_type
    assert json.loads(json.dumps(data, allow_nan=False)) == data


def test_to_dict_shares_nothing_with_the_event() -> None:
    args = {"nested": {"x": [1]}}
    data = ToolExecStartEvent("c1", "echo", args).to_dict()
    data["arguments"]["nested"]["x"].append(2)
    assert args == {"nested": {"x": [1]}}


def test_values_that_are_not_json_are_converted() -> None:
    result = AgentToolResult("x", {"nan": math.nan, "when": {1, 2}, "obj": object()})
    line = json.loads(event_line(ToolExecEndEvent("c1", "t", result), 1))
    assert line["result"]["details"]["nan"] == "nan" and line["result"]["details"]["when"] == [1, 2]
    assert line["result"]["details"]["obj"].startswith("<object object")
    raw = json.loads(event_line(ToolExecStartEvent("c1", "t", '{"broken": '), 1))
    assert raw["arguments"] == '{"broken": '


def test_lines_put_type_and_turn_first_and_stay_ascii() -> None:
    line = event_line(MessageUpdateEvent("text", "héllo ✓", 0), 3)
    assert line.isascii()
    assert list(json.loads(line))[:2] == ["type", "turn"]
    assert json.loads(line)["delta"] == "héllo ✓"


def test_the_writer_numbers_turns_from_a_real_run() -> None:
    replies = iter([REPLY, AssistantMessage(content=[TextContent("done")])])
    stream = io.StringIO()
    tool = AgentTool(
        "echo",
        "Echo",
        "Echo.",
        {"type": "object"},
        lambda _id, args, _s, _p: AgentToolResult(args["text"].upper()),
    )
    with YiemAgent(
        llm_call=lambda _request: next(replies), tools=[tool], agent_event_sink=JsonlEventWriter(stream)
    ) as agent:
        assert agent.prompt("go", timeout=10).stop_reason == "stop"
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    turns = [(e["type"], e["turn"]) for e in lines]
    assert turns[0] == ("agent_start", 0) and turns[-1] == ("agent_end", 2)
    assert ("message_end", 0) in turns  # the user's message comes before the first turn
    assert ("tool_execution_end", 1) in turns and ("turn_start", 2) in turns


def test_the_writer_stops_at_a_broken_stream() -> None:
    class Broken(io.StringIO):
        def write(self, _text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    writer = JsonlEventWriter(Broken())
    writer(AgentStartEvent())
    writer(TurnStartEvent(1))  # neither raises
    assert isinstance(writer.broken, BrokenPipeError) and writer.turn == 1


def test_the_cli_docs_list_every_event_type() -> None:
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = docs.split("### Events as JSON", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)) - {"type"}  # the header
    assert listed == {event.event_type for event, _ in SHAPES}

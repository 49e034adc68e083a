"""Events as JSON-ready dicts and back (``yiemagent.integrations``): every event a real run emits
survives ``event_to_dict`` -> JSON text -> ``event_from_dict`` unchanged."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, call, reply

from yiemagent import (
    AgentEndEvent,
    AgentEvent,
    AgentTool,
    AgentToolResult,
    MessageUpdateEvent,
    TextContent,
    ToolExecUpdateEvent,
    YiemAgent,
)
from yiemagent.integrations._event_wire import event_from_dict, event_to_dict


def progress(_id: str, args: dict[str, Any], _signal: Any, on_partial: Any) -> AgentToolResult:
    on_partial(AgentToolResult([TextContent("half way")], details={"done": 0.5}))
    on_partial({"step": 2})
    return AgentToolResult([TextContent(f"done {args['n']}")], details={"n": args["n"]})


def run_events() -> list[AgentEvent]:
    """The events of a run with a tool call that reports progress, then a final answer."""
    tool = AgentTool("progress", "Progress", "Reports progress", {"type": "object"}, progress)
    events: list[AgentEvent] = []
    llm = ScriptedLLM(call("progress", {"n": 3}), reply("finished"))
    with YiemAgent(llm_call=llm, tools=[tool], agent_event_sink=events.append) as agent:
        agent.prompt("go", WAIT)
    return events


def test_every_event_of_a_run_round_trips_through_json() -> None:
    events = run_events()
    assert len(events) > 10
    for event in events:
        data = json.loads(json.dumps(event_to_dict(event)))
        assert data["type"] == event.event_type
        assert event_from_dict(data) == event


def test_the_end_of_a_run_keeps_the_runs_usage() -> None:
    end = run_events()[-1]
    assert isinstance(end, AgentEndEvent) and end.response is not None
    assert end.response.run_usage is not None and end.response.run_usage.llm_calls == 2
    rebuilt = event_from_dict(json.loads(json.dumps(event_to_dict(end))))
    assert isinstance(rebuilt, AgentEndEvent) and rebuilt.response is not None
    assert rebuilt.response.run_usage == end.response.run_usage
    assert rebuilt.response.run_usage.calls_per_tool == {"progress": 1}


def test_partial_results_keep_their_kind() -> None:
    updates = [e for e in run_events() if isinstance(e, ToolExecUpdateEvent)]
    rebuilt = [event_from_dict(json.loads(json.dumps(event_to_dict(e)))) for e in updates]
    assert isinstance(rebuilt[0], ToolExecUpdateEvent) and isinstance(rebuilt[1], ToolExecUpdateEvent)
    assert isinstance(rebuilt[0].partial_result, AgentToolResult)
    assert rebuilt[0].partial_result.details == {"done": 0.5}
    assert rebuilt[1].partial_result == {"step": 2}


def test_values_that_are_not_json_are_made_json_ready() -> None:
    when = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
    event = ToolExecUpdateEvent("c1", "t", {"at": when}, {"values": {1, 2}, "x": float("nan")})
    data = json.loads(json.dumps(event_to_dict(event), allow_nan=False))
    assert data["arguments"] == {"at": when.isoformat()}
    assert data["partial_result"] == {"values": [1, 2], "x": "nan"}


def test_streamed_updates_round_trip() -> None:
    event = MessageUpdateEvent("tool_call", '{"a"', 1, "c1", "t")
    assert event_from_dict(event_to_dict(event)) == event


def test_an_unknown_event_class_reads_back_as_a_plain_event() -> None:
    import attrs

    @attrs.define(frozen=True)
    class CustomEvent(AgentEvent):
        payload: Any = None
        event_type = "custom"

    data = event_to_dict(CustomEvent({"k": object()}))
    assert data["type"] == "custom" and json.dumps(data)
    assert type(event_from_dict(data)) is AgentEvent


def test_a_dict_that_is_not_an_event_is_refused() -> None:
    with pytest.raises(ValueError, match="not an event dict"):
        event_from_dict({"type": "nonsense"})
    with pytest.raises(ValueError, match="turn_end"):
        event_from_dict({"type": "turn_end", "message": {"role": "user"}})
    with pytest.raises(ValueError, match="message_end"):
        event_from_dict({"type": "message_end"})

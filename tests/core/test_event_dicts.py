"""Events and tool results have ``to_dict()``: JSON-ready data in the shape conformance traces use."""

from __future__ import annotations

import json
from typing import Any

from agent_helpers import ScriptedLLM, reply

from yiemagent import (
    AgentState,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    LlmUsage,
    MessageUpdateEvent,
    RunConfig,
    TextContent,
    ToolExecEndEvent,
    ToolExecUpdateEvent,
    UserMessage,
    run_loop,
)


def progress(_id: str, args: dict[str, Any], _signal: Any, on_partial: Any) -> AgentToolResult:
    on_partial(AgentToolResult([TextContent("half")]))
    on_partial({"content": [{"type": "text", "text": "most"}]})
    on_partial("done soon")
    return AgentToolResult([TextContent(f"n={args['n']}")], {"when": {1, 2}}, terminate=True)


def test_every_event_of_a_run_serialises_to_json() -> None:
    tool = AgentTool("p", "P", "progress", {"type": "object"}, progress)
    llm = ScriptedLLM(
        AssistantMessage([AgentToolCall("c1", "p", {"n": 1}), AgentToolCall("c2", "nope", {})]), reply("ok")
    )
    events: list[Any] = []
    run_loop([UserMessage("hi")], AgentState("s", None, [tool]), RunConfig(llm_call=llm), events.append)
    dicts = [e.to_dict() for e in events]
    json.dumps(dicts, allow_nan=False)
    assert [d["type"] for d in dicts][:4] == ["agent_start", "message_start", "message_end", "turn_start"]
    updates = [d for d in dicts if d["type"] == "tool_execution_update"]
    assert [u["text"] for u in updates] == ["half", "most", "done soon"]
    ends = {d["tool_call_id"]: d for d in dicts if d["type"] == "tool_execution_end"}
    assert ends["c1"]["is_error"] is False and ends["c1"]["error_kind"] is None
    assert ends["c1"]["text"] == "n=1" and ends["c1"]["result"]["terminate"] is True
    assert ends["c1"]["result"]["details"] == {"when": [1, 2]}
    assert ends["c2"]["is_error"] is True and ends["c2"]["error_kind"] == "tool_not_found"
    assert dicts[-1]["type"] == "agent_end" and len(dicts[-1]["messages"]) == 5


def test_result_and_small_events_to_dict() -> None:
    result = AgentToolResult([TextContent("a"), TextContent("b")], {"k": 1}, LlmUsage(1, 2))
    data = result.to_dict()
    assert data["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert data["usage"]["output"] == 2 and data["terminate"] is False
    data["details"]["k"] = 2
    assert result.details == {"k": 1}  # a copy
    end = ToolExecEndEvent("c", "t", result, False).to_dict()
    assert end["text"] == "a\nb" and end["error_kind"] is None
    update = ToolExecUpdateEvent("c", "t", {}, object()).to_dict()
    assert update["text"] == "" and isinstance(update["partial_result"], str)
    assert MessageUpdateEvent("text", "hi").to_dict() == {
        "type": "message_update",
        "kind": "text",
        "delta": "hi",
        "content_index": 0,
        "tool_call_id": None,
        "tool_name": None,
    }

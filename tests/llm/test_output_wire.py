"""A run's output on the wire of each provider client, against loopback HTTP servers: the tool
mode's final-answer tool in OpenAI's and Anthropic's tool lists with the output's schema, its
refusal sent back as a tool result, the native mode's ``response_format``, and a clear error
response where a client has no such mode."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from llm_helpers import (
    anthropic_client,
    anthropic_message,
    openai_client,
    openai_completion,
    openai_tool_call,
)
from llm_server import ScriptedServer

from yiemagent import YiemAgent

WAIT_S = 20.0


class Person(TypedDict):
    name: str
    age: int


PERSON_SCHEMA = {
    "type": "object",
    "title": "Person",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def tool_use(call_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return anthropic_message(
        [{"type": "tool_use", "id": call_id, "name": "final_answer", "input": args}], stop_reason="tool_use"
    )


def test_the_tool_mode_through_the_anthropic_wire(server: ScriptedServer) -> None:
    server.json(tool_use("toolu_01", {"name": "Ada", "age": "36"}))
    server.json(tool_use("toolu_02", {"name": "Ada", "age": 36}))
    with YiemAgent(llm_call=anthropic_client(server), output_schema=Person) as agent:
        response = agent.prompt("Who is Ada?", timeout=WAIT_S)
    assert response.stop_reason == "stop", response.error_message
    assert response.output == {"name": "Ada", "age": 36}
    first, second = (r.body for r in server.requests)
    tools = {t["name"]: t for t in first["tools"]}
    assert tools["final_answer"]["input_schema"] == PERSON_SCHEMA
    # The refusal went back as the call's tool result, flagged as an error, with the path.
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01"
    assert result["is_error"] is True
    shown = json.dumps(result["content"])
    assert "args.age: '36' is not of type 'integer'" in shown


def test_the_native_mode_is_refused_by_the_anthropic_client_with_what_to_use(server: ScriptedServer) -> None:
    with YiemAgent(llm_call=anthropic_client(server), output_schema=Person, output_mode="native") as agent:
        response = agent.prompt("Who is Ada?", timeout=WAIT_S)
    assert response.stop_reason == "error"
    assert response.error_message is not None and "output_mode='tool'" in response.error_message
    assert not server.requests  # nothing was sent


def test_the_tool_mode_through_the_openai_wire(server: ScriptedServer) -> None:
    call = openai_tool_call("call_1", "final_answer", json.dumps({"name": "Ada", "age": 36}))
    server.json(openai_completion(None, tool_calls=[call], finish="tool_calls"))
    with YiemAgent(llm_call=openai_client(server, stream=False), output_schema=Person) as agent:
        response = agent.prompt("Who is Ada?", timeout=WAIT_S)
    assert response.output == {"name": "Ada", "age": 36}
    body = server.requests[0].body
    assert [t["function"]["name"] for t in body["tools"]] == ["final_answer"]
    assert body["tools"][0]["function"]["parameters"] == PERSON_SCHEMA
    assert "response_format" not in body


def test_the_native_mode_sends_a_response_format_and_reads_the_json_text(server: ScriptedServer) -> None:
    server.json(openai_completion('{"name": "Ada", "age": 36}'))
    with YiemAgent(
        llm_call=openai_client(server, stream=False), output_schema=Person, output_mode="native"
    ) as agent:
        response = agent.prompt("Who is Ada?", timeout=WAIT_S)
    assert response.output == {"name": "Ada", "age": 36}
    body = server.requests[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_answer", "schema": PERSON_SCHEMA},
    }
    assert "tools" not in body


def test_the_grammar_mode_is_refused_by_an_http_client_with_what_to_use(server: ScriptedServer) -> None:
    with YiemAgent(llm_call=openai_client(server), output_schema=Person, output_mode="grammar") as agent:
        response = agent.prompt("Who is Ada?", timeout=WAIT_S)
        assert agent.prompt("again", timeout=WAIT_S).stop_reason == "error"  # the agent goes on
    assert response.stop_reason == "error"
    assert response.error_message is not None and "output_mode='native'" in response.error_message
    assert not server.requests

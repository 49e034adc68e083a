"""``LlmRequest``, the default request: typed fields for provider clients, the spec's dict view for
an ``llm_call`` written against it, and a clear refusal of messages that are not typed ones."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import requests
from agent_helpers import WAIT, call, echo_tool, reply
from llm_server import ScriptedServer

from yiemagent import (
    AgentContext,
    AgentToolCall,
    AssistantMessage,
    LlmRequest,
    TextContent,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
    format_msg_for_llm,
)
from yiemagent.core._output_request import OutputRequest


def test_spec_shaped_dicts_are_refused_naming_what_to_do_instead() -> None:
    """Dicts would be dropped unsent by the clients (they read the typed messages)."""
    with pytest.raises(TypeError, match=r"got a dict; to send a request already in OpenAI's dict shape"):
        LlmRequest(messages=[{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="got a str"):
        LlmRequest(messages=[UserMessage("fine"), "not a message"])  # type: ignore[list-item]


def test_the_typed_fields_and_the_dict_view_tell_the_same_request() -> None:
    request = format_msg_for_llm(AgentContext("Be brief.", [UserMessage("hi")], {}))
    assert request.system_prompt == "Be brief." and request.messages[0].content[0].text == "hi"
    assert json.loads(json.dumps(request.to_dict())) == {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ]
    }


def test_an_llm_call_reading_the_typed_fields_runs_a_real_agent() -> None:
    seen: list[tuple[str, list[str], list[str], str | None]] = []

    def typed(request: LlmRequest) -> object:
        seen.append(
            (
                request.system_prompt,
                [m.role for m in request.messages],
                list(request.tools),
                request.session_id,
            )
        )
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return reply(f"the tool said {last.content[0].text}")
        return call("echo", {"text": "hi"})

    agent = YiemAgent(llm_call=typed, tools=[echo_tool()], system_prompt="Be brief.", session_id="s-1")
    answer = agent.prompt("go", timeout=WAIT)
    assert answer.content[0].text == "the tool said echo: hi"
    assert seen == [
        ("Be brief.", ["user"], ["echo"], "s-1"),
        ("Be brief.", ["user", "assistant", "toolResult"], ["echo"], "s-1"),
    ]


def test_an_llm_call_reading_openai_dicts_runs_a_real_agent() -> None:
    sent: list[list[str]] = []

    def spec_shaped(request: dict[str, object]) -> object:
        messages = request["messages"]
        assert isinstance(messages, list) and request["tools"][0]["function"]["name"] == "echo"  # type: ignore[index]
        sent.append([m["role"] for m in messages])
        if messages[-1]["role"] == "tool":
            return reply(f"the tool said {messages[-1]['content'][0]['text']}")
        return call("echo", {"text": "hi"})

    agent = YiemAgent(llm_call=spec_shaped, tools=[echo_tool()], system_prompt="Be brief.")
    assert agent.prompt("go", timeout=WAIT).content[0].text == "the tool said echo: hi"
    assert sent == [["system", "user"], ["system", "user", "assistant", "tool"]]


def _seed_style_llm_call(url: str) -> Any:
    """An ``llm_call`` written as the seed's end-to-end example shows: the formatted request
    goes to an HTTP API as it is (``requests.post(url, json=request)``), and the API's reply
    (OpenAI's chat form) becomes the assistant message."""

    def llm_call(request: dict[str, Any]) -> AssistantMessage:
        json.dumps(request)  # what an llm_call that logs or builds its own body does first
        body = requests.post(f"{url}/v1/chat/completions", json=request, timeout=WAIT).json()
        message = body["choices"][0]["message"]
        calls = [
            AgentToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []
        ]
        text_blocks = [TextContent(message["content"])] if message.get("content") else []
        return AssistantMessage([*text_blocks, *calls], stop_reason="toolUse" if calls else "stop")

    return llm_call


def test_the_request_serialises_as_the_spec_dict_for_an_llm_call_written_like_the_seed() -> None:
    """The seed's example passes the formatted request to an HTTP API; in Python that is
    ``requests.post(url, json=request)``, which must send the spec's ``Dict`` (it raised
    ``TypeError: Object of type LlmRequest is not JSON serializable``)."""
    tool_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "echo", "arguments": '{"text": "hi"}'},
    }
    with ScriptedServer() as server:
        server.json(
            {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [tool_call]}}]}
        )
        server.json({"choices": [{"message": {"role": "assistant", "content": "done"}}]})
        agent = YiemAgent(
            llm_call=_seed_style_llm_call(server.url), tools=[echo_tool()], system_prompt="Be brief."
        )
        answer = agent.prompt("go", timeout=WAIT)
        agent.shutdown()
    assert answer.stop_reason == "stop" and answer.content[0].text == "done"
    first, second = (r.body for r in server.requests)
    assert first["messages"] == [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
    ]
    assert [t["function"]["name"] for t in first["tools"]] == ["echo"]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][-1]["tool_call_id"] == "call_1"


def test_the_request_is_a_dict_whose_every_reading_shows_the_view() -> None:
    request = format_msg_for_llm(AgentContext("Be brief.", [UserMessage("hi")], {"echo": echo_tool()}))
    view = request.to_dict()
    assert isinstance(request, dict) and request == view and view == request
    assert json.loads(json.dumps(request)) == json.loads(json.dumps(view))
    assert json.loads(json.dumps(request, indent=2, sort_keys=True)) == json.loads(json.dumps(view))
    assert dict(request) == view and {**request} == view and request | {} == view and {} | request == view
    assert list(request) == ["messages", "tools"] and len(request) == 2 and "tools" in request
    assert dict(request.items()) == view and list(request.values()) == list(view.values())
    assert request.get("messages") == view["messages"] and request.get("nope", 7) == 7
    for other in (copy.deepcopy(request), copy.copy(request)):
        assert type(other) is LlmRequest and other == view and other.tools.keys() == {"echo"}


def test_the_request_shows_its_output_as_response_format_only_when_asked() -> None:
    request = format_msg_for_llm(AgentContext("", [UserMessage("hi")], {}))
    assert "response_format" not in request and list(request) == ["messages"]
    request.output = OutputRequest("answer", {"type": "object"}, "native")
    assert "response_format" in request and json.loads(json.dumps(request))["response_format"]
    request.output = None
    assert "response_format" not in json.loads(json.dumps(request))


def test_the_request_cannot_be_changed_in_place() -> None:
    request = format_msg_for_llm(AgentContext("", [UserMessage("hi")], {}))
    for change in (
        lambda: request.__setitem__("model", "x"),
        lambda: request.update(model="x"),
        lambda: request.setdefault("model", "x"),
        lambda: request.pop("messages"),
        lambda: request.clear(),
    ):
        with pytest.raises(TypeError, match=r"read-only.*dict\(request\)"):
            change()
    assert list(json.loads(json.dumps(request))) == ["messages"]

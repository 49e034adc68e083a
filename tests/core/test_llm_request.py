"""``LlmRequest``, the default request: typed fields for provider clients, the spec's dict view for
an ``llm_call`` written against it, and a clear refusal of messages that are not typed ones."""

from __future__ import annotations

import json

import pytest
from agent_helpers import WAIT, call, echo_tool, reply

from yiemagent import AgentContext, LlmRequest, ToolResultMessage, UserMessage, YiemAgent, format_msg_for_llm


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

"""``LlmRequest``, the default request: typed fields for provider clients, the spec's dict view for
an ``llm_call`` written against it, and a clear refusal of messages that are not typed ones."""

from __future__ import annotations

import json

import pytest

from yiemagent import AgentContext, LlmRequest, UserMessage, format_msg_for_llm


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

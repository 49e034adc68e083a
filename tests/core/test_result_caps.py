"""``max_tool_result_chars``: the model sees a long result's start and a note of how much was
cut; the whole text stays in the history (the message's ``full_text``) and in the session, the
tool's own details untouched; a tool's own cap wins over the agent's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from yiemagent import (
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    LlmRequest,
    TextContent,
    ToolResultMessage,
    YiemAgent,
)

WAIT_S = 10.0
LONG = "".join(f"{n:04d} " for n in range(400))  # 2,000 characters


def tool(name: str, cap: int | None = None, details: dict[str, Any] | None = None) -> AgentTool:
    return AgentTool(
        name,
        name,
        "Give a long text.",
        {"type": "object"},
        lambda *_: AgentToolResult(LONG, details or {}),
        max_tool_result_chars=cap,
    )


def run(tools: list[AgentTool], **options: Any) -> tuple[YiemAgent, list[LlmRequest]]:
    requests: list[LlmRequest] = []

    def llm(request: LlmRequest) -> AssistantMessage:
        requests.append(request)
        if len(requests) == 1:
            return AssistantMessage(
                [AgentToolCall(f"c_{t.name}", t.name, {}) for t in tools], stop_reason="toolUse"
            )
        return AssistantMessage([TextContent("ok")])

    agent = YiemAgent(llm_call=llm, tools=tools, **options)
    agent.prompt("go", timeout=WAIT_S)
    return agent, requests


def sent_results(request: LlmRequest) -> list[str]:
    """The text of each tool result the request sends (the typed messages, as clients read them)."""
    return [
        "".join(b.text for b in m.content if isinstance(b, TextContent))
        for m in request.messages
        if isinstance(m, ToolResultMessage)
    ]


def test_the_model_sees_the_capped_text_and_the_history_keeps_the_whole(tmp_path: Path) -> None:
    agent, requests = run([tool("long")], max_tool_result_chars=100)
    with agent:
        result = next(m for m in agent.messages if isinstance(m, ToolResultMessage))
        agent.save(tmp_path / "s.json")
    shown = sent_results(requests[1])[0]
    assert shown.startswith(LONG[:100])
    assert "1900 of 2000 characters cut (max_tool_result_chars=100)" in shown
    assert len(shown) < 250
    assert result.full_text == LONG and result.details == {}
    assert LONG in (tmp_path / "s.json").read_text()
    loaded = YiemAgent.load(tmp_path / "s.json", llm_call=lambda r: AssistantMessage([]))
    try:
        reloaded = next(m for m in loaded.messages if isinstance(m, ToolResultMessage))
        assert reloaded == result  # the whole text comes back from the session
    finally:
        loaded.shutdown()


def test_a_tools_own_details_are_kept_as_the_tool_made_them() -> None:
    """The cap wrote the whole text into ``details["full_result"]``, over a tool's own entry of
    that name: the tool's details now stay as they are."""
    own = {"full_result": "the tool's own", "rows": 400}
    agent, _ = run([tool("long", details=own)], max_tool_result_chars=100)
    with agent:
        result = next(m for m in agent.messages if isinstance(m, ToolResultMessage))
    assert result.details == own
    assert result.full_text == LONG
    assert ToolResultMessage.from_dict(result.to_dict()) == result


def test_a_result_that_fits_has_no_full_text() -> None:
    agent, _ = run([tool("long")], max_tool_result_chars=5000)
    with agent:
        result = next(m for m in agent.messages if isinstance(m, ToolResultMessage))
    assert result.full_text is None and "full_text" not in result.to_dict()


def test_a_tools_own_cap_wins_over_the_agents() -> None:
    agent, requests = run([tool("own", cap=50), tool("other")], max_tool_result_chars=300)
    agent.shutdown()
    own, other = sent_results(requests[1])
    assert own.startswith(LONG[:50]) and "1950 of 2000" in own
    assert other.startswith(LONG[:300]) and "1700 of 2000" in other


def test_without_a_cap_nothing_is_cut() -> None:
    agent, requests = run([tool("long")])
    agent.shutdown()
    assert sent_results(requests[1]) == [LONG]


@pytest.mark.parametrize("cap", [0, -3, 2.5, True])
def test_a_cap_that_is_not_a_positive_int_is_refused(cap: Any) -> None:
    with pytest.raises(ValueError, match="max_tool_result_chars must be an int >= 1"):
        tool("t", cap=cap)
    with pytest.raises(ValueError, match="max_tool_result_chars must be an int >= 1"):
        YiemAgent(llm_call=lambda r: AssistantMessage([]), max_tool_result_chars=cap)

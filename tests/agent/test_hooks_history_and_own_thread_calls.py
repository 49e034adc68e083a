"""Issue 10's runtime items: strict hooks, a read-only history for hooks, typed message fields,
and blocking calls from an agent's own threads."""

from __future__ import annotations

from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, call, echo_tool, reply, text

from yiemagent import (
    AfterToolCallResult,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallResult,
    TextContent,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
)
from yiemagent.core._events import TurnStartEvent


def one_result(**options: Any) -> ToolResultMessage:
    with YiemAgent(
        llm_call=ScriptedLLM(call("echo", {"text": "x"}), reply("ok")), tools=[echo_tool()], **options
    ) as agent:
        agent.prompt("go", WAIT)
        return next(m for m in agent.messages if isinstance(m, ToolResultMessage))


@pytest.mark.parametrize(
    "after",
    [{"terminate": "false"}, {"is_error": "false"}, {"is_error": 0}, AfterToolCallResult(terminate="no")],
)  # type: ignore[arg-type]
def test_after_hook_flags_must_be_booleans(after: Any) -> None:
    result = one_result(after_tool_call=lambda ctx, sig: after)
    assert result.is_error and "after_tool_call hook failed" in result.content[0].text
    assert "must be True or False" in result.content[0].text


@pytest.mark.parametrize("before", [{"block": "false"}, BeforeToolCallResult(block=1)])  # type: ignore[arg-type]
def test_before_hook_block_must_be_a_boolean(before: Any) -> None:
    result = one_result(before_tool_call=lambda ctx, sig: before)
    assert result.is_error and "before_tool_call hook failed" in result.content[0].text


def test_a_hook_cannot_change_the_live_history() -> None:
    seen: list[int] = []

    def vandal(ctx: Any, _sig: Any) -> None:
        seen.append(len(ctx.context.messages))
        assert ctx.context.messages[0].content[0].text == "go"
        ctx.context.messages.clear()  # a read-only view has no clear()

    result = one_result(before_tool_call=vandal)
    assert seen == [2] and result.is_error and "AttributeError" in result.content[0].text


def test_the_history_is_intact_after_a_vandal_hook() -> None:
    def vandal(ctx: Any, _sig: Any) -> None:
        ctx.context.messages.append(UserMessage("forged"))

    with YiemAgent(
        llm_call=ScriptedLLM(call("echo", {"text": "x"}), reply("ok")),
        tools=[echo_tool()],
        after_tool_call=vandal,
    ) as agent:
        agent.prompt("go", WAIT)
        assert [m.role for m in agent.messages] == ["user", "assistant", "toolResult", "assistant"]


def test_message_fields_in_the_wrong_order_are_a_type_error_naming_the_field() -> None:
    with pytest.raises(TypeError, match=r"AssistantMessage\.api must be a str"):
        AssistantMessage("assistant", [TextContent("hi")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ToolResultMessage\.tool_name must be a str"):
        ToolResultMessage("call_1", [TextContent("x")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="is_error must be a bool"):
        ToolResultMessage("call_1", "t", [], {}, None, [], "false")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="details must be a dict"):
        ToolResultMessage("call_1", "t", [], ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="error_message"):
        AssistantMessage([], error_message=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="usage"):
        AssistantMessage([], usage={"input": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timestamp"):
        UserMessage("user", [TextContent("hi")])  # type: ignore[arg-type]
    assert AssistantMessage("just text").content == [TextContent("just text")]


def test_a_parallel_tool_that_prompts_its_own_agent_gets_an_error_not_a_deadlock() -> None:
    holder: dict[str, YiemAgent] = {}

    def reentrant(*_args: Any) -> AgentToolResult:
        holder["agent"].prompt("from inside", WAIT)
        return AgentToolResult("unreachable")

    tool = AgentTool(
        "inner", "Inner", "prompts its own agent", {"type": "object"}, reentrant, parallel_tool_execute=True
    )
    batch = AssistantMessage([AgentToolCall("a", "inner", {}), AgentToolCall("b", "inner", {})])
    with YiemAgent(
        llm_call=ScriptedLLM(batch, reply("ok")), tools=[tool], tool_execution="parallel"
    ) as agent:
        holder["agent"] = agent
        assert text(agent.prompt("go", WAIT)) == "ok"
        results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
        assert len(results) == 2
        assert all(r.is_error and "RuntimeError" in r.content[0].text for r in results)
        assert agent.input_channel.qsize() == 0


def test_a_tool_with_a_timeout_that_prompts_its_own_agent_gets_an_error() -> None:
    holder: dict[str, YiemAgent] = {}

    def reentrant(*_args: Any) -> AgentToolResult:
        holder["agent"].take_response(WAIT)
        return AgentToolResult("unreachable")

    tool = AgentTool(
        "inner", "Inner", "waits on its own agent", {"type": "object"}, reentrant, timeout_s=WAIT * 2
    )
    with YiemAgent(llm_call=ScriptedLLM(call("inner", {}), reply("ok")), tools=[tool]) as agent:
        holder["agent"] = agent
        agent.prompt("go", WAIT)
        result = next(m for m in agent.messages if isinstance(m, ToolResultMessage))
        assert result.is_error and "RuntimeError" in result.content[0].text


def test_shutdown_with_wait_from_a_listener_raises_and_without_wait_works() -> None:
    outcomes: list[str] = []
    holder: dict[str, YiemAgent] = {}

    def listener(event: Any) -> None:
        if isinstance(event, TurnStartEvent) and not outcomes:
            try:
                holder["agent"].shutdown(wait=True)
            except RuntimeError as exc:
                outcomes.append(str(exc))
            holder["agent"].shutdown(wait=False)

    agent = YiemAgent(llm_call=ScriptedLLM(), agent_event_sink=listener)
    holder["agent"] = agent
    agent.run_agent("hi")
    assert text(agent.take_response(WAIT)) == "echo: hi"  # the active run still answers
    agent._worker.join(WAIT)
    assert not agent._worker.is_alive()
    assert len(outcomes) == 1 and "shutdown(wait=True)" in outcomes[0]


def test_a_tool_usage_given_as_a_dict_is_converted_and_a_bad_one_is_an_error_result() -> None:
    from yiemagent import LlmUsage

    good = AgentTool(
        "good",
        "Good",
        "usage as a dict",
        {"type": "object"},
        lambda *_: AgentToolResult("ok", usage={"input": 3}),
    )  # type: ignore[arg-type]
    bad = AgentTool(
        "bad",
        "Bad",
        "usage of a wrong type",
        {"type": "object"},
        lambda *_: AgentToolResult("ok", usage="lots"),
    )  # type: ignore[arg-type]
    batch = AssistantMessage([AgentToolCall("g", "good", {}), AgentToolCall("b", "bad", {})])
    with YiemAgent(llm_call=ScriptedLLM(batch, reply("done")), tools=[good, bad]) as agent:
        assert text(agent.prompt("go", WAIT)) == "done"
        results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["g", "b"]  # every call keeps its result
    assert results[0].usage == LlmUsage(input=3) and not results[0].is_error
    assert results[1].is_error and "usage of type str" in results[1].content[0].text


def test_a_prompt_that_times_out_is_marked_abandoned_in_the_same_step() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        with pytest.raises(TimeoutError):
            agent.output_channel.take_for(12345, 0)
        assert 12345 in agent._worker_core.hub.abandoned


def test_a_history_set_during_a_run_is_what_a_save_writes_then(tmp_path: Any) -> None:
    import threading

    from yiemagent.agent._session import load_session

    started, release = threading.Event(), threading.Event()
    from agent_helpers import gated_tool

    llm = ScriptedLLM(call("echo", {"text": "x"}), call("slow", {}, "c2"), reply("done"))
    with YiemAgent(
        llm_call=llm,
        tools=[echo_tool(), gated_tool(started, release)],
        messages=[UserMessage(f"old {i}") for i in range(40)],
    ) as agent:
        agent.run_agent("go")
        agent.messages = [UserMessage("trimmed")]  # applies before the run's next LLM call
        assert started.wait(WAIT)  # the second turn's tool runs: the new history is in use
        agent.save(tmp_path / "s.json")
        saved = load_session(tmp_path / "s.json").messages
        release.set()
        agent.take_response(WAIT)
    assert [m.role for m in saved] == ["user"]  # the new history as it was when it applied
    assert saved[0].content[0].text == "trimmed"


def test_close_tool_store_without_waiting_closes_only_once_the_run_is_over() -> None:
    import threading

    from agent_helpers import gated_tool

    from yiemagent import ToolStore, register_tool

    started, release = threading.Event(), threading.Event()
    store = ToolStore("owned")
    register_tool(store, gated_tool(started, release))
    closed = threading.Event()
    store.add_closer(closed.set)
    agent = YiemAgent(
        llm_call=ScriptedLLM(call("slow", {}), reply("done")), tool_store=store, close_tool_store=True
    )
    agent.run_agent("go")
    assert started.wait(WAIT)
    agent.shutdown(wait=False)
    assert not closed.is_set()  # the run still uses its tools
    release.set()
    assert text(agent.take_response(WAIT)) == "done"
    assert closed.wait(WAIT)

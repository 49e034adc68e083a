"""``run_loop`` driven directly, with no agent and no worker thread: every path of spec section 6."""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pytest
from agent_helpers import ScriptedLLM, call, echo_tool, reply, text

from yiemagent import (
    AbortSignal,
    AgentState,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    RunConfig,
    TextContent,
    ToolResultMessage,
    UserMessage,
    run_loop,
)
from yiemagent.core._events import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from yiemagent.core._loop import resume_problem, unanswered_tool_calls


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__.removesuffix("Event") for e in events]


def run(
    llm: Any,
    *first: str,
    tools: list[AgentTool] | None = None,
    history: list[Any] | None = None,
    signal: AbortSignal | None = None,
    **options: Any,
) -> tuple[AssistantMessage, AgentState, list[Any]]:
    state = AgentState("system", None, tools or [echo_tool()], list(history or []))
    events: list[Any] = []
    response = run_loop(
        [UserMessage(t) for t in first], state, RunConfig(llm_call=llm, **options), events.append, signal
    )
    return response, state, events


def terminating_tool() -> AgentTool:
    return AgentTool(
        "handoff",
        "Handoff",
        "Hands off",
        {"type": "object"},
        lambda *_: AgentToolResult([TextContent("handed off")], terminate=True),
    )


def test_an_answer_without_tool_calls_ends_the_run_and_is_history() -> None:
    response, state, events = run(ScriptedLLM(reply("hello")), "hi")
    assert text(response) == "hello" and response.stop_reason == "stop"
    assert [m.role for m in state.messages] == ["user", "assistant"]
    assert kinds(events) == [
        "AgentStart",
        "MessageStart",
        "MessageEnd",
        "TurnStart",
        "MessageStart",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    assert events[-1].messages == state.messages
    assert state.error_message is None


def test_a_tool_turn_runs_the_call_feeds_the_result_back_and_asks_again() -> None:
    llm = ScriptedLLM(call("echo", {"text": "x"}), reply("done"))
    response, state, events = run(llm, "go")
    assert text(response) == "done"
    assert [m.role for m in state.messages] == ["user", "assistant", "toolResult", "assistant"]
    tool_msgs = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_msgs[0]["tool_call_id"] == "call_1"
    assert [type(e) for e in events if isinstance(e, (ToolExecStartEvent, ToolExecEndEvent))] == [
        ToolExecStartEvent,
        ToolExecEndEvent,
    ]
    assert [e.turn for e in events if isinstance(e, TurnStartEvent)] == [1, 2]
    turn_end = next(e for e in events if isinstance(e, TurnEndEvent))
    assert turn_end.tool_results == [state.messages[2]]


def test_a_batch_whose_tools_all_terminate_ends_the_run_with_their_text() -> None:
    llm = ScriptedLLM(call("handoff", {}))
    response, state, _ = run(llm, "go", tools=[terminating_tool()])
    assert response.stop_reason == "tool_use_terminated"
    assert text(response) == "Tool execution completed.handed off"
    assert len(llm.requests) == 1
    assert isinstance(state.messages[-1], ToolResultMessage)  # made-up responses are not history


def test_max_turns_stops_after_running_the_last_turns_calls() -> None:
    llm = ScriptedLLM(default=lambda _req: call("echo", {"text": "again"}))
    response, state, _ = run(llm, "loop", max_turns=2)
    assert response.stop_reason == "max_turns" and "max_turns=2" in (response.error_message or "")
    assert len(llm.requests) == 2
    assert sum(isinstance(m, ToolResultMessage) for m in state.messages) == 2


def test_an_abort_before_the_run_makes_no_llm_call() -> None:
    llm = ScriptedLLM(reply("never"))
    response, state, events = run(llm, "hi", signal=AbortSignal(aborted=True))
    assert response.stop_reason == "aborted" and llm.requests == []
    assert [m.role for m in state.messages] == ["user"]
    assert isinstance(events[0], AgentStartEvent) and isinstance(events[-1], AgentEndEvent)


def test_an_abort_during_a_tool_gives_the_rest_aborted_results_and_ends_the_run() -> None:
    signal = AbortSignal()

    def aborting(_id: str, _args: Any, sig: Any, _p: Any) -> AgentToolResult:
        signal.abort("stop")
        return AgentToolResult([TextContent("first ran")])

    tool = AgentTool("first", "First", "aborts", {"type": "object"}, aborting)
    batch = AssistantMessage([AgentToolCall("a", "first", {}), AgentToolCall("b", "echo", {"text": "x"})])
    llm = ScriptedLLM(batch, reply("never"))
    response, state, _ = run(llm, "go", tools=[tool, echo_tool()], signal=signal)
    assert response.stop_reason == "aborted" and len(llm.requests) == 1
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["a", "b"]
    assert results[1].is_error and "aborted" in results[1].content[0].text


@pytest.mark.parametrize("step", ["prepare_context", "format_msg_for_llm", "llm_call"])
def test_each_failing_step_ends_the_run_with_an_error_response_naming_it(step: str) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"{step} is broken")

    options: dict[str, Any] = {step: broken} if step != "llm_call" else {}
    llm = broken if step == "llm_call" else ScriptedLLM(reply("never"))
    response, state, events = run(llm, "hi", **options)
    assert response.stop_reason == "error"
    assert response.error_message == f"{step} failed: RuntimeError: {step} is broken"
    assert state.error_message == response.error_message
    assert [m.role for m in state.messages] == ["user"]
    # every start has its end, and the turn closes with the error response
    assert kinds(events).count("TurnStart") == kinds(events).count("TurnEnd") == 1
    assert kinds(events).count("MessageStart") == kinds(events).count("MessageEnd")


def test_an_llm_call_returning_the_wrong_type_is_an_error_response() -> None:
    response, _, _ = run(lambda _req: {"content": "hi"}, "hi")
    assert response.stop_reason == "error" and "returned dict" in (response.error_message or "")


def test_take_input_is_asked_before_every_llm_call_and_its_messages_join() -> None:
    queued = [[], [UserMessage("late news")]]
    llm = ScriptedLLM(call("echo", {"text": "x"}), reply("ok"))
    state = AgentState("s", None, [echo_tool()], [])
    response = run_loop(
        [UserMessage("go")],
        state,
        RunConfig(llm_call=llm),
        None,
        None,
        lambda: queued.pop(0) if queued else [],
    )
    assert text(response) == "ok"
    assert [m.role for m in state.messages] == ["user", "assistant", "toolResult", "user", "assistant"]
    assert llm.requests[1]["messages"][-1]["content"][0]["text"] == "late news"


def test_skip_tools_on_steer_skips_the_calls_not_yet_started_when_input_waits() -> None:
    batch = AssistantMessage([AgentToolCall(f"c{i}", "echo", {"text": str(i)}) for i in range(3)])
    llm = ScriptedLLM(batch, reply("ok"))
    state = AgentState("s", None, [echo_tool()], [])
    asked: list[int] = []

    def has_input() -> bool:  # a message arrives while the second call runs
        asked.append(len(asked))
        return len(asked) >= 2

    response = run_loop(
        [UserMessage("go")],
        state,
        RunConfig(llm_call=llm, skip_tools_on_steer=True),
        None,
        None,
        lambda: [],
        has_input,
    )
    assert text(response) == "ok"
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False, False, True]
    assert "skipped: a new message" in results[2].content[0].text
    assert len(asked) == 2  # asked after each call that ran, never before the first


def test_declared_keywords_reach_llm_call_and_are_reread_when_it_is_replaced() -> None:
    seen: list[dict[str, Any]] = []

    def plain(request: Any) -> AssistantMessage:
        seen.append({})
        return reply("plain")

    def keen(request: Any, **kwargs: Any) -> AssistantMessage:
        seen.append(kwargs)
        return reply("keen")

    config = RunConfig(llm_call=plain, session_id="s-1", max_retry_delay_ms=5)
    assert config.llm_keywords == frozenset()
    state = AgentState()
    run_loop([UserMessage("a")], state, config)
    replaced = attrs.evolve(config, llm_call=keen)
    assert replaced.llm_keywords == {"on_update", "signal", "max_retry_delay_ms", "session_id"}
    signal = AbortSignal()
    run_loop([UserMessage("b")], state, replaced, None, signal)
    assert seen[0] == {}
    assert seen[1]["session_id"] == "s-1" and seen[1]["signal"] is signal
    assert seen[1]["max_retry_delay_ms"] == 5 and callable(seen[1]["on_update"])


def test_run_config_checks_its_settings_up_front() -> None:
    ok = ScriptedLLM()
    with pytest.raises(ValueError, match="tool_execution"):
        RunConfig(llm_call=ok, tool_execution="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_turns"):
        RunConfig(llm_call=ok, max_turns=0)
    with pytest.raises(TypeError, match="before_tool_call must be callable"):
        RunConfig(llm_call=ok, before_tool_call="nope")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session_id"):
        RunConfig(llm_call=ok, session_id=7)  # type: ignore[arg-type]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        RunConfig(llm_call=ok).max_turns = 3  # type: ignore[misc]


def test_resuming_runs_the_unanswered_calls_of_the_last_reply_first() -> None:
    history = [UserMessage("go"), call("echo", {"text": "left over"}, "old")]
    assert unanswered_tool_calls(history)[1][0].id == "old"
    llm = ScriptedLLM(reply("finished"))
    response, state, _ = run(llm, history=history)
    assert text(response) == "finished"
    assert [m.role for m in state.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert state.messages[2].tool_call_id == "old"
    assert llm.requests[0]["messages"][-1]["role"] == "tool"


def test_resume_problem_names_what_cannot_be_resumed() -> None:
    assert "history is empty" in (resume_problem([]) or "")
    assert "ends with the model's answer" in (resume_problem([UserMessage("q"), reply("a")]) or "")
    assert resume_problem([UserMessage("q")]) is None
    answered = [
        UserMessage("q"),
        call("echo", {"text": "x"}, "c"),
        ToolResultMessage("c", "echo", [TextContent("x")]),
    ]
    assert resume_problem(answered) is None


def test_sync_tools_is_called_before_each_llm_call_with_the_names_tools_added() -> None:
    adder = AgentTool(
        "adder",
        "Adder",
        "adds a tool",
        {"type": "object"},
        lambda *_: AgentToolResult([TextContent("added")], {"addedToolNames": ["fresh"]}),
    )
    calls: list[list[str]] = []
    llm = ScriptedLLM(call("adder", {}), reply("ok"))
    run(llm, "go", tools=[adder], sync_tools=lambda _state, added: calls.append(list(added)))
    assert calls == [[], ["fresh"]]


def test_the_loop_runs_on_the_callers_thread() -> None:
    threads: set[str] = set()

    def llm(_req: Any) -> AssistantMessage:
        threads.add(threading.current_thread().name)
        return reply("ok")

    run(llm, "hi")
    assert threads == {threading.current_thread().name}


def test_events_name_messages_in_order() -> None:
    _, state, events = run(ScriptedLLM(reply("x")), "hi")
    starts = [e.message for e in events if isinstance(e, MessageStartEvent)]
    ends = [e.message for e in events if isinstance(e, MessageEndEvent)]
    assert starts == [state.messages[0], None]  # the reply's start comes before it exists
    assert ends == state.messages


def test_a_tool_call_without_an_id_gets_one_id_once_and_keeps_it() -> None:
    no_id = AssistantMessage([{"type": "tool_call", "name": "echo", "arguments": '{"text": "x"}'}])
    llm = ScriptedLLM(no_id, reply("one"), reply("two"))
    state = AgentState("s", None, [echo_tool()], [])
    run_loop([UserMessage("go")], state, RunConfig(llm_call=llm))
    run_loop([UserMessage("again")], state, RunConfig(llm_call=llm))
    stored = state.messages[1]
    assert isinstance(stored, AssistantMessage) and isinstance(stored.content[0], AgentToolCall)
    call_id = stored.content[0].id
    assert call_id and state.messages[2].tool_call_id == call_id
    for request in llm.requests[1:]:  # every later request sends the same id on both sides
        wire = request["messages"]
        assert wire[2]["tool_calls"][0]["id"] == call_id and wire[3]["tool_call_id"] == call_id


def test_an_injected_clock_and_id_maker_stamp_what_the_loop_makes() -> None:
    ticks = iter(range(1000, 2000))
    ids = iter(f"gen_{n}" for n in range(1, 100))
    llm = ScriptedLLM(
        AssistantMessage(
            [
                {"type": "tool_call", "name": "echo", "arguments": {}},
                {"type": "tool_call", "name": "echo", "arguments": {}},
            ]
        ),
        AssistantMessage([AgentToolCall("c9", "echo", {})]),
    )
    response, state, _ = run(
        llm, "hi", max_turns=2, clock=lambda: next(ticks), new_tool_call_id=lambda: next(ids)
    )
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in results] == ["gen_1", "gen_2", "c9"]
    assert [m.timestamp for m in results] == [1000, 1001, 1002]
    assert response.stop_reason == "max_turns" and response.timestamp == 1003


def test_the_clock_and_id_maker_default_to_the_module_functions() -> None:
    from yiemagent.core._messages import now_ms
    from yiemagent.core._tool_calls import new_tool_call_id

    config = RunConfig(llm_call=ScriptedLLM())
    assert config.clock is now_ms and config.new_tool_call_id is new_tool_call_id
    with pytest.raises(TypeError, match="clock must be callable"):
        RunConfig(llm_call=ScriptedLLM(), clock=5)

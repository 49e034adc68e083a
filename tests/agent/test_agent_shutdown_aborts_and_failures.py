"""The runtime under pressure: full channels at shutdown, exotic exceptions, aborts at awkward
moments, saves during a run, and closed event pairs on every path."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from agent_helpers import WAIT, ScriptedLLM, call, echo_tool, last_user_text, reply, text

from yiemagent import (
    AgentEvent,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    MessageUpdateEvent,
    TextContent,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
)
from yiemagent.errors import AgentClosedError


def test_shutdown_does_not_wait_for_a_taker_when_the_output_channel_is_full() -> None:
    channel_full = threading.Event()
    llm = ScriptedLLM(default=lambda req: reply(f"echo: {last_user_text(req)}"))

    def counting(request: dict[str, Any]) -> AssistantMessage:
        if len(llm.requests) == 16:  # 16 responses fill the output channel before this call
            channel_full.set()
        return llm(request)

    agent = YiemAgent(llm_call=counting)
    for n in range(20):
        agent.follow_up(f"m{n}")
    assert channel_full.wait(WAIT)  # this run's response finds no room
    finished = threading.Event()
    returned: list[list[UserMessage]] = []

    def stop() -> None:
        returned.append(agent.shutdown(wait=True))
        finished.set()

    stopper = threading.Thread(target=stop, daemon=True)
    stopper.start()
    assert finished.wait(WAIT), "shutdown hung on a full output channel"
    stopper.join()
    answered = []
    while True:
        try:
            answered.append(text(agent.take_response(WAIT)))
        except AgentClosedError:
            break
    unprocessed = [m.content[0].text for m in returned[0]]  # type: ignore[union-attr]
    assert answered == [f"echo: m{n}" for n in range(len(answered))]  # in order, none lost
    assert unprocessed == [f"m{n}" for n in range(len(answered), 20)]
    assert not agent._worker.is_alive()


def test_the_worker_survives_base_exceptions_from_llm_call() -> None:
    def cancelled(_request: dict[str, Any]) -> AssistantMessage:
        raise asyncio.CancelledError()

    with YiemAgent(llm_call=ScriptedLLM(cancelled)) as agent:
        failed = agent.prompt("one", timeout=WAIT)
        assert failed.stop_reason == "error" and "CancelledError" in (failed.error_message or "")
        assert text(agent.prompt("two", timeout=WAIT)) == "echo: two"


def test_on_update_is_callable_even_without_a_sink() -> None:
    def streaming(request: dict[str, Any], *, on_update: Any) -> AssistantMessage:
        on_update(MessageUpdateEvent("text", "partial"))
        return reply("whole")

    with YiemAgent(llm_call=streaming) as agent:
        assert text(agent.prompt("hi", timeout=WAIT)) == "whole"


def test_queued_follow_ups_and_late_inputs_start_runs_in_arrival_order() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_final(request: dict[str, Any]) -> AssistantMessage:
        entered.set()
        assert release.wait(WAIT)
        return reply("first done")

    with YiemAgent(llm_call=ScriptedLLM(slow_final)) as agent:
        agent.run_agent("first")
        assert entered.wait(WAIT)  # the run's last LLM call is under way
        agent.follow_up("follow-up F1")
        agent.run_agent("late input M2")  # too late to join: starts a run after F1's
        release.set()
        answers = [text(agent.take_response(WAIT)) for _ in range(3)]
    assert answers == ["first done", "echo: follow-up F1", "echo: late input M2"]


def test_save_during_a_run_writes_the_history_before_that_run(tmp_path: Path) -> None:
    path = tmp_path / "mid-run.json"
    holder: dict[str, YiemAgent] = {}

    def saving(_id: str, _args: Any, _signal: Any, _p: Any) -> AgentToolResult:
        holder["agent"].save(path)
        return AgentToolResult([TextContent("saved")])

    tool = AgentTool("save", "Save", "Saves the session", {"type": "object"}, saving)
    llm = ScriptedLLM(reply("hello"), call("save", {}), reply("done"))
    with YiemAgent(llm_call=llm, tools=[tool]) as agent:
        holder["agent"] = agent
        agent.prompt("greet", timeout=WAIT)
        before_second_run = list(agent.messages)
        agent.prompt("now save", timeout=WAIT)
    with YiemAgent.load(path, llm_call=ScriptedLLM()) as loaded:
        assert loaded.messages == before_second_run  # no half-finished turn


def test_load_accepts_a_new_session_id(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with YiemAgent(llm_call=ScriptedLLM(), session_id="old") as agent:
        agent.prompt("x", timeout=WAIT)
        agent.save(path)
    with YiemAgent.load(path, llm_call=ScriptedLLM(), session_id="fork") as fork:
        assert fork.session_id == "fork" and len(fork.messages) == 2


def event_kinds(events: list[AgentEvent]) -> list[str]:
    return [e.event_type for e in events]


def assert_pairs_closed(kinds: list[str]) -> None:
    for opening, closing in [
        ("turn_start", "turn_end"),
        ("message_start", "message_end"),
        ("agent_start", "agent_end"),
    ]:
        depth = 0
        for kind in kinds:
            depth += (kind == opening) - (kind == closing)
            assert depth in (0, 1), kinds
        assert depth == 0, kinds


def test_events_are_paired_when_llm_call_fails() -> None:
    events: list[AgentEvent] = []

    def boom(_request: dict[str, Any]) -> AssistantMessage:
        raise RuntimeError("down")

    with YiemAgent(llm_call=ScriptedLLM(boom), agent_event_sink=events.append) as agent:
        response = agent.prompt("x", timeout=WAIT)
    kinds = event_kinds(events)
    assert kinds[-5:] == ["turn_start", "message_start", "message_end", "turn_end", "agent_end"]
    assert events[-2].message is response  # type: ignore[attr-defined]
    assert_pairs_closed(kinds)


def test_events_are_paired_when_prepare_context_fails() -> None:
    events: list[AgentEvent] = []

    def broken(_state: Any) -> Any:
        raise ValueError("no context")

    with YiemAgent(llm_call=ScriptedLLM(), prepare_context=broken, agent_event_sink=events.append) as agent:
        assert agent.prompt("x", timeout=WAIT).stop_reason == "error"
    kinds = event_kinds(events)
    assert kinds[-3:] == ["turn_start", "turn_end", "agent_end"]
    assert_pairs_closed(kinds)


def test_an_abort_while_the_model_answers_keeps_the_reply_and_answers_its_calls() -> None:
    events: list[AgentEvent] = []
    holder: dict[str, YiemAgent] = {}

    def answer_then_abort(_request: dict[str, Any]) -> AssistantMessage:
        holder["agent"].abort()  # the abort lands while the model is answering
        return call("echo", {"text": "a"})

    llm = ScriptedLLM(answer_then_abort)
    with YiemAgent(llm_call=llm, tools=[echo_tool()], agent_event_sink=events.append) as agent:
        holder["agent"] = agent
        response = agent.prompt("go", timeout=WAIT)
        history = list(agent.messages)
    assert response.stop_reason == "aborted"
    assert [type(m).__name__ for m in history] == ["UserMessage", "AssistantMessage", "ToolResultMessage"]
    result = history[2]
    assert isinstance(result, ToolResultMessage) and result.is_error
    assert "aborted" in text(result)  # type: ignore[arg-type]
    assert len(llm.requests) == 1
    assert_pairs_closed(event_kinds(events))


def test_queued_prompts_for_many_agents_are_answered_in_order() -> None:
    agents = [YiemAgent(llm_call=ScriptedLLM()) for _ in range(20)]
    try:
        for n in range(10):
            for i, agent in enumerate(agents):
                agent.follow_up(f"agent {i} question {n}")
        for i, agent in enumerate(agents):
            got = [text(agent.take_response(WAIT)) for _ in range(10)]
            assert got == [f"echo: agent {i} question {n}" for n in range(10)]
    finally:
        for agent in agents:
            agent.shutdown()


def test_each_run_sees_only_its_own_question_last() -> None:
    llm = ScriptedLLM(default=lambda req: reply(f"last was {last_user_text(req)}"))
    with YiemAgent(llm_call=llm) as agent:
        for n in range(5):
            agent.follow_up(f"q{n}")
        assert [text(agent.take_response(WAIT)) for _ in range(5)] == [f"last was q{n}" for n in range(5)]

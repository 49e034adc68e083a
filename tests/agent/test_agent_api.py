"""The agent API that users of the design expect: channels that are real queues, resume,
listeners, settings during a run, steering and follow-up modes, and prompts that get their own
response."""

from __future__ import annotations

import gc
import logging
import queue
import threading
import weakref
from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, call, echo_tool, gated_tool, last_user_text, reply, text

from yiemagent import (
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
    resume,
)
from yiemagent.core._events import AgentStartEvent, TurnStartEvent
from yiemagent.errors import AgentClosedError, ResponseTimeout


class Gate:
    """An ``llm_call`` that blocks on each of its first ``held`` calls until released, and tells
    when a call has entered; then answers from ``answer(request)``."""

    def __init__(self, answer: Any = None, held: int = 1) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.held = held
        self.requests: list[dict[str, Any]] = []
        self.answer = answer or (lambda req: reply(f"echo: {last_user_text(req)}"))

    def __call__(self, request: dict[str, Any]) -> AssistantMessage:
        self.requests.append(request)
        if len(self.requests) <= self.held:
            self.entered.release()
            assert self.release.wait(WAIT), "the test never released the model"
        return self.answer(request)

    def wait_entered(self) -> None:
        assert self.entered.acquire(timeout=WAIT), "the model was never called"


def system_text(request: dict[str, Any]) -> str:
    return request["messages"][0]["content"][0]["text"]


# -- channels are real queues ------------------------------------------------------------------


def test_putting_a_spec_style_dict_on_the_input_channel_starts_a_run() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        assert isinstance(agent.input_channel, queue.Queue)
        agent.input_channel.put({"role": "user", "content": "hi"})
        response = agent.output_channel.get(timeout=WAIT)
        assert text(response) == "echo: hi"
        assert [type(m) for m in agent.messages] == [UserMessage, AssistantMessage]


def test_a_bad_message_is_refused_at_the_put_and_nothing_is_queued() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        with pytest.raises(ValueError, match="only user messages"):
            agent.input_channel.put({"role": "assistant", "content": "x"})
        with pytest.raises(TypeError, match="a message must be"):
            agent.follow_up_channel.put(42)
        assert agent.input_channel.qsize() == 0 and agent.follow_up_channel.empty()
        agent.input_channel.put("ok")
        assert text(agent.take_response(WAIT)) == "echo: ok"
        assert len(agent.messages) == 2


def test_full_channels_block_and_refuse_like_queues() -> None:
    gate = Gate()
    with YiemAgent(llm_call=gate) as agent:
        agent.run_agent("first")
        gate.wait_entered()  # the worker is busy: later messages stay queued
        for i in range(32):
            agent.follow_up_channel.put_nowait(f"f{i}")
        assert agent.follow_up_channel.full() and agent.follow_up_channel.qsize() == 32
        with pytest.raises(queue.Full):
            agent.follow_up_channel.put_nowait("one too many")
        with pytest.raises(queue.Full):
            agent.follow_up_channel.put("still too many", timeout=0.01)
        blocked_done = threading.Event()

        def blocked_put() -> None:
            agent.follow_up_channel.put("waited for room")
            blocked_done.set()

        sender = threading.Thread(target=blocked_put)
        sender.start()
        gate.release.set()  # the worker takes follow-ups, which makes room
        assert blocked_done.wait(WAIT)
        sender.join(WAIT)
        answers = [text(agent.output_channel.get(timeout=WAIT)) for _ in range(34)]
        assert answers[0] == "echo: first" and answers[-1] == "echo: waited for room"
        assert answers[1:33] == [f"echo: f{i}" for i in range(32)]


def test_output_channel_get_times_out_as_queue_empty_and_timeout_error() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        with pytest.raises(queue.Empty):
            agent.output_channel.get(timeout=0.01)
        with pytest.raises(TimeoutError):
            agent.output_channel.get_nowait()
        with pytest.raises(ResponseTimeout):
            agent.take_response(0.01)
        with pytest.raises(TypeError, match="written by the agent only"):
            agent.output_channel.put(reply("forged"))
    with pytest.raises(AgentClosedError):
        agent.output_channel.get(timeout=WAIT)
    with pytest.raises(AgentClosedError):
        agent.input_channel.put("after shutdown")


def test_qsize_and_empty_tell_the_truth_while_messages_wait() -> None:
    gate = Gate()
    with YiemAgent(llm_call=gate) as agent:
        agent.run_agent("first")
        gate.wait_entered()
        agent.follow_up("second")
        agent.follow_up("third")
        assert agent.follow_up_channel.qsize() == 2 and not agent.follow_up_channel.empty()
        assert agent.output_channel.empty()
        gate.release.set()
        assert [text(agent.take_response(WAIT)) for _ in range(3)] == [
            "echo: first",
            "echo: second",
            "echo: third",
        ]
        agent.follow_up_channel.join()  # every queued message was taken by the worker
        assert agent.follow_up_channel.qsize() == 0 and agent.output_channel.qsize() == 0


def test_many_threads_put_and_get_through_the_queues_and_every_message_is_answered_once() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        senders = [
            threading.Thread(target=lambda n=n: [agent.follow_up_channel.put(f"m{n}-{i}") for i in range(10)])
            for n in range(6)
        ]
        got: list[str] = []
        lock = threading.Lock()

        def taker() -> None:
            for _ in range(20):
                answer = text(agent.output_channel.get(timeout=WAIT))
                with lock:
                    got.append(answer)

        takers = [threading.Thread(target=taker) for _ in range(3)]
        for t in senders + takers:
            t.start()
        for t in senders + takers:
            t.join(WAIT)
        assert sorted(got) == sorted(f"echo: m{n}-{i}" for n in range(6) for i in range(10))


# -- resume ------------------------------------------------------------------------------------


def handoff_tool() -> AgentTool:
    return AgentTool(
        "handoff",
        "Handoff",
        "Hands off to a human",
        {"type": "object"},
        lambda *_: AgentToolResult([TextContent("waiting for approval")], terminate=True),
    )


def test_resume_after_a_terminate_finishes_the_handoff() -> None:
    llm = ScriptedLLM(call("handoff", {}), reply("approved, done"))
    with YiemAgent(llm_call=llm, tools=[handoff_tool()]) as agent:
        assert agent.prompt("needs approval", WAIT).stop_reason == "tool_use_terminated"
        resume(agent)
        response = agent.take_response(WAIT)
        assert text(response) == "approved, done"
        assert llm.requests[1]["messages"][-1]["role"] == "tool"
        assert [m.role for m in agent.messages] == ["user", "assistant", "toolResult", "assistant"]


def test_resume_after_an_error_retries_the_same_question() -> None:
    attempts: list[str] = []

    def flaky(request: dict[str, Any]) -> AssistantMessage:
        attempts.append(last_user_text(request))
        if len(attempts) == 1:
            raise ConnectionError("model down")
        return reply("answered")

    with YiemAgent(llm_call=flaky) as agent:
        assert agent.prompt("question", WAIT).stop_reason == "error"
        agent.resume()
        assert text(agent.take_response(WAIT)) == "answered"
        assert attempts == ["question", "question"]
        assert [m.role for m in agent.messages] == ["user", "assistant"]


def test_resuming_an_empty_or_finished_history_is_an_error_at_the_call() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        with pytest.raises(ValueError, match="history is empty"):
            agent.resume()
        agent.prompt("hi", WAIT)
        with pytest.raises(ValueError, match="ends with the model's answer"):
            agent.resume()
        assert agent.output_channel.qsize() == 0


def test_a_resume_queued_behind_a_run_is_checked_when_its_turn_comes() -> None:
    gate = Gate()
    with YiemAgent(llm_call=gate) as agent:
        agent.run_agent("first")
        gate.wait_entered()
        agent.resume()  # queued: by then the history will end with the answer
        gate.release.set()
        assert text(agent.take_response(WAIT)) == "echo: first"
        late = agent.take_response(WAIT)
        assert late.stop_reason == "error" and "ends with the model's answer" in (late.error_message or "")
        assert len(gate.requests) == 1


def test_a_resume_queued_behind_a_failing_run_retries_it() -> None:
    def fails_first(request: dict[str, Any]) -> AssistantMessage:
        if len(gate.requests) == 1:
            raise RuntimeError("boom")
        return reply("second try")

    gate = Gate(answer=fails_first)
    with YiemAgent(llm_call=gate) as agent:
        agent.run_agent("q")
        gate.wait_entered()
        agent.resume()
        gate.release.set()
        assert agent.take_response(WAIT).stop_reason == "error"
        assert text(agent.take_response(WAIT)) == "second try"


# -- listeners ---------------------------------------------------------------------------------


def test_listeners_are_called_in_order_and_a_raising_one_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def broken(event: Any) -> None:
        calls.append("broken")
        raise RuntimeError("listener bug")

    with YiemAgent(llm_call=ScriptedLLM(), agent_event_sink=lambda e: calls.append("sink")) as agent:
        agent.subscribe(broken)
        agent.subscribe(lambda e: calls.append("last"))
        with caplog.at_level(logging.ERROR, logger="yiemagent"):
            agent.prompt("hi", WAIT)
    assert calls[:3] == ["sink", "broken", "last"]
    assert calls.count("sink") == calls.count("last") == calls.count("broken") == 8
    assert "listener bug" in caplog.text


def test_unsubscribing_during_a_run_stops_events_from_the_next_one() -> None:
    gate = Gate()
    seen: list[str] = []
    with YiemAgent(llm_call=gate) as agent:
        unsubscribe = agent.subscribe(lambda e: seen.append(type(e).__name__))
        agent.run_agent("hi")
        gate.wait_entered()
        unsubscribe()
        unsubscribe()  # harmless twice
        count = len(seen)
        gate.release.set()
        agent.take_response(WAIT)
        assert seen[:count] == seen and "AgentEndEvent" not in seen
        assert seen[0] == "AgentStartEvent" and count >= 5


def test_listeners_are_never_entered_by_two_threads_at_once() -> None:
    inside = threading.Lock()
    overlaps: list[str] = []

    def listener(_event: Any) -> None:
        if not inside.acquire(blocking=False):
            overlaps.append("overlap")
            return
        inside.release()

    batch = AssistantMessage([AgentToolCall(f"c{i}", "echo", {"text": str(i)}) for i in range(8)])
    with YiemAgent(
        llm_call=ScriptedLLM(batch, reply("ok")), tools=[echo_tool(parallel=True)], tool_execution="parallel"
    ) as agent:
        agent.subscribe(listener)
        agent.subscribe(listener)
        agent.prompt("go", WAIT)
    assert overlaps == []


# -- settings between and during runs ----------------------------------------------------------


def test_a_system_prompt_set_during_a_run_applies_at_the_next_llm_call() -> None:
    gate = Gate(answer=lambda req: call("echo", {"text": "x"}) if len(gate.requests) == 1 else reply("ok"))
    with YiemAgent(llm_call=gate, tools=[echo_tool()], system_prompt="old") as agent:
        agent.run_agent("go")
        gate.wait_entered()
        agent.system_prompt = "new"
        agent.model = "m-2"
        assert agent.system_prompt == "old"  # the run's current call keeps what it had
        gate.release.set()
        agent.take_response(WAIT)
        assert [system_text(r) for r in gate.requests] == ["old", "new"]
        assert agent.system_prompt == "new" and agent.model is not None and agent.model.name == "m-2"


def test_tools_set_during_a_run_are_offered_from_the_next_llm_call() -> None:
    gate = Gate(answer=lambda req: call("echo", {"text": "x"}) if len(gate.requests) == 1 else reply("ok"))
    with YiemAgent(llm_call=gate, tools=[echo_tool()]) as agent:
        agent.run_agent("go")
        gate.wait_entered()
        agent.tools = [echo_tool("other")]
        gate.release.set()
        agent.take_response(WAIT)
        offered = [[t["function"]["name"] for t in r.get("tools", [])] for r in gate.requests]
        assert offered == [["echo"], ["other"]]
        assert list(agent.tools) == ["other"]
        with pytest.raises(TypeError, match="AgentTool"):
            agent.tools = ["not a tool"]  # type: ignore[list-item]


def test_messages_is_a_copy_and_setting_it_replaces_the_history_checked() -> None:
    llm = ScriptedLLM()
    with YiemAgent(llm_call=llm) as agent:
        agent.prompt("one", WAIT)
        copy = agent.messages
        copy.clear()
        assert len(agent.messages) == 2
        agent.messages = [UserMessage("earlier"), reply("noted").to_dict()]
        agent.prompt("two", WAIT)
        texts = [
            m["content"][0]["text"] if isinstance(m["content"], list) else m["content"]
            for m in llm.requests[-1]["messages"][1:]
        ]
        assert texts == ["earlier", "noted", "two"]
        with pytest.raises(TypeError, match="AgentMessage"):
            agent.messages = [42]  # type: ignore[list-item]
        assert len(agent.messages) == 4


def test_replacing_llm_call_rereads_what_it_accepts() -> None:
    signals: list[Any] = []

    def with_signal(request: dict[str, Any], signal: Any = None) -> AssistantMessage:
        signals.append(signal)
        return reply("ok")

    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        agent.prompt("a", WAIT)
        agent.llm_call = with_signal
        agent.prompt("b", WAIT)
        assert len(signals) == 1 and signals[0] is not None
        with pytest.raises(ValueError, match="max_turns"):
            agent.max_turns = 0
        assert agent.max_turns == 50


def test_session_id_reaches_an_llm_call_that_declares_it() -> None:
    seen: list[str] = []

    def llm(request: dict[str, Any], *, session_id: str) -> AssistantMessage:
        seen.append(session_id)
        return reply("ok")

    with YiemAgent(llm_call=llm, session_id="conv-42") as agent:
        agent.prompt("a", WAIT)
        agent.session_id = "conv-43"
        agent.prompt("b", WAIT)
    assert seen == ["conv-42", "conv-43"]


def test_reset_clears_history_queues_and_error_but_not_during_a_run() -> None:
    gate = Gate(held=1)
    with YiemAgent(llm_call=gate) as agent:
        agent.run_agent("first")
        gate.wait_entered()
        agent.follow_up("queued")
        with pytest.raises(RuntimeError, match="abort"):
            agent.reset()
        assert [text(m) for m in agent.clear_queues()] == ["queued"]
        gate.release.set()
        agent.take_response(WAIT)
        assert agent.wait_for_idle(WAIT) and not agent.is_running
        agent._state.error_message = "old error"
        assert agent.reset() == []
        assert agent.messages == [] and agent._state.error_message is None


def test_is_running_and_wait_for_idle() -> None:
    gate = Gate()
    with YiemAgent(llm_call=gate) as agent:
        assert not agent.is_running and agent.wait_for_idle(0)
        agent.run_agent("hi")
        gate.wait_entered()
        assert agent.is_running and not agent.wait_for_idle(0.01)
        gate.release.set()
        assert agent.wait_for_idle(WAIT) and not agent.is_running


# -- how queued messages join ------------------------------------------------------------------


def test_steering_one_at_a_time_gives_each_mid_run_message_its_own_llm_call() -> None:
    def answer(req: dict[str, Any]) -> AssistantMessage:
        turn = len(gate.requests)
        return call("echo", {"text": "x"}, f"c{turn}") if turn < 3 else reply("ok")

    gate = Gate(answer=answer)
    with YiemAgent(llm_call=gate, tools=[echo_tool()], steering_mode="one-at-a-time") as agent:
        agent.run_agent("go")
        gate.wait_entered()
        agent.run_agent("a")
        agent.run_agent("b")
        gate.release.set()
        assert text(agent.take_response(WAIT)) == "ok"
        assert [last_user_text(r) for r in gate.requests] == ["go", "a", "b"]
        assert agent.output_channel.qsize() == 0  # one run, one response


def test_steering_all_joins_every_mid_run_message_before_the_next_call() -> None:
    def answer(req: dict[str, Any]) -> AssistantMessage:
        return call("echo", {"text": "x"}) if len(gate.requests) == 1 else reply("ok")

    gate = Gate(answer=answer)
    with YiemAgent(llm_call=gate, tools=[echo_tool()]) as agent:
        agent.run_agent("go")
        gate.wait_entered()
        agent.run_agent("a")
        agent.run_agent("b")
        gate.release.set()
        agent.take_response(WAIT)
        assert len(gate.requests) == 2
        users = [m for m in gate.requests[1]["messages"] if m["role"] == "user"]
        assert [u["content"][0]["text"] for u in users] == ["go", "a", "b"]


def test_follow_up_mode_all_gives_the_queued_follow_ups_one_run() -> None:
    gate = Gate()
    with YiemAgent(llm_call=gate, follow_up_mode="all") as agent:
        agent.run_agent("first")
        gate.wait_entered()
        agent.follow_up("f1")
        agent.follow_up("f2")
        gate.release.set()
        assert text(agent.take_response(WAIT)) == "echo: first"
        assert text(agent.take_response(WAIT)) == "echo: f2"
        assert len(gate.requests) == 2
        assert [m.role for m in agent.messages] == ["user", "assistant", "user", "user", "assistant"]
        assert agent.wait_for_idle(WAIT) and agent.output_channel.qsize() == 0


def test_follow_up_mode_one_at_a_time_gives_each_follow_up_its_run() -> None:
    gate = Gate()
    with YiemAgent(llm_call=gate) as agent:
        agent.run_agent("first")
        gate.wait_entered()
        agent.follow_up("f1")
        agent.follow_up("f2")
        gate.release.set()
        assert [text(agent.take_response(WAIT)) for _ in range(3)] == ["echo: first", "echo: f1", "echo: f2"]


def test_skip_tools_on_steer_gives_a_new_message_the_floor() -> None:
    started, release = threading.Event(), threading.Event()
    batch = AssistantMessage([AgentToolCall("s", "slow", {}), AgentToolCall("e", "echo", {"text": "x"})])
    llm = ScriptedLLM(batch, reply("ok"))
    with YiemAgent(
        llm_call=llm, tools=[gated_tool(started, release), echo_tool()], skip_tools_on_steer=True
    ) as agent:
        agent.run_agent("go")
        assert started.wait(WAIT)
        agent.run_agent("stop, do something else")
        release.set()
        assert text(agent.take_response(WAIT)) == "ok"
        results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
        assert [r.is_error for r in results] == [False, True]
        assert "skipped" in results[1].content[0].text
        assert last_user_text(llm.requests[1]) == "stop, do something else"


# -- callers are never blocked or misled --------------------------------------------------------


def test_a_prompt_gets_its_own_answer_after_an_earlier_prompt_timed_out() -> None:
    gate = Gate()
    with YiemAgent(llm_call=gate) as agent:
        with pytest.raises(TimeoutError):
            agent.prompt("slow", timeout=0.05)
        gate.release.set()
        assert text(agent.prompt("A", WAIT)) == "echo: A"
        assert text(agent.prompt("B", WAIT)) == "echo: B"
        assert agent.output_channel.qsize() == 0  # the late answer went to the history only
        assert [text(m) for m in agent.messages if isinstance(m, AssistantMessage)] == [
            "echo: slow",
            "echo: A",
            "echo: B",
        ]


def test_blocking_calls_from_the_agents_own_thread_raise_instead_of_deadlocking() -> None:
    problems: list[str] = []
    holder: dict[str, YiemAgent] = {}

    def listener(event: Any) -> None:
        if isinstance(event, TurnStartEvent) and not problems:
            for attempt in (
                lambda: holder["agent"].take_response(1),
                lambda: holder["agent"].prompt("inner", 1),
                lambda: holder["agent"].wait_for_idle(1),
            ):
                try:
                    attempt()
                except RuntimeError as exc:
                    problems.append(str(exc))

    with YiemAgent(llm_call=ScriptedLLM(), agent_event_sink=listener) as agent:
        holder["agent"] = agent
        assert text(agent.prompt("outer", WAIT)) == "echo: outer"
        assert len(problems) == 3 and all("own worker" in p for p in problems)
        assert agent.wait_for_idle(WAIT) and len(agent.messages) == 2  # nothing was queued


def test_an_agent_dropped_without_shutdown_ends_its_thread() -> None:
    agent = YiemAgent(llm_call=ScriptedLLM())
    agent.prompt("hi", WAIT)
    worker = agent._worker
    ref = weakref.ref(agent)
    del agent
    gc.collect()
    assert ref() is None
    worker.join(WAIT)
    assert not worker.is_alive()


def test_shutdown_with_a_timeout_returns_while_a_tool_ignores_its_signal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started, release = threading.Event(), threading.Event()

    def stubborn(*_args: Any) -> AgentToolResult:
        started.set()
        release.wait(WAIT)
        return AgentToolResult("done at last")

    tool = AgentTool("stubborn", "Stubborn", "ignores aborts", {"type": "object"}, stubborn)
    agent = YiemAgent(llm_call=ScriptedLLM(call("stubborn", {}), reply("ok")), tools=[tool])
    agent.run_agent("go")
    assert started.wait(WAIT)
    with caplog.at_level(logging.WARNING, logger="yiemagent"):
        agent.shutdown(wait=True, abort=True, timeout=0.05)
    assert agent._worker.is_alive() and "tool calls ['call_1']" in caplog.text
    release.set()
    agent._worker.join(WAIT)
    assert agent.take_response(WAIT).stop_reason == "aborted"


def test_abort_never_raises_and_runs_every_callback(caplog: pytest.LogCaptureFixture) -> None:
    from yiemagent import AbortSignal

    signal = AbortSignal()
    ran: list[str] = []

    def exits() -> None:
        ran.append("exits")
        raise SystemExit(3)

    signal.on_abort(exits)
    signal.on_abort(lambda: ran.append("second"))
    with caplog.at_level(logging.ERROR, logger="yiemagent"):
        signal.abort()
    assert ran == ["exits", "second"] and "on_abort callback raised" in caplog.text


def test_agent_events_start_each_run() -> None:
    events: list[Any] = []
    with YiemAgent(llm_call=ScriptedLLM(), agent_event_sink=events.append) as agent:
        agent.prompt("a", WAIT)
        agent.prompt("b", WAIT)
    assert sum(isinstance(e, AgentStartEvent) for e in events) == 2


def test_a_prompt_whose_message_is_cleared_from_the_queue_is_told_so() -> None:
    gate = Gate()
    with YiemAgent(llm_call=gate) as agent:
        agent.run_agent("first")
        gate.wait_entered()
        errors: list[BaseException] = []
        waiting = threading.Event()

        def prompt() -> None:
            waiting.set()
            try:
                agent.prompt("queued behind", WAIT)
            except BaseException as exc:
                errors.append(exc)

        asker = threading.Thread(target=prompt)
        asker.start()
        assert waiting.wait(WAIT)
        with agent._cond:  # every put notifies this condition: wait until the message is queued
            assert agent._cond.wait_for(lambda: len(agent.input_channel.queue) == 1, WAIT)
        assert [text(m) for m in agent.clear_queues()] == ["queued behind"]
        asker.join(WAIT)
        assert len(errors) == 1 and "dropped from the queue" in str(errors[0])
        gate.release.set()
        assert text(agent.take_response(WAIT)) == "echo: first"

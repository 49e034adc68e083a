"""Channel semantics (docs/design.md, decision 8), abort, shutdown (point 9) and concurrency."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, call, echo_tool, gated_tool, last_user_text, reply, text

from yiemagent import (
    AgentToolCall,
    AssistantMessage,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
    follow_up,
    run_agent,
    take_response,
)
from yiemagent.errors import AgentClosedError


def agent_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("yiemagent")]


def blocking_first_reply(entered: threading.Event, release: threading.Event) -> Any:
    def answer(request: dict[str, Any]) -> AssistantMessage:
        entered.set()
        assert release.wait(WAIT)
        return reply(f"echo: {last_user_text(request)}")

    return answer


def test_follow_up_during_run_starts_its_own_run_after_the_response() -> None:
    entered, release = threading.Event(), threading.Event()
    llm = ScriptedLLM(blocking_first_reply(entered, release))
    with YiemAgent(llm_call=llm) as agent:
        run_agent(agent, "first")
        assert entered.wait(WAIT)
        follow_up(agent, "second")
        release.set()
        assert text(take_response(agent, WAIT)) == "echo: first"
        assert text(take_response(agent, WAIT)) == "echo: second"
        second_request = llm.requests[1]["messages"]
        assert [m["role"] for m in second_request] == ["system", "user", "assistant", "user"]
        assert second_request[2]["content"] == "echo: first"  # the second run saw the first


def test_run_agent_during_run_joins_before_next_llm_call() -> None:
    started, release = threading.Event(), threading.Event()
    llm = ScriptedLLM(call("slow", {}), default=lambda req: reply(f"saw: {last_user_text(req)}"))
    with YiemAgent(llm_call=llm, tools=[gated_tool(started, release)]) as agent:
        agent.run_agent("start the slow job")
        assert started.wait(WAIT)
        agent.run_agent("and also this")
        release.set()
        response = agent.take_response(WAIT)
        assert text(response) == "saw: and also this"
        assert len(llm.requests) == 2
        roles = [m["role"] for m in llm.requests[1]["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "user"]
        # exactly one response for the joined run: the next response answers the next prompt
        assert text(agent.prompt("after", timeout=WAIT)) == "saw: after"


def test_follow_up_while_idle_is_run_agent() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        agent.follow_up("hello")
        assert text(agent.take_response(WAIT)) == "echo: hello"


def test_abort_during_slow_tool_ends_run_and_agent_goes_on() -> None:
    started, release = threading.Event(), threading.Event()
    batch = AssistantMessage(
        content=[AgentToolCall("c1", "slow", {}), AgentToolCall("c2", "echo", {"text": "x"})]
    )
    llm = ScriptedLLM(batch)
    with YiemAgent(llm_call=llm, tools=[gated_tool(started, release), echo_tool()]) as agent:
        agent.run_agent("work")
        assert started.wait(WAIT)
        agent.abort()
        response = agent.take_response(WAIT)
        assert response.stop_reason == "aborted"
        results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
        assert [r.tool_call_id for r in results] == ["c1", "c2"]  # every call has its result
        assert text(results[0]) == "stopped: aborted"  # type: ignore[arg-type]
        assert results[1].is_error and "aborted" in text(results[1])  # type: ignore[arg-type]
        assert len(llm.requests) == 1
        assert text(agent.prompt("next", timeout=WAIT)) == "echo: next"


def test_abort_while_idle_does_nothing() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        agent.abort()
        assert text(agent.prompt("fine", timeout=WAIT)) == "echo: fine"


def test_shutdown_returns_queued_messages_and_delivers_active_response() -> None:
    entered, release = threading.Event(), threading.Event()
    agent = YiemAgent(llm_call=ScriptedLLM(blocking_first_reply(entered, release)))
    agent.run_agent("active")
    assert entered.wait(WAIT)
    agent.follow_up("queued 1")
    agent.run_agent("queued 2")
    agent.follow_up({"role": "user", "content": "queued 3"})
    queued = agent.shutdown(wait=False)
    assert [m.content[0].text for m in queued] == ["queued 1", "queued 2", "queued 3"]  # type: ignore[union-attr]
    assert all(isinstance(m, UserMessage) for m in queued)
    with pytest.raises(AgentClosedError):
        agent.run_agent("too late")
    with pytest.raises(AgentClosedError):
        agent.follow_up("too late")
    release.set()
    assert text(agent.take_response(WAIT)) == "echo: active"  # the active run still answers
    assert agent.shutdown() == []  # twice is harmless
    with pytest.raises(AgentClosedError):
        agent.take_response(WAIT)
    assert not agent._worker.is_alive()


def test_shutdown_with_abort_aborts_the_active_run() -> None:
    started, release = threading.Event(), threading.Event()
    agent = YiemAgent(llm_call=ScriptedLLM(call("slow", {})), tools=[gated_tool(started, release)])
    agent.run_agent("work")
    assert started.wait(WAIT)
    assert agent.shutdown(wait=True, abort=True) == []
    assert agent.take_response(WAIT).stop_reason == "aborted"


def test_blocked_taker_is_woken_by_shutdown() -> None:
    agent = YiemAgent(llm_call=ScriptedLLM())
    errors: list[BaseException] = []
    waiting = threading.Event()
    real_wait = agent._cond.wait

    def observed_wait(timeout: float | None = None) -> bool:
        if threading.current_thread().name == "taker":
            waiting.set()  # still holding the lock: shutdown can only notify once we wait
        return real_wait(timeout)

    agent._cond.wait = observed_wait  # type: ignore[method-assign]

    def take() -> None:
        try:
            agent.take_response(WAIT)
        except BaseException as exc:
            errors.append(exc)

    taker = threading.Thread(target=take, name="taker")
    taker.start()
    assert waiting.wait(WAIT)  # the taker is blocked inside take_response
    agent.shutdown()
    taker.join(WAIT)
    assert not taker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], AgentClosedError)


def test_no_threads_left_after_shutdown() -> None:
    before = set(agent_threads())
    batch = AssistantMessage(content=[AgentToolCall(f"c{i}", "echo", {"text": str(i)}) for i in range(4)])
    agents = [
        YiemAgent(
            llm_call=ScriptedLLM(batch, reply("ok")),
            tools=[echo_tool(parallel=True)],
            tool_execution="parallel",
        )
        for _ in range(5)
    ]
    for agent in agents:
        assert text(agent.prompt("go", timeout=WAIT)) == "ok"
    for agent in agents:
        agent.shutdown()
    assert set(agent_threads()) <= before


def test_take_response_times_out() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent, pytest.raises(TimeoutError):
        agent.take_response(timeout=0.01)


def test_fifty_agents_twenty_messages_each_all_matched() -> None:
    agents = [YiemAgent(llm_call=ScriptedLLM()) for _ in range(50)]

    def converse(index: int) -> list[tuple[str, str]]:
        agent = agents[index]
        pairs = []
        for n in range(20):
            question = f"agent {index} message {n}"
            pairs.append((question, text(agent.prompt(question, timeout=WAIT))))
        return pairs

    try:
        with ThreadPoolExecutor(50) as pool:
            results = list(pool.map(converse, range(50)))
    finally:
        for agent in agents:
            agent.shutdown()
    assert sum(len(r) for r in results) == 1000
    for pairs in results:
        for question, answer in pairs:
            assert answer == f"echo: {question}"
    for agent in agents:
        assert len(agent.messages) == 40


def test_many_threads_on_one_agent_every_follow_up_answered_once() -> None:
    with YiemAgent(llm_call=ScriptedLLM()) as agent:

        def send(worker: int) -> None:
            for n in range(10):
                agent.follow_up(f"w{worker}-{n}")

        def take(_worker: int) -> list[str]:
            return [text(agent.take_response(WAIT)) for _ in range(10)]

        with ThreadPoolExecutor(8) as senders, ThreadPoolExecutor(8) as takers:
            sent = [senders.submit(send, w) for w in range(8)]
            taken = [takers.submit(take, w) for w in range(8)]
            for s in sent:
                s.result()
            texts = sorted(t for batch in taken for t in batch.result())
    assert texts == sorted(f"echo: w{w}-{n}" for w in range(8) for n in range(10))

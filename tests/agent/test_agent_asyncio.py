"""``YiemAgent.aprompt`` from asyncio: the loop keeps running while the agent works, and
cancelling the awaiting task withdraws the message (a queued one never runs; a running one's run
is aborted). Every test runs inside a real event loop (``asyncio.run``); the model blocks on
threading events that the test sets, so nothing depends on timing."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from yiemagent import AbortSignal, AgentTool, AgentToolResult, AssistantMessage, TextContent, YiemAgent
from yiemagent.testing._scripted import ScriptedModel

WAIT_S = 30.0


def answer(text: str) -> AssistantMessage:
    return AssistantMessage([TextContent(text)])


async def wait_for(event: threading.Event) -> None:
    """Wait for a threading event without blocking the loop."""
    assert await asyncio.to_thread(event.wait, WAIT_S), "the event was never set"


def test_the_loop_runs_while_the_agent_answers() -> None:
    asked, released = threading.Event(), threading.Event()

    def llm_call(request: Any) -> AssistantMessage:
        asked.set()
        assert released.wait(WAIT_S)
        return answer("pong")

    async def main(agent: YiemAgent) -> str:
        task = asyncio.create_task(agent.aprompt("ping", timeout=WAIT_S))
        await wait_for(asked)
        released.set()  # set by the loop while aprompt is pending: the loop is not blocked
        reply = await task
        return reply.content[0].text  # type: ignore[union-attr]

    with YiemAgent(llm_call=llm_call) as agent:
        assert asyncio.run(main(agent)) == "pong"


def test_cancelling_during_the_llm_call_aborts_the_run() -> None:
    asked = threading.Event()
    seen: list[str | None] = []

    def llm_call(request: Any, signal: AbortSignal) -> AssistantMessage:
        asked.set()
        signal.wait(WAIT_S)
        seen.append(signal.reason)
        return answer("too late")

    async def main(agent: YiemAgent) -> bool:
        task = asyncio.create_task(agent.aprompt("slow question"))
        await wait_for(asked)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    with YiemAgent(llm_call=llm_call) as agent:
        assert asyncio.run(main(agent))
        # The cancelled task ended after its run did: nothing is left running or delivered.
        assert not agent.is_running
        assert seen == ["the task awaiting aprompt() was cancelled"]
        assert agent.output_channel.qsize() == 0  # the aborted response went to nobody
        asked.clear()
        agent.llm_call = lambda request: answer("fine")
        assert agent.prompt("next", timeout=WAIT_S).content[0].text == "fine"  # type: ignore[union-attr]


def test_cancelling_during_a_tool_aborts_the_tool() -> None:
    started = threading.Event()
    tool_saw: list[bool] = []

    def execute(_id: str, _args: Any, signal: AbortSignal, _p: Any) -> AgentToolResult:
        started.set()
        tool_saw.append(signal.wait(WAIT_S))
        return AgentToolResult("stopped")

    tool = AgentTool("slow", "Slow", "Takes a while.", {"type": "object"}, execute)
    model = ScriptedModel([{"tool_calls": [{"id": "c1", "name": "slow", "arguments": {}}]}])

    async def main(agent: YiemAgent) -> None:
        task = asyncio.create_task(agent.aprompt("go"))
        await wait_for(started)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert tool_saw == [True]  # the task ended once the aborted tool had

    with YiemAgent(llm_call=model, tools=[tool]) as agent:
        asyncio.run(main(agent))


def test_a_cancelled_message_still_queued_never_runs() -> None:
    asked, released = threading.Event(), threading.Event()
    questions: list[str] = []

    def llm_call(request: Any) -> AssistantMessage:
        questions.append(request["messages"][-1]["content"][0]["text"])
        asked.set()
        assert released.wait(WAIT_S)
        return answer("done")

    async def main(agent: YiemAgent) -> str:
        first = asyncio.create_task(agent.aprompt("first", timeout=WAIT_S))
        await wait_for(asked)
        second = asyncio.create_task(agent.aprompt("second"))
        # Cancel once "second" is queued behind the active run.
        while agent.input_channel.qsize() == 0:
            await asyncio.sleep(0)
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)
        released.set()
        reply = await first
        return reply.content[0].text  # type: ignore[union-attr]

    with YiemAgent(llm_call=llm_call) as agent:
        assert asyncio.run(main(agent)) == "done"
        assert agent.wait_for_idle(WAIT_S)
        assert [m.content[0].text for m in agent.messages if m.role == "user"] == ["first"]  # type: ignore[union-attr]
    assert questions == ["first"]

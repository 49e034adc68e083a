"""``@function_tool`` on an ``async def``: it answers through the pipeline and a real agent, abort
and timeouts cancel it, and it runs from a thread that already runs an event loop."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tool_file_helpers import text_of

from yiemagent.agent._agent import YiemAgent
from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage
from yiemagent.core._pipeline import execute_tool_calls
from yiemagent.core._tools import (
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
)
from yiemagent.tools._function_tool import function_tool

# -- 21: @function_tool on an async def ---------------------------------------------------------

WAIT = 10.0  # seconds any wait in these tests may take before the test fails


def run_calls(
    tools: list[AgentTool], *calls: AgentToolCall, signal: AbortSignal | None = None
) -> list[ToolResultMessage]:
    context = AgentContext("", [], tools)
    batch = execute_tool_calls(
        context, AssistantMessage(content=list(calls)), list(calls), AgentLoopConfig(), signal, None
    )
    return batch.messages


@function_tool
async def add_later(a: int, b: int) -> dict[str, Any]:
    """Add two numbers after yielding to the event loop.

    Args:
        a: The first number.
        b: The second number.
    """
    await asyncio.sleep(0)
    return {"sum": a + b, "thread": threading.current_thread().name}


def test_an_async_tool_returns_its_value_through_the_pipeline() -> None:
    assert add_later.input_schema["required"] == ["a", "b"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        [message] = run_calls([add_later], AgentToolCall("c1", "add_later", {"a": 2, "b": 40}))
        gc.collect()  # a coroutine never awaited warns when it is collected
    assert not message.is_error, text_of(message)
    assert message.details["result"]["sum"] == 42
    assert message.details["result"]["thread"] == threading.current_thread().name  # the tool's thread
    assert [w for w in caught if "never awaited" in str(w.message)] == []


def test_an_async_tool_answers_through_a_real_agent() -> None:
    def llm_call(request: dict[str, Any]) -> AssistantMessage:
        last = request["messages"][-1]
        if last["role"] != "tool":
            return AssistantMessage(content=[AgentToolCall("c1", "add_later", {"a": 1, "b": 2})])
        content = last["content"]
        said = content if isinstance(content, str) else "".join(p["text"] for p in content)
        return AssistantMessage(content=[TextContent(f"tool said {said}")])

    with YiemAgent(llm_call=llm_call, tools=[add_later]) as agent:
        reply = agent.prompt("add 1 and 2", timeout=WAIT)
    said = "".join(b.text for b in reply.content if isinstance(b, TextContent))
    assert said.startswith('tool said {"sum": 3, "thread": ')


def test_aborting_the_signal_cancels_an_async_tool() -> None:
    started, cancelled = threading.Event(), threading.Event()

    @function_tool
    async def wait_long() -> str:
        """Wait far longer than any test."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "slept"

    signal = AbortSignal()
    results: list[ToolResultMessage] = []
    runner = threading.Thread(
        target=lambda: results.extend(
            run_calls([wait_long], AgentToolCall("c1", "wait_long", {}), signal=signal)
        )
    )
    runner.start()
    assert started.wait(WAIT)
    signal.abort("user pressed stop")
    runner.join(WAIT)
    assert not runner.is_alive()
    assert cancelled.is_set()
    [message] = results
    assert message.is_error
    assert text_of(message) == (
        'Tool "wait_long" failed: CancelledError: the operation was aborted (user pressed stop)'
    )


def test_an_async_tool_that_handles_its_cancellation_keeps_its_answer() -> None:
    started = threading.Event()

    @function_tool
    async def tidy(signal: AbortSignal) -> str:
        """Stop cleanly when aborted."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return f"stopped cleanly, aborted={signal.aborted}"
        return "slept"

    signal = AbortSignal()
    box: list[Any] = []
    runner = threading.Thread(target=lambda: box.append(tidy.execute("c1", {}, signal, None)))
    runner.start()
    assert started.wait(WAIT)
    signal.abort()
    runner.join(WAIT)
    assert not runner.is_alive()
    assert [b.text for b in box[0].content] == ["stopped cleanly, aborted=True"]


def test_an_async_tool_whose_timeout_passes_is_cancelled() -> None:
    cancelled = threading.Event()

    @function_tool(timeout_s=0.05)
    async def too_slow() -> str:
        """Outlast the timeout."""
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "slept"

    [message] = run_calls([too_slow], AgentToolCall("c1", "too_slow", {}))
    assert message.is_error and text_of(message) == 'Tool "too_slow" timed out after 0.05 s.'
    assert cancelled.wait(WAIT)  # the tool's own thread cancelled the coroutine, it did not linger


def test_an_async_tool_runs_when_called_from_a_thread_running_an_event_loop() -> None:
    async def caller() -> AgentToolResult:
        result: AgentToolResult = add_later.execute("c1", {"a": 5, "b": 6}, None, None)
        return result

    result = asyncio.run(caller())
    assert result.details["result"]["sum"] == 11


def test_an_async_generator_is_refused_at_decoration() -> None:
    async def numbers() -> AsyncIterator[int]:
        yield 1

    with pytest.raises(TypeError, match="is an async generator"):
        function_tool(numbers)

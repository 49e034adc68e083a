"""One run of an agent: the six steps of spec section 6, repeated until the model stops.

``_process_message`` takes the user message that started the run and returns the run's single
response. It never raises: a failing ``llm_call`` or hook ends the run with an error response
(DESIGN point 10), and the worker thread goes on to the next message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from yiemagent.agent_core import execute_tool_calls
from yiemagent.content import ContentBlock, TextContent
from yiemagent.errors import RunError, describe_error, reraise_interrupt
from yiemagent.events import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from yiemagent.messages import AgentMessage, AssistantMessage
from yiemagent.tool_calls import extract_tool_calls
from yiemagent.tool_types import AbortSignal, AgentContext, AgentLoopConfig, AgentToolCallBatch

if TYPE_CHECKING:
    from yiemagent.agent import YiemAgent

__all__ = ["RunError", "build_terminated_response"]

ABORTED = "The run was aborted."


def _ignore_update(_event: Any) -> None:
    """The ``on_update`` an ``llm_call`` gets when no sink listens."""


def _step(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except BaseException as exc:
        reraise_interrupt(exc)
        raise RunError(f"{name} failed: {describe_error(exc)}") from exc


class _Run:
    """The state of one run: its agent, abort signal, event sink and the messages it added."""

    def __init__(self, agent: YiemAgent, signal: AbortSignal) -> None:
        self.agent = agent
        self.state = agent._state
        self.signal = signal
        self.emit = agent._emit
        self.added: list[AgentMessage] = []
        self._config: AgentLoopConfig | None = None
        self.reply_started = False  # a MessageStartEvent for the model's reply is out

    def aborted(self) -> bool:
        """Whether the run's signal was aborted (read afresh on every call)."""
        return self.signal.aborted

    def add(self, msg: AgentMessage, started: bool = False) -> None:
        """Append a message to the history, with its start (unless ``started``) and end events."""
        if self.emit.active and not started:
            self.emit(MessageStartEvent(msg))
        self.state.messages.append(msg)
        self.added.append(msg)
        if self.emit.active:
            self.emit(MessageEndEvent(msg))

    def made_up(self, stop_reason: str, error_message: str | None,
                content: list[ContentBlock] | None = None) -> AssistantMessage:
        """A response the runtime makes itself (error, aborted, max_turns); not added to history."""
        model = self.state.model
        return AssistantMessage(
            content=content or [],
            model=model.name if model is not None else "",
            provider=model.provider if model is not None else "",
            api=model.api if model is not None else "",
            stop_reason=stop_reason,
            error_message=error_message,
        )

    def call_llm(self) -> AssistantMessage:
        """Steps 2-4: prepare the context, format it and call the model.

        Raises ``RunError`` naming the step (``prepare_context``, ``format_msg_for_llm`` or
        ``llm_call``) and the exception's type and text.
        """
        agent = self.agent
        ctx = _step("prepare_context", agent.prepare_context, self.state)
        request = _step("format_msg_for_llm", agent.format_msg_for_llm, ctx)
        if self.emit.active:
            self.emit(MessageStartEvent(None))
        self.reply_started = True
        kwargs: dict[str, Any] = {}
        if agent._llm_accepts_on_update:
            kwargs["on_update"] = self.emit if self.emit.active else _ignore_update
        if agent._llm_accepts_signal:
            kwargs["signal"] = self.signal
        if agent._llm_accepts_max_retry_delay and agent.max_retry_delay_ms is not None:
            kwargs["max_retry_delay_ms"] = agent.max_retry_delay_ms
        response = _step("llm_call", agent.llm_call, request, **kwargs)
        if not isinstance(response, AssistantMessage):
            raise RunError(f"llm_call returned {type(response).__name__}; it must return an "
                           "AssistantMessage")
        return response

    def loop_config(self) -> AgentLoopConfig:
        """The run's tool-loop config (built once; it shares the state's live tools mapping)."""
        if self._config is None or self._config.tools is not self.state.tools:
            agent = self.agent
            self._config = AgentLoopConfig(self.state.tools, agent.before_tool_call,
                                           agent.after_tool_call, agent.tool_execution,
                                           agent.tool_timeout_s, agent.max_parallel_tools)
        return self._config

    def run_tools(self, response: AssistantMessage, calls: list[Any]) -> AgentToolCallBatch:
        """Step 6: execute the calls and add their results (and any tools they added)."""
        state = self.state
        context = AgentContext(state.system_prompt, state.messages, state.tools)
        state.pending_tool_calls = {call.id for call in calls}
        try:
            batch = execute_tool_calls(context, response, calls, self.loop_config(), self.signal,
                                       self.emit)
        finally:
            state.pending_tool_calls = set()
        for msg in batch.messages:
            self.add(msg)
            if msg.added_tool_names:
                self.agent.adopt_tools(msg.added_tool_names)
        return batch


def build_terminated_response(batch: AgentToolCallBatch, response: AssistantMessage) -> AssistantMessage:
    """The final response of a terminated batch (spec section 10): the tools' text after
    ``Tool execution completed.``, ``error_message`` set when any call failed."""
    content: list[ContentBlock] = [TextContent("Tool execution completed.")]
    for msg in batch.messages:
        for block in msg.content:
            if isinstance(block, TextContent):
                content.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                content.append(TextContent(block["text"]))
    failed = any(m.is_error for m in batch.messages)
    return AssistantMessage(
        content=content, api=response.api, provider=response.provider, model=response.model,
        usage=response.usage, stop_reason="tool_use_terminated",
        error_message="One or more tool calls failed" if failed else None,
    )


def _play_turn(run: _Run) -> AssistantMessage | None:
    """One turn: ask the model, record its reply, run its tool calls. Returns the run's response
    when the run ends in this turn, else ``None``. Every event the turn opens is closed."""
    run.reply_started = False
    try:
        response = run.call_llm()
    except RunError as exc:
        # An abort makes the client give up: then the abort, not the error, is the outcome.
        ended = (run.made_up("aborted", ABORTED) if run.aborted()
                 else run.made_up("error", str(exc)))
        if run.emit.active:
            if run.reply_started:
                run.emit(MessageEndEvent(ended))
            run.emit(TurnEndEvent(ended, []))
        return ended
    run.add(response, started=True)
    has_calls, calls = extract_tool_calls(response.content)
    # After an abort the calls still get (aborted) results, so the history stays well formed.
    batch = run.run_tools(response, calls) if has_calls else None
    results = batch.messages if batch is not None else []
    if run.emit.active:
        run.emit(TurnEndEvent(response, results))
    if run.aborted():
        return run.made_up("aborted", ABORTED)
    if batch is None:
        return response
    return build_terminated_response(batch, response) if batch.terminate else None


def _turns(run: _Run, take_input: Callable[[], list[AgentMessage]]) -> AssistantMessage:
    agent, turn = run.agent, 0
    while True:
        if run.aborted():
            return run.made_up("aborted", ABORTED)
        if turn >= agent.max_turns:
            return run.made_up("max_turns", f"Stopped after {agent.max_turns} LLM calls "
                               f"(max_turns={agent.max_turns}).")
        for msg in take_input():  # step 1: messages sent during the run join it here
            run.add(msg)
        agent._refresh_tools()
        turn += 1
        if run.emit.active:
            run.emit(TurnStartEvent(turn))
        ended = _play_turn(run)
        if ended is not None:
            return ended


def _process_message(agent: YiemAgent, first: AgentMessage, signal: AbortSignal,
                     take_input: Callable[[], list[AgentMessage]]) -> AssistantMessage:
    """Run the agent on ``first`` (plus anything ``take_input`` yields before each LLM call)
    until the model answers without tool calls, a batch terminates, the run is aborted, or
    ``max_turns`` LLM calls were made. Returns exactly one response; never raises (except a
    ``KeyboardInterrupt``)."""
    run = _Run(agent, signal)
    if run.emit.active:
        run.emit(AgentStartEvent())
    try:
        run.add(first)
        response = _turns(run, take_input)
    except BaseException as exc:  # defensive: the steps above contain their own failures
        reraise_interrupt(exc)
        response = run.made_up("error", f"the run failed: {describe_error(exc)}")
    agent._state.error_message = response.error_message if response.stop_reason == "error" else None
    if run.emit.active:
        run.emit(AgentEndEvent(list(run.added)))
    return response

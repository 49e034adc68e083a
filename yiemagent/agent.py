"""The agent runtime: ``YiemAgent``, its channels and the worker thread (spec sections 5-6).

Each agent owns three ``queue.Queue`` channels (input 16, follow-up 32, output 16) and one worker
thread running ``_agent_loop``. Channel semantics are DESIGN point 8: ``run_agent`` while idle
starts a run and during a run joins it before its next LLM call; ``follow_up`` starts a run of its
own after the active run's response is out; every run puts exactly one response on the output.
"""

from __future__ import annotations

import collections
import inspect
import itertools
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from yiemagent.emit import Emit, SafeEmitter
from yiemagent.errors import AgentClosedError
from yiemagent.messages import AgentMessage, AssistantMessage, LlmModel, UserMessage
from yiemagent.run import _process_message
from yiemagent.session import SessionData, load_session, save_session
from yiemagent.tool_types import (
    AbortSignal,
    AfterHook,
    AgentLoopConfig,
    AgentState,
    AgentTool,
    BeforeHook,
    positive_int,
    tool_mapping,
)
from yiemagent.utils import WireCache, openai_to_user_message
from yiemagent.utils import format_msg_for_llm as default_format_msg_for_llm
from yiemagent.utils import prepare_context as default_prepare_context

__all__ = ["AgentClosedError", "YiemAgent", "follow_up", "run_agent", "take_response"]


INPUT_CAPACITY, FOLLOW_UP_CAPACITY, OUTPUT_CAPACITY = 16, 32, 16
DEFAULT_SYSTEM_PROMPT = "You are helpful assistant."

_Queued = tuple[int, UserMessage]  # (arrival number, message)


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def _model(model: LlmModel | str | None) -> LlmModel | None:
    if model is None or isinstance(model, LlmModel):
        return model
    if isinstance(model, str):
        return LlmModel(model)
    raise TypeError(f"model must be an LlmModel, a model name or None, got {type(model).__name__}")


def _history(messages: Iterable[AgentMessage | Mapping[str, Any]] | None) -> list[AgentMessage]:
    """A new history list from messages or their ``to_dict`` forms; anything else is an error."""
    history: list[AgentMessage] = []
    for msg in messages or []:
        if isinstance(msg, Mapping):
            msg = AgentMessage.from_dict(msg)
        if not isinstance(msg, AgentMessage):
            raise TypeError(f"messages must be AgentMessage objects (or their to_dict() dicts), "
                            f"got {type(msg).__name__}")
        history.append(msg)
    return history


class YiemAgent:
    """An agent with its history, tools, hooks, channels and worker thread (spec ``yiemAgent``).

    The worker starts at construction and runs until ``shutdown``. Use ``run_agent``/
    ``follow_up`` to send, ``take_response`` to receive, or ``prompt`` for both. Every run ends
    with exactly one ``AssistantMessage`` response; failures become responses whose
    ``stop_reason`` is ``"error"``, and the worker never dies.
    """

    def __init__(
        self,
        *,
        llm_call: Callable[..., AssistantMessage] | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        model: LlmModel | str | None = None,
        tools: Mapping[str, AgentTool] | Iterable[AgentTool] | None = None,
        messages: Iterable[AgentMessage | Mapping[str, Any]] | None = None,
        agent_event_sink: Emit | None = None,
        tool_store: Any = None,
        prepare_context: Callable[[AgentState], Any] | None = None,
        format_msg_for_llm: Callable[[Any], Any] | None = None,
        before_tool_call: BeforeHook | None = None,
        after_tool_call: AfterHook | None = None,
        session_id: str | None = None,
        max_retry_delay_ms: int | None = None,
        tool_execution: Literal["sequential", "parallel"] = "sequential",
        max_turns: int = 50,
        tool_timeout_s: float | None = None,
        max_parallel_tools: int | None = None,
    ) -> None:
        if llm_call is None or not callable(llm_call):
            raise TypeError("YiemAgent needs llm_call=<callable(request) -> AssistantMessage>; got "
                            f"{type(llm_call).__name__}")
        if max_turns is None:
            raise ValueError("max_turns must be a positive int, got None")
        positive_int("max_turns", max_turns)
        # An agent given its store's own mapping (or no tools) follows the store: tools loaded,
        # reloaded, registered or removed there are what the next turn offers the model.
        self._follow_store = tool_store is not None and (tools is None or tools is tool_store.tools)
        if tools is None and tool_store is not None:
            tools = tool_store.tools
        # Checks the tool options now, in the caller's thread, rather than at the first run.
        AgentLoopConfig(tool_execution=tool_execution, tool_timeout_s=tool_timeout_s,
                        max_parallel_tools=max_parallel_tools)
        self._state = AgentState(system_prompt, _model(model), tool_mapping(tools),
                                 _history(messages))
        self.llm_call = llm_call
        self.agent_event_sink = agent_event_sink
        self.tool_store = tool_store
        store_tools = getattr(tool_store, "tools", {})
        # Tools that came from the store follow it (a reload reaches them); others stay as given.
        self._store_names = {n for n, t in self._state.tools.items() if store_tools.get(n) is t}
        self.prepare_context = prepare_context or default_prepare_context
        self.format_msg_for_llm = format_msg_for_llm or default_format_msg_for_llm
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.session_id = session_id or uuid.uuid4().hex
        self.max_retry_delay_ms = max_retry_delay_ms
        self.tool_execution: Literal["sequential", "parallel"] = tool_execution
        self.max_turns = max_turns
        self.tool_timeout_s = tool_timeout_s
        self.max_parallel_tools = max_parallel_tools
        self._llm_accepts_on_update = _accepts(llm_call, "on_update")
        self._llm_accepts_signal = _accepts(llm_call, "signal")
        self._llm_accepts_max_retry_delay = _accepts(llm_call, "max_retry_delay_ms")
        self._emit = SafeEmitter(agent_event_sink)
        self._prime_wire_cache()
        self.input_channel: queue.Queue[_Queued] = queue.Queue(INPUT_CAPACITY)
        self.follow_up_channel: queue.Queue[_Queued] = queue.Queue(FOLLOW_UP_CAPACITY)
        self.output_channel: queue.Queue[AssistantMessage] = queue.Queue(OUTPUT_CAPACITY)
        # Every channel operation happens under this one condition, so "idle", "a message is
        # queued" and "a response is out" change together and nobody misses a wake-up.
        self._cond = threading.Condition()
        self._arrivals = itertools.count()
        self._stopping = False
        self._finished = False  # the worker has ended
        self._overflow: collections.deque[AssistantMessage] = collections.deque()
        self._history_mark: int | None = None  # history length when the active run began
        self._run_opened = 0  # arrival number from which messages may join the active run
        self._signal: AbortSignal | None = None
        self._worker = threading.Thread(target=_agent_loop, args=(self,), daemon=True,
                                        name=f"yiemagent-{self.session_id[:8]}")
        self._worker.start()

    # -- state -------------------------------------------------------------------------------

    @property
    def messages(self) -> list[AgentMessage]:
        """The conversation history (the live list; read it, do not change it during a run)."""
        return self._state.messages

    @property
    def system_prompt(self) -> str:
        """The system prompt sent on every LLM call."""
        return self._state.system_prompt

    @property
    def model(self) -> LlmModel | None:
        """The model description, if one was given."""
        return self._state.model

    @property
    def tools(self) -> dict[str, AgentTool]:
        """The agent's active tools, by name, in order."""
        return self._state.tools

    @property
    def is_running(self) -> bool:
        """Whether a run is active."""
        return self._state.active_run

    def _refresh_tools(self) -> None:
        """Bring the store's changes to the agent's tools before an LLM call: the whole store
        when the agent follows it, else the tools that came from it (replaced when reloaded,
        dropped when gone). Run by the worker at the start of every turn."""
        store = self.tool_store
        if store is None:
            return
        lock = getattr(store, "lock", None)
        if lock is not None:
            with lock:
                current = dict(store.tools)
        else:
            current = dict(store.tools)
        state = self._state
        if self._follow_store:
            if current != state.tools:  # AgentTool compares by identity: a C-level check
                state.tools = current
            return
        for name in list(self._store_names):
            tool = current.get(name)
            if tool is None:
                state.tools.pop(name, None)
                self._store_names.discard(name)
            elif state.tools.get(name) is not tool:
                state.tools[name] = tool

    def adopt_tools(self, names: Iterable[str]) -> None:
        """Make the store's tools of these names callable from the next turn (``writeTool``
        reports what it added this way); names the store does not hold are ignored."""
        store = self.tool_store
        if store is None:
            return
        for name in names:
            tool = store.tools.get(name)
            if tool is not None:
                self._state.tools[name] = tool
                self._store_names.add(name)

    def _prime_wire_cache(self) -> None:
        """Convert a history given at construction once, now, so that the first turn costs the
        same as any other (only the default prepare/format functions use the cache)."""
        if (self._state.messages and self.prepare_context is default_prepare_context
                and self.format_msg_for_llm is default_format_msg_for_llm):
            self._state.wire_cache = WireCache()
            self._state.wire_cache.convert(self._state.messages)

    # -- channels ----------------------------------------------------------------------------

    def _enqueue(self, channel: queue.Queue[_Queued], msg: Any) -> None:
        user = openai_to_user_message(msg)  # bad input fails here, in the caller's thread
        with self._cond:
            while True:
                if self._stopping:
                    raise AgentClosedError("the agent was shut down; it takes no new messages")
                if not channel.full():
                    channel.put_nowait((next(self._arrivals), user))
                    self._cond.notify_all()
                    return
                self._cond.wait()  # the worker notifies when it takes a message

    def run_agent(self, msg: Any) -> None:
        """Send a user message: starts a run when idle, else joins the active run before its next
        LLM call. ``msg`` is a string, an OpenAI-style user dict or a ``UserMessage``; anything
        else raises ``TypeError``/``ValueError`` here. Blocks while the input channel is full;
        raises ``AgentClosedError`` after ``shutdown``."""
        self._enqueue(self.input_channel, msg)

    def follow_up(self, msg: Any) -> None:
        """Queue a message that starts a run of its own once the active run's response is out
        (while idle it starts a run at once, like ``run_agent``, but never joins a run). Same
        input forms and errors as ``run_agent``."""
        self._enqueue(self.follow_up_channel, msg)

    def take_response(self, timeout: float | None = None) -> AssistantMessage:
        """Return the next run's response, waiting up to ``timeout`` seconds (forever if None).

        Raises ``TimeoutError`` when the timeout passes, and ``AgentClosedError`` once the agent
        is shut down and every delivered response has been taken.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self.output_channel.queue:  # every put happens under this condition too
                    response = self.output_channel.get_nowait()
                    self._cond.notify_all()  # the worker may be waiting for room
                    return response
                if self._overflow:
                    return self._overflow.popleft()
                if self._finished:
                    raise AgentClosedError("the agent was shut down and has no responses left")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no response within {timeout} s")
                self._cond.wait(remaining)

    def prompt(self, text: Any, timeout: float | None = None) -> AssistantMessage:
        """Send ``text`` and wait for its response (for plain blocking code with one caller)."""
        self.run_agent(text)
        return self.take_response(timeout)

    def abort(self) -> None:
        """Abort the active run (tools and hooks see the signal; calls not yet run get aborted
        results; the run's response has ``stop_reason="aborted"``). No effect when idle."""
        with self._cond:
            signal = self._signal
        if signal is not None:
            signal.abort("aborted by the caller")

    def shutdown(self, wait: bool = True, abort: bool = False) -> list[UserMessage]:
        """Stop taking messages and return those queued and never processed, in arrival order.

        The active run finishes (or is aborted when ``abort``) and its response is delivered.
        With ``wait`` the worker thread has ended on return. Calling it again is harmless.
        """
        with self._cond:
            self._stopping = True
            queued = _drain(self.input_channel) + _drain(self.follow_up_channel)
            self._cond.notify_all()
        if abort:
            self.abort()
        if wait and threading.current_thread() is not self._worker:
            self._worker.join()
        return [msg for _, msg in sorted(queued, key=lambda item: item[0])]

    def __enter__(self) -> YiemAgent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    # -- sessions ----------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the session (id, system prompt, model, messages) to ``path`` atomically."""
        save_session(self.session_data(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs: Any) -> YiemAgent:
        """Create an agent from a saved session; ``kwargs`` are constructor arguments
        (``llm_call`` is required, ``tools`` and hooks as usual). Raises ``SessionError``
        naming the file when it is damaged or of an unknown version."""
        data = load_session(path)
        kwargs.setdefault("session_id", data.session_id)
        kwargs.setdefault("system_prompt", data.system_prompt)
        kwargs.setdefault("model", data.model)
        kwargs.setdefault("messages", data.messages)
        return cls(**kwargs)

    def session_data(self) -> SessionData:
        """The session as plain data (what ``save`` writes): during a run, with the history as it
        was before the run began."""
        return SessionData(self.session_id, self.system_prompt, self.model, self.history_snapshot())

    def history_snapshot(self) -> list[AgentMessage]:
        """A copy of the history at a run boundary: during a run, the history as it was before
        the run began (a half-finished turn would not be a valid conversation to resume)."""
        with self._cond:
            messages = list(self._state.messages)
            mark = self._history_mark
        return messages if mark is None else messages[:mark]

    # -- worker side -------------------------------------------------------------------------

    def _next_message(self) -> tuple[UserMessage, AbortSignal] | None:
        """Block until a message starts a run (the earliest queued, input or follow-up); return
        it with the run's abort signal, or ``None`` once shutting down."""
        with self._cond:
            while not self._stopping:
                inputs, follow_ups = self.input_channel.queue, self.follow_up_channel.queue
                if inputs or follow_ups:
                    # The earlier arrival starts the next run, whichever channel it came through.
                    early = not follow_ups or (inputs and inputs[0][0] < follow_ups[0][0])
                    channel = self.input_channel if early else self.follow_up_channel
                    _, msg = channel.get_nowait()
                    self._run_opened = next(self._arrivals)  # later sends join this run
                    self._state.active_run = True
                    self._history_mark = len(self._state.messages)
                    self._signal = signal = AbortSignal()
                    self._cond.notify_all()
                    return msg, signal
                self._cond.wait()
            return None

    def _take_joining_input(self) -> list[AgentMessage]:
        """Messages sent with ``run_agent`` since the active run began (none once shutting
        down). Messages queued before it stay: each of those starts a run of its own."""
        if not self.input_channel.queue:  # a lock-free peek; the check is repeated under the lock
            return []
        with self._cond:
            if self._stopping or self.input_channel.empty():
                return []
            queued = _drain(self.input_channel)
            for item in queued:
                if item[0] < self._run_opened:
                    self.input_channel.put_nowait(item)  # a prefix: the order is kept
            self._cond.notify_all()
            return [msg for number, msg in queued if number >= self._run_opened]

    def _deliver(self, response: AssistantMessage) -> None:
        """End the active run and put its response out, in one step. Waits for room in the
        output channel, except once shutting down: then responses go to an overflow that
        ``take_response`` also reads, so shutdown never waits for a taker."""
        with self._cond:
            self._state.active_run = False
            self._signal = None
            self._history_mark = None
            while self.output_channel.full() and not self._stopping:
                self._cond.wait()
            if self._overflow or self.output_channel.full():
                self._overflow.append(response)
            else:
                self.output_channel.put_nowait(response)
            self._cond.notify_all()

    def _close(self) -> None:
        """Mark the worker as ended: no new messages, takers stop waiting."""
        with self._cond:
            self._stopping = True
            self._finished = True
            self._cond.notify_all()

    def __repr__(self) -> str:
        return (f"YiemAgent(session_id={self.session_id!r}, tools={list(self.tools)}, "
                f"messages={len(self.messages)}, running={self.is_running})")


def _drain(channel: queue.Queue[_Queued]) -> list[_Queued]:
    items: list[_Queued] = []
    while True:
        try:
            items.append(channel.get_nowait())
        except queue.Empty:
            return items


def _agent_loop(agent: YiemAgent) -> None:
    """The worker: take a message, run it, deliver the response; until shutdown. A failing run
    is already an error response (``_process_message`` contains its failures); if the worker
    still ends abnormally (a ``KeyboardInterrupt``), the agent is closed so that senders and
    takers get ``AgentClosedError`` instead of hanging."""
    try:
        while (started := agent._next_message()) is not None:
            first, signal = started
            agent._deliver(_process_message(agent, first, signal, agent._take_joining_input))
    finally:
        agent._close()


def run_agent(agent: YiemAgent, msg: Any) -> None:
    """Send a user message to ``agent`` (see ``YiemAgent.run_agent``)."""
    agent.run_agent(msg)


def follow_up(agent: YiemAgent, msg: Any) -> None:
    """Queue a follow-up message for ``agent`` (see ``YiemAgent.follow_up``)."""
    agent.follow_up(msg)


def take_response(agent: YiemAgent, timeout: float | None = None) -> AssistantMessage:
    """Take the next response of ``agent`` (see ``YiemAgent.take_response``)."""
    return agent.take_response(timeout)

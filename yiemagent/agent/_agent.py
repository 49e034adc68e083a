"""The agent: ``YiemAgent``, a thin stateful shell around the run loop (spec sections 5-6).

Each agent owns three ``queue.Queue`` channels (input 16, follow-up 32, output 16), one worker
thread (``worker.AgentWorker``) that runs ``run.run_loop`` once per run, its settings and its
event listeners. Channel semantics are decision 8 of docs/design.md: ``run_agent`` while idle starts
a run and during a run joins it before its next LLM call; ``follow_up`` starts a run of its own
after the active run's response is out; every run puts exactly one response on the output channel."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from yiemagent.agent._channels import MessageChannel, OutputChannel
from yiemagent.agent._old_keywords import AGENT_KEYWORDS, PROMPT_KEYWORDS, regroup
from yiemagent.agent._options import (
    ContextOptions,
    OutputOptions,
    QueueOptions,
    ToolOptions,
    check_queue_mode,
    option_of,
    output_options,
)
from yiemagent.agent._output_options import OutputDefaults
from yiemagent.agent._session import SessionData, check_session_id, load_session, save_session
from yiemagent.agent._tool_sync import ToolSync
from yiemagent.agent._worker import AgentWorker
from yiemagent.core._approval import Approve, Deny, Edit, PendingApproval, paused_belongs
from yiemagent.core._emit import Emit, SafeEmitter
from yiemagent.core._loop import RunConfig
from yiemagent.core._messages import AgentMessage, AssistantMessage, LlmModel, UserMessage
from yiemagent.core._tools import AfterHook, AgentState, AgentTool, BeforeHook, tool_mapping
from yiemagent.core._usage import RunUsage, UsageLimits
from yiemagent.errors import AgentClosedError

__all__ = [
    "AgentClosedError",
    "YiemAgent",
    "follow_up",
    "on_agent_created",
    "resume",
    "run_agent",
    "take_response",
]

DEFAULT_SYSTEM_PROMPT = "You are helpful assistant."
_CANCELLED = "the task awaiting aprompt() was cancelled"
logger = logging.getLogger("yiemagent")


def _model(model: LlmModel | str | None) -> LlmModel | None:
    if model is None or isinstance(model, LlmModel):
        return model
    if isinstance(model, str):
        return LlmModel(model)
    raise TypeError(f"model must be an LlmModel, a model name or None, got {type(model).__name__}")


def _history(messages: Iterable[AgentMessage | Mapping[str, Any]] | None) -> list[AgentMessage]:
    """A new history list from messages or their ``to_dict`` forms; anything else is an error."""
    if isinstance(messages, (str, bytes, Mapping)):
        raise TypeError(f"messages must be a list of messages, got {type(messages).__name__}")
    history: list[AgentMessage] = []
    for msg in messages or []:
        if isinstance(msg, Mapping):
            msg = AgentMessage.from_dict(msg)
        if not isinstance(msg, AgentMessage):
            raise TypeError(
                f"messages must be AgentMessage objects (or their to_dict() dicts), got {type(msg).__name__}"
            )
        history.append(msg)
    return history


class _RunSetting:
    """A ``YiemAgent`` attribute that lives in the run config: reading it reads the config,
    setting it builds a new, checked config (a bad value raises here) used from the next run."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, agent: YiemAgent | None, owner: type) -> Any:
        if agent is None:
            return self
        return getattr(agent._worker_core.config, self.name)

    def __set__(self, agent: YiemAgent, value: Any) -> None:
        agent._replace_config(**{self.name: value})


class _LlmSetting(_RunSetting):
    """``llm_call``: a new one brings its own context window and count of tokens (as the
    agent's ``ContextOptions.window`` says), so it is never measured by the old model's."""

    def __set__(self, agent: YiemAgent, value: Any) -> None:
        agent._replace_config(llm_call=value, **_window_settings(value, agent._context_window_arg))


class _ModeSetting(_RunSetting):
    """A ``YiemAgent`` attribute that lives on the worker core (how queued messages join runs):
    checked at the set, read by the worker at its next decision."""

    def __get__(self, agent: YiemAgent | None, owner: type) -> Any:
        if agent is None:
            return self
        return getattr(agent._worker_core, self.name)

    def __set__(self, agent: YiemAgent, value: Any) -> None:
        mode = check_queue_mode(self.name, value)
        with agent._cond:
            setattr(agent._worker_core, self.name, mode)


class YiemAgent:
    """An agent with its history, tools, hooks, channels and worker thread (spec ``yiemAgent``).

    The worker starts at construction and runs until ``shutdown`` (or until the agent is garbage
    collected). Send with ``run_agent``/``follow_up`` or the channels' ``put``, receive with
    ``take_response`` or ``output_channel.get``, or use ``prompt`` for both; ``resume`` runs on
    from the history as it is. Every run ends with exactly one ``AssistantMessage`` response;
    failures become responses whose ``stop_reason`` is ``"error"``, and the worker never dies.

    Settings that belong together come as option objects: ``output=OutputOptions(...)`` (or a
    schema alone), ``tool_options=ToolOptions(...)``, ``context=ContextOptions(...)`` and
    ``queues=QueueOptions(...)``; the flat keywords they replace still work for one release,
    each with a ``DeprecationWarning`` naming its new spelling (docs/design.md, decision 28).
    """

    llm_call = _LlmSetting("The model call: ``llm_call(request, **keywords) -> AssistantMessage``.")
    prepare_context = _RunSetting("Builds the ``AgentContext`` of each LLM call from the state.")
    format_msg_for_llm = _RunSetting("Turns the context into the request given to ``llm_call``.")
    before_tool_call = _RunSetting("Hook run before each tool call; it may block the call.")
    after_tool_call = _RunSetting("Hook run after each tool call; it may change the result.")
    tool_execution = _RunSetting('``"sequential"`` or ``"parallel"``.')
    tool_timeout_s = _RunSetting("Default seconds a tool call may take (``None``: no limit).")
    max_parallel_tools = _RunSetting("Cap on the parallel pool (``None``: one thread per call).")
    max_turns = _RunSetting('LLM calls per run before it ends with ``stop_reason="max_turns"``.')
    max_repeated_calls = _RunSetting(
        "How often one run may call a tool with the same arguments (``None``: no limit); a further "
        "call gets an error result saying the model already has that result."
    )
    max_retry_delay_ms = _RunSetting("Cap on a provider client's retry waits, when set.")
    skip_tools_on_steer = _RunSetting("Skip the rest of a sequential batch for a new message.")
    steering_mode = _ModeSetting(
        'How messages sent with ``run_agent`` during a run join it: ``"all"`` before the next '
        'LLM call, or ``"one-at-a-time"``, one per LLM call in arrival order.'
    )
    follow_up_mode = _ModeSetting(
        'How queued follow-ups start runs: ``"one-at-a-time"`` (each its own run) or ``"all"`` '
        "(the follow-ups queued while a run is active share the next run)."
    )
    clock = _RunSetting("Milliseconds for the timestamps the loop gives (fixed in conformance runs).")
    new_tool_call_id = _RunSetting("Makes the id of a tool call that came without one.")

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
        max_turns: int = 50,
        name: str = "yiemagent",
        close_tool_store: bool = False,
        needs_approval: Callable[[AgentTool, dict[str, Any], Any], bool] | None = None,
        session_file: str | os.PathLike[str] | None = None,
        usage_limits: UsageLimits | None = None,
        prices: Mapping[str, Any] | None = None,
        output: OutputOptions | Any = None,
        tool_options: ToolOptions | None = None,
        context: ContextOptions | None = None,
        queues: QueueOptions | None = None,
        **deprecated: Any,
    ) -> None:
        if deprecated:  # the flat keywords of before the options, for one release
            output, tool_options, context, queues = _regrouped(
                deprecated, output, tool_options, context, queues
            )
        if llm_call is None or not callable(llm_call):
            raise TypeError(
                "YiemAgent needs llm_call=<callable(request) -> AssistantMessage>; got "
                f"{type(llm_call).__name__}"
            )
        if agent_event_sink is not None and not callable(agent_event_sink):
            raise TypeError(f"agent_event_sink must be callable, got {type(agent_event_sink).__name__}")
        given = tools
        if tools is None and tool_store is not None:
            tools = tool_store.tools
        state = AgentState(
            _check_prompt(system_prompt), _model(model), tool_mapping(tools), _history(messages)
        )
        tool_sync = ToolSync(tool_store, given, state.tools) if tool_store is not None else None
        tool_opts = option_of("tool_options", ToolOptions, tool_options)
        context_opts = option_of("context", ContextOptions, context)
        queue_opts = option_of("queues", QueueOptions, queues)
        self._context_window_arg = context_opts.window
        # Checked now (a bad schema raises here); the base of every prompt's own output options.
        self._output_defaults = _output_defaults(output_options(output))
        config = RunConfig(
            llm_call=llm_call,
            before_tool_call=before_tool_call,
            after_tool_call=after_tool_call,
            tool_execution=tool_opts.execution,
            tool_timeout_s=tool_opts.timeout_s,
            max_parallel_tools=tool_opts.max_parallel,
            max_turns=max_turns,
            max_repeated_calls=tool_opts.max_repeated_calls,
            session_id=check_session_id(session_id or uuid.uuid4().hex),
            max_retry_delay_ms=max_retry_delay_ms,
            skip_tools_on_steer=tool_opts.skip_on_steer,
            sync_tools=tool_sync.sync if tool_sync is not None else None,
            needs_approval=needs_approval,
            output=self._output_defaults.spec(),
            usage_limits=usage_limits,
            prices=prices,
            max_tool_result_chars=tool_opts.max_result_chars,
            context_strategy=context_opts.strategy,
            **_window_settings(llm_call, context_opts.window),
            **_formatters(prepare_context, format_msg_for_llm),
        )
        self.tool_store = tool_store
        self._emitter = SafeEmitter(agent_event_sink)
        core = AgentWorker(
            state,
            config,
            self._emitter,
            tool_sync,
            queue_opts.steering,
            queue_opts.follow_up,
        )
        self._worker_core = core
        self._state = state
        self.session_file = None if session_file is None else os.fspath(session_file)
        if self.session_file is not None:
            core.session_file = self.session_file
            core.config = attrs.evolve(core.config, approval_checkpoint=core.save_session)
        self._cond = core.cond
        self.input_channel: MessageChannel = core.input_channel
        self.follow_up_channel: MessageChannel = core.follow_up_channel
        self.output_channel: OutputChannel = core.output_channel
        self.name = name
        self.close_tool_store = bool(close_tool_store)
        self._announce()
        core.start(f"yiemagent-{self.session_id[:8]}")
        self._worker = core.thread
        # An agent dropped without shutdown() must not keep its thread: the worker holds only
        # the core, so the agent can be collected, and this stops the worker then.
        self._finalizer = weakref.finalize(self, core.stop)

    def _announce(self) -> None:
        """Call the hooks registered with ``on_agent_created`` (tracing, for one); a hook that
        raises is logged and the agent goes on."""
        for hook in list(_created_hooks):
            try:
                hook(self)
            except Exception:
                logger.exception("an on_agent_created hook raised")

    # -- settings ----------------------------------------------------------------------------

    def _replace_config(self, **changes: Any) -> None:
        with self._cond:
            core = self._worker_core
            core.config = attrs.evolve(core.config, **changes)

    @property
    def session_id(self) -> str:
        """The session's id: saved with the session and given to an ``llm_call`` that declares
        ``session_id`` (the provider clients send it as a cache or user key)."""
        return self._worker_core.config.session_id or ""

    @session_id.setter
    def session_id(self, value: str) -> None:
        self._replace_config(session_id=check_session_id(value))

    @property
    def agent_event_sink(self) -> Emit:
        """The serialised sink that hands every event to the listeners (see ``subscribe``)."""
        return self._emitter

    def subscribe(self, listener: Emit) -> Callable[[], None]:
        """Add an event listener after the others and return a function that removes it.

        Listeners get every event in subscription order, are never called two at once (even from
        parallel tools), and one that raises is logged and skipped without affecting the others.
        ``agent_event_sink=`` is the first listener. Works during a run: from the next event.
        """
        return self._emitter.subscribe(listener)

    # -- state -------------------------------------------------------------------------------

    @property
    def messages(self) -> list[AgentMessage]:
        """A copy of the conversation history. Setting it replaces the history (messages or
        their ``to_dict`` forms, checked at the set); during a run, before its next LLM call.
        Calls waiting for approval belong to the history they came from: setting it drops them
        (they never run)."""
        return list(self._state.messages)

    @messages.setter
    def messages(self, value: Iterable[AgentMessage | Mapping[str, Any]]) -> None:
        history = _history(value)
        self._worker_core.set_state("messages", lambda: self._replace_history(history))

    def _replace_history(self, history: list[AgentMessage]) -> None:
        """Swap in ``history`` (with the channel lock held). During a run it applies between
        turns, and a save then writes the new history as it was at that point."""
        self._state.messages = history
        paused = self._state.paused_batch
        if paused is not None and not paused.settled:
            self._state.paused_batch = None
        if self._state.active_run:
            self._worker_core.history_mark = len(history)

    @property
    def system_prompt(self) -> str:
        """The system prompt sent on every LLM call; settable (during a run: from the next
        LLM call)."""
        return self._state.system_prompt

    @system_prompt.setter
    def system_prompt(self, value: str) -> None:
        prompt = _check_prompt(value)
        self._worker_core.set_state("system_prompt", lambda: setattr(self._state, "system_prompt", prompt))

    @property
    def model(self) -> LlmModel | None:
        """The model description, if one was given; settable like ``system_prompt``."""
        return self._state.model

    @model.setter
    def model(self, value: LlmModel | str | None) -> None:
        model = _model(value)
        self._worker_core.set_state("model", lambda: setattr(self._state, "model", model))

    @property
    def tools(self) -> dict[str, AgentTool]:
        """The agent's active tools, by name, in order. Setting it (a mapping or an iterable of
        tools, checked at the set) replaces them; the store's own mapping makes the agent follow
        its store again. During a run it applies from the next LLM call."""
        return self._state.tools

    @tools.setter
    def tools(self, value: Mapping[str, AgentTool] | Iterable[AgentTool]) -> None:
        mapping = tool_mapping(value)
        sync = self._worker_core.tool_sync
        # The store's own lock is taken here, never under the channel lock (lock order).
        snapshot = sync.store_snapshot() if sync is not None else {}

        def apply() -> None:
            self._state.tools = mapping
            if sync is not None:
                sync.rebind(value, mapping, snapshot)

        self._worker_core.set_state("tools", apply)

    @property
    def is_running(self) -> bool:
        """Whether a run is active."""
        return self._state.active_run

    def wait_for_idle(self, timeout: float | None = None) -> bool:
        """Wait until no run is active and nothing is queued; return whether that happened
        within ``timeout`` seconds. Raises ``RuntimeError`` on the agent's own worker thread."""
        return self._worker_core.wait_for_idle(timeout)

    @property
    def usage(self) -> RunUsage:
        """What every run since construction (or ``reset()``; a loaded session's too) used: the
        sum of the runs' ``run_usage`` (a copy; docs/budgets.md)."""
        with self._cond:
            return self._worker_core.usage.plus(RunUsage())

    def reset(self) -> list[UserMessage]:
        """Clear the history, the queues, the calls waiting for approval, the last error and
        the usage (``usage``); return the queued messages it dropped. Raises ``RuntimeError``
        during a run: call ``abort()`` and ``wait_for_idle()`` first, so that no run writes into
        the history being cleared."""
        core = self._worker_core
        with self._cond:
            if self._state.active_run:
                raise RuntimeError("reset() during a run: call abort() and wait_for_idle() first")
            dropped = core.drain_queues()
            self._replace_history([])
            self._state.error_message = None
            core.usage = RunUsage()
            core.pending.clear()
        return dropped

    def clear_queues(self) -> list[UserMessage]:
        """Drop the messages queued on the input and follow-up channels (and queued resumes);
        return the dropped messages in arrival order. The active run goes on."""
        return self._worker_core.clear_queues()

    # -- channels ----------------------------------------------------------------------------

    def run_agent(self, msg: Any) -> None:
        """Send a user message: starts a run when idle, else joins the active run before its next
        LLM call. ``msg`` is a string, an OpenAI-style user dict or a ``UserMessage``; anything
        else raises ``TypeError``/``ValueError`` here. Blocks while the input channel is full;
        raises ``AgentClosedError`` after ``shutdown``. Same as ``input_channel.put(msg)``."""
        self.input_channel.put(msg)

    def follow_up(self, msg: Any) -> None:
        """Queue a message that starts a run of its own once the active run's response is out
        (while idle it starts a run at once, like ``run_agent``, but never joins a run). Same
        input forms and errors as ``run_agent``; same as ``follow_up_channel.put(msg)``."""
        self.follow_up_channel.put(msg)

    def resume(self, approvals: Mapping[str, Approve | Deny | Edit] | None = None) -> None:
        """Start a run from the existing history with no new message; it puts one response on
        the output channel like any run. This finishes an async handoff after a ``terminate``
        or retries after an error response. Tool calls of the last reply that have no result
        yet run first. When idle, a history that is empty or ends with the model's answer (no
        tool call left unanswered) raises ``ValueError`` here; a resume queued behind a run is
        checked when its turn comes, and gives an error response then.

        While calls wait for approval (``pending_approvals``), ``approvals`` maps each waiting
        call's id to ``Approve()``, ``Deny(reason)`` or ``Edit(arguments)``; the paused batch
        then runs with them, and the run goes on as after any batch. A missing or unknown id,
        or an edit that breaks the tool's schema, raises ``ApprovalError`` here, and nothing
        runs."""
        self._worker_core.request_resume(approvals)

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        """The calls waiting for a decision, in call order (empty when none waits, and while
        the decisions given run): each with the arguments that will execute if it is approved."""
        paused = self._worker_core.waiting_batch()
        with self._cond:
            return [] if paused is None or paused.settled else paused.pending()

    def take_response(self, timeout: float | None = None) -> AssistantMessage:
        """Return the next run's response, waiting up to ``timeout`` seconds (forever if None).

        Raises ``TimeoutError`` (``ResponseTimeout``) when the timeout passes, and
        ``AgentClosedError`` once the agent is shut down and every delivered response has been
        taken. Same as ``output_channel.get(timeout=timeout)``.
        """
        return self.output_channel.get(timeout=timeout)

    def prompt(
        self,
        text: Any,
        timeout: float | None = None,
        *,
        output: OutputOptions | Any = None,
        usage_limits: UsageLimits | None = None,
        **deprecated: Any,
    ) -> AssistantMessage:
        """Send ``text`` and return the response of the run that answered it (other responses
        stay on the output channel, in order). When the timeout passes it raises
        ``TimeoutError``; the late response is then not put out at all (the reply is in the
        history like every reply), so a later ``prompt`` never gets it.

        With ``output`` (``OutputOptions``, or a schema alone) the run ends in data: the
        response's ``output`` (docs/output.md); fields not set are the agent's.
        ``usage_limits`` replaces the agent's for this run (docs/budgets.md). Such a prompt
        starts a run of its own, never joining an active one (it waits as a follow-up does). A
        schema or option that cannot be used raises ``TypeError``/``ValueError`` here. The old
        ``output_schema``, ``output_mode``, ``output_retries`` and ``validate_output`` keywords
        still work for one release, with a ``DeprecationWarning``."""
        self._worker_core.hub.check_not_worker("prompt")
        options = _prompt_output("YiemAgent.prompt", output, deprecated)
        number = self._send_prompt(text, options, usage_limits)
        return self.output_channel.take_for(number, timeout)

    def _send_prompt(self, text: Any, output: OutputOptions, limits: UsageLimits | None = None) -> int:
        """Queue a prompt; with options of its own, as a follow-up whose run uses them."""
        changes: dict[str, Any] = {}
        if not output.is_empty():
            changes["output"] = self._output_defaults.with_options(
                output.schema, output.mode, output.retries, output.validate
            )
        if limits is not None:
            if not isinstance(limits, UsageLimits):
                raise TypeError(f"usage_limits must be a UsageLimits, got {type(limits).__name__}")
            changes["usage_limits"] = limits
        if not changes:
            return self.input_channel.send(text)
        core = self._worker_core

        def file_options(number: int) -> None:
            core.run_options[number] = changes

        return self.follow_up_channel.send(text, on_arrival=file_options)

    async def aprompt(
        self,
        text: Any,
        timeout: float | None = None,
        *,
        output: OutputOptions | Any = None,
        usage_limits: UsageLimits | None = None,
        **deprecated: Any,
    ) -> AssistantMessage:
        """``prompt`` for asyncio code: the prompt waits on a worker thread of the loop's default
        executor, so the event loop goes on meanwhile. Cancelling the awaiting task withdraws
        the message: still queued, it never runs; running, its run is aborted, and the task
        ends once that run has (a second cancellation stops the wait); the aborted response
        is returned to no one. Same options and errors as ``prompt``."""
        self._worker_core.hub.check_not_worker("aprompt")
        options = _prompt_output("YiemAgent.aprompt", output, deprecated)
        sent: list[int] = []
        withdrawn = threading.Event()
        lock = threading.Lock()

        def send_and_wait() -> AssistantMessage:
            number = self._send_prompt(text, options, usage_limits)
            with lock:
                sent.append(number)
                cancelled = withdrawn.is_set()
            if cancelled:  # cancelled while the send waited for room
                self._worker_core.cancel(number, _CANCELLED)
            return self.output_channel.take_for(number, timeout)

        waiting = asyncio.get_running_loop().run_in_executor(
            None, contextvars.copy_context().run, send_and_wait
        )
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            with lock:
                withdrawn.set()
                number = sent[0] if sent else None
            if number is not None:
                self._worker_core.cancel(number, _CANCELLED)
            # Until the aborted run has ended (and its response was taken), the run is still
            # going: wait for that, so a cancelled task leaves nothing running behind it.
            with contextlib.suppress(Exception):
                await waiting
            raise

    def abort(self) -> None:
        """Abort the active run (tools and hooks see the signal; calls not yet run get aborted
        results; the run's response has ``stop_reason="aborted"``). No effect when idle."""
        self._worker_core.abort()

    def shutdown(
        self, wait: bool = True, abort: bool = False, timeout: float | None = None
    ) -> list[UserMessage]:
        """Stop taking messages and return those queued and never processed, in arrival order.

        The active run finishes (or is aborted when ``abort``) and its response is delivered.
        With ``wait`` the worker thread has ended on return, or ``timeout`` seconds passed (then
        a warning says what is still running); from a listener or tool of this agent, where
        that wait could never end, ``wait=True`` raises ``RuntimeError`` (use ``wait=False``).
        Calling it again is harmless. An agent made with ``close_tool_store=True`` then closes
        its tool store too (its MCP connections and their servers).
        """
        core = self._worker_core
        if wait:
            core.hub.check_not_worker("shutdown(wait=True)")
        queued = core.stop()
        if abort:
            core.abort("the agent is shutting down")
        if wait:
            core.thread.join(timeout)
            if core.thread.is_alive():
                logger.warning(
                    "shutdown(timeout=%s) returned while the worker is still busy with %s",
                    timeout,
                    core.describe_activity(),
                )
        if self.close_tool_store and self.tool_store is not None:
            self._close_store_after(core)
        return queued

    def _close_store_after(self, core: AgentWorker) -> None:
        """Close the tool store once the worker has ended (at once when it has), so a run still
        going never loses its tools' connections."""
        store = self.tool_store
        with self._cond:
            ended = core.hub.finished
            if not ended and store.close not in core.after_stop:
                core.after_stop.append(store.close)
        if ended:
            store.close()

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
        old = {name: kwargs.pop(name) for name in list(kwargs) if name in AGENT_KEYWORDS}
        if old:  # regrouped here, so that the warnings point at the caller of load
            kwargs.update(regroup("YiemAgent.load", old, kwargs, AGENT_KEYWORDS, stacklevel=2))
        data = load_session(path)
        kwargs.setdefault("session_id", data.session_id)
        kwargs.setdefault("system_prompt", data.system_prompt)
        kwargs.setdefault("model", data.model)
        kwargs.setdefault("messages", data.messages)
        agent = cls(**kwargs)
        if data.usage is not None:
            with agent._cond:
                agent._worker_core.usage = data.usage
        if data.paused is not None and paused_belongs(data.paused, agent._state.messages):
            with agent._cond:
                agent._state.paused_batch = data.paused
        return agent

    def session_data(self) -> SessionData:
        """The session as plain data (what ``save`` writes): during a run, with the history as it
        was before the run began; with the batch waiting for approval, if any."""
        return self._worker_core.session_data()

    def history_snapshot(self) -> list[AgentMessage]:
        """A copy of the history at a run boundary: during a run, the history as it was before
        the run began (a half-finished turn would not be a valid conversation to resume)."""
        return self._worker_core.history_snapshot()

    def __repr__(self) -> str:
        return (
            f"YiemAgent(session_id={self.session_id!r}, tools={list(self.tools)}, "
            f"messages={len(self._state.messages)}, running={self.is_running})"
        )


def _known_window(llm_call: Any) -> int | None:
    """The context window an ``llm_call`` knows of itself (the embedded model's ``n_ctx``)."""
    window = getattr(llm_call, "context_window", None)
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None


def _window_settings(llm_call: Any, context_window: Any) -> dict[str, Any]:
    """The run config's window settings: ``context_window`` as given, else the one the
    ``llm_call`` knows of itself; with ``"auto"``, also the one its server lists (asked at the
    start of each run of its ``listed_context_window``, which keeps the answer); its
    ``count_tokens`` when it has one."""
    count = getattr(llm_call, "count_tokens", None)
    settings: dict[str, Any] = {"count_tokens": count if callable(count) else None, "window_source": None}
    if context_window == "auto":
        settings["context_window"] = _known_window(llm_call)
        listed = getattr(llm_call, "listed_context_window", None)
        if settings["context_window"] is None and callable(listed):
            settings["window_source"] = listed
    elif context_window is None:
        settings["context_window"] = _known_window(llm_call)
    else:
        settings["context_window"] = context_window
    return settings


def _regrouped(
    deprecated: dict[str, Any], output: Any, tool_options: Any, context: Any, queues: Any
) -> tuple[Any, Any, Any, Any]:
    """``YiemAgent``'s options with those its old keywords stand for (with their warnings,
    pointing at the caller of ``YiemAgent``)."""
    new = {"output": output, "tool_options": tool_options, "context": context, "queues": queues}
    new.update(regroup("YiemAgent.__init__", deprecated, new, AGENT_KEYWORDS, stacklevel=3))
    return new["output"], new["tool_options"], new["context"], new["queues"]


def _output_defaults(options: OutputOptions) -> OutputDefaults:
    """The agent's output settings from ``output=``: the fields not set take their defaults."""
    return OutputDefaults(
        options.schema,
        "tool" if options.mode is None else options.mode,
        2 if options.retries is None else options.retries,
        options.validate,
    )


def _prompt_output(where: str, output: Any, deprecated: dict[str, Any]) -> OutputOptions:
    """A prompt's ``output=`` as ``OutputOptions``, or those its old keywords stand for (with
    their warnings, pointing at the caller of the prompt)."""
    if deprecated:
        grouped = regroup(where, deprecated, {"output": output}, PROMPT_KEYWORDS, stacklevel=3)
        output = grouped.get("output", output)
    return output_options(output)


def _check_prompt(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"system_prompt must be a string, got {type(value).__name__}")
    return value


def _formatters(prepare_context: Any, format_msg_for_llm: Any) -> dict[str, Any]:
    """The custom formatters given (``None`` keeps the defaults)."""
    given = {"prepare_context": prepare_context, "format_msg_for_llm": format_msg_for_llm}
    return {k: v for k, v in given.items() if v is not None}


_created_hooks: list[Callable[[YiemAgent], None]] = []


def on_agent_created(hook: Callable[[YiemAgent], None]) -> Callable[[], None]:
    """Call ``hook(agent)`` for every agent created from now on, once it is fully built (before
    its first run); return the function that removes the hook. This is how integrations attach
    to agents they are not given (``enable_tracing``): the agent imports none of them."""
    _created_hooks.append(hook)

    def remove() -> None:
        if hook in _created_hooks:
            _created_hooks.remove(hook)

    return remove


def run_agent(agent: YiemAgent, msg: Any) -> None:
    """Send a user message to ``agent`` (see ``YiemAgent.run_agent``)."""
    agent.run_agent(msg)


def follow_up(agent: YiemAgent, msg: Any) -> None:
    """Queue a follow-up message for ``agent`` (see ``YiemAgent.follow_up``)."""
    agent.follow_up(msg)


def resume(agent: YiemAgent) -> None:
    """Resume ``agent`` from its history (see ``YiemAgent.resume``)."""
    agent.resume()


def take_response(agent: YiemAgent, timeout: float | None = None) -> AssistantMessage:
    """Take the next response of ``agent`` (see ``YiemAgent.take_response``)."""
    return agent.take_response(timeout)

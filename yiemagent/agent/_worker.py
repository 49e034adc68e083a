"""The agent's worker: which message starts the next run, what joins a run, and delivery.

``AgentWorker`` owns what the worker thread touches: the channels, the state, the current run
config, the listeners and the settings changed during a run. It holds no reference to the
``YiemAgent`` that wraps it, so an agent dropped without ``shutdown()`` can be collected, and its
finalizer then stops the worker. Every decision is taken under the channels' one lock
(docs/design.md, decision 8): ``run_agent`` while idle starts a run and during a run joins it before
its next LLM call; ``follow_up`` starts a run of its own after the active run's response is out;
every run puts exactly one response on the output channel."""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from yiemagent.agent._approvals import check_decisions
from yiemagent.agent._channels import ChannelHub, MessageChannel, OutputChannel, Queued
from yiemagent.agent._session import SessionData
from yiemagent.agent._session import save_session as save_session_file
from yiemagent.agent._tool_sync import ToolSync
from yiemagent.core._approval import Decision, PausedBatch, paused_batch_from_dict, paused_belongs
from yiemagent.core._approval_batch import reassess
from yiemagent.core._emit import SafeEmitter
from yiemagent.core._loop import RunConfig, resume_problem, run_loop
from yiemagent.core._messages import AgentMessage, AssistantMessage, UserMessage
from yiemagent.core._tools import AbortSignal, AgentContext, AgentState
from yiemagent.core._usage import RunUsage
from yiemagent.errors import AgentClosedError, ApprovalError

__all__ = ["FOLLOW_UP_CAPACITY", "INPUT_CAPACITY", "OUTPUT_CAPACITY", "AgentWorker"]

INPUT_CAPACITY, FOLLOW_UP_CAPACITY, OUTPUT_CAPACITY = 16, 32, 16
SteeringMode = Literal["all", "one-at-a-time"]
logger = logging.getLogger("yiemagent")

_RESUME = "resume"


class _Job:
    """What the next run starts from: its first messages (none for a resume), the arrival
    numbers it answers, the resume problem that makes it an error response instead, and for a
    resume of a paused batch its decisions (``abort``: the batch is ended as aborted)."""

    __slots__ = ("abort", "approvals", "arrivals", "changes", "first", "problem")

    def __init__(
        self,
        first: list[AgentMessage],
        arrivals: set[int],
        problem: str | None = None,
        approvals: Mapping[str, Decision] | None = None,
        abort: bool = False,
        changes: Mapping[str, Any] | None = None,
    ) -> None:
        self.first = first
        self.arrivals = arrivals
        self.problem = problem
        self.approvals = approvals
        self.abort = abort
        self.changes = changes  # the run config's settings the prompt gave for its own run


class AgentWorker:
    """The stateful core of one agent, run by one worker thread (see the module docstring).

    State settings (``set_state``) made while a run is active are applied before its next LLM
    call, or when it ends; run settings (``config``) are read when a run starts.
    """

    def __init__(
        self,
        state: AgentState,
        config: RunConfig,
        emitter: SafeEmitter,
        tool_sync: ToolSync | None,
        steering_mode: SteeringMode,
        follow_up_mode: SteeringMode,
    ) -> None:
        self.hub = ChannelHub()
        self.cond = self.hub.changed
        self.input_channel = MessageChannel(INPUT_CAPACITY, self.hub)
        self.follow_up_channel = MessageChannel(FOLLOW_UP_CAPACITY, self.hub)
        self.output_channel = OutputChannel(OUTPUT_CAPACITY, self.hub)
        self.state = state
        self.config = config
        self.emitter = emitter
        self.tool_sync = tool_sync
        self.steering_mode = steering_mode
        self.follow_up_mode = follow_up_mode
        self.resumes: collections.deque[int] = collections.deque()  # arrival numbers
        self.resume_jobs: dict[int, tuple[Mapping[str, Decision] | None, bool]] = {}  # approvals, abort
        # arrival -> the run settings its prompt gave (output, usage_limits) for its own run
        self.run_options: dict[int, dict[str, Any]] = {}
        self.usage = RunUsage()  # every run's since construction or reset()
        self.session_file: str | None = None  # saved after every run and at approval checkpoints
        self.pending: dict[str, Callable[[], None]] = {}  # state settings made during a run
        self.history_mark: int | None = None  # history length when the active run began
        self.run_opened = 0  # arrival number from which messages may join the active run
        self.run_arrivals: set[int] = set()
        self.signal: AbortSignal | None = None
        self.config_of_run = config  # the config the active run started with
        self.after_stop: list[Callable[[], None]] = []  # run once the worker has ended
        self.thread = threading.Thread(target=self.loop, daemon=True, name="yiemagent-worker")

    def start(self, name: str) -> None:
        """Start the worker thread (named ``name``)."""
        self.thread.name = name
        self.thread.start()
        self.hub.worker = self.thread.ident

    # -- the worker thread -----------------------------------------------------------------

    def loop(self) -> None:
        """Take a job, run it, deliver its response; until shutdown. ``run_loop`` contains its
        failures; if the worker still ends abnormally (a ``KeyboardInterrupt``), the agent is
        closed so that senders and takers get ``AgentClosedError`` instead of hanging."""
        self.hub.enter_worker()
        try:
            while (job := self.next_job()) is not None:
                if job.problem is not None:
                    response = AssistantMessage(stop_reason="error", error_message=job.problem)
                else:
                    config = self.config_of_run
                    if job.changes:
                        config = attrs.evolve(config, **job.changes)
                    response = run_loop(
                        job.first,
                        self.state,
                        config,
                        self.emitter,
                        self.signal,
                        self.between_turns,
                        self.has_joining_input,
                        job.approvals,
                    )
                if response.run_usage is not None:
                    with self.cond:
                        self.usage = self.usage.plus(response.run_usage)
                self.save_session(full=True)
                self.deliver(response)
        finally:
            self.close()
            for callback in self.after_stop:
                try:
                    callback()
                except Exception:  # the thread is ending: log, never raise from here
                    logger.exception("a callback run after the agent stopped raised")

    def session_data(self, full: bool = False) -> SessionData:
        """The session as plain data: during a run with the history as it was before the run
        began (unless ``full``), and the batch waiting for approval, if any (a copy)."""
        state = self.state
        with self.cond:
            paused = state.paused_batch
            stored = None if paused is None else paused_batch_from_dict(paused.to_dict())
            messages = list(state.messages)
            mark = None if full else self.history_mark
        history = messages if mark is None else messages[:mark]
        if stored is not None and not paused_belongs(stored, history):
            stored = None  # saved while the run that paused was still going: not its history yet
        return SessionData(
            self.config.session_id or "", state.system_prompt, state.model, history, stored, self.usage
        )

    def save_session(self, full: bool = False) -> None:
        """Save the session to ``session_file`` when one is set: at the end of every run (before
        its response is out, so whoever takes it finds the file current; ``full``), and as the
        approval checkpoint while a paused batch runs. A failure at the end of a run is logged."""
        path = self.session_file
        if path is None:
            return
        if not full:
            save_session_file(self.session_data(), path)  # a checkpoint's failure is the caller's
            return
        try:
            save_session_file(self.session_data(full=True), path)
        except Exception:
            logger.exception("saving the session to %s after a run failed", path)

    def next_job(self) -> _Job | None:
        """Block until a message or resume starts a run (the earliest arrival, whichever channel
        it came through); mark the run active and return its job, or ``None`` once stopping."""
        with self.cond:
            while not self.hub.closed:
                job = self._pick_job()
                if job is not None:
                    self.run_opened = next(self.hub.arrivals)  # later sends join this run
                    self.run_arrivals = job.arrivals
                    self.state.active_run = True
                    self.history_mark = len(self.state.messages)
                    self.signal = AbortSignal()
                    if job.abort:
                        self.signal.abort("aborted while tool calls waited for approval")
                    self.config_of_run = self.config
                    self.cond.notify_all()
                    return job
                self.cond.wait()
            return None

    def _pick_job(self) -> _Job | None:
        heads = [
            (n, kind)
            for n, kind in (
                (self.input_channel.head_arrival(), "input"),
                (self.follow_up_channel.head_arrival(), "follow_up"),
                (self.resumes[0] if self.resumes else None, _RESUME),
            )
            if n is not None
        ]
        if not heads:
            return None
        _, kind = min(heads)
        if kind == _RESUME:
            number = self.resumes.popleft()
            approvals, abort = self.resume_jobs.pop(number, (None, False))
            paused = self._paused()
            if paused is not None:
                if approvals is None and not abort and paused.pending():
                    # A plain resume queued before the pause: it decides nothing.
                    waiting = ", ".join(p.tool_call_id for p in paused.pending())
                    problem = (
                        f"cannot resume: tool calls wait for approval ({waiting}); use resume(approvals=...)"
                    )
                    return _Job([], {number}, problem)
                decisions = None if abort else (approvals if approvals is not None else {})
                return _Job([], {number}, None, decisions, abort)
            return _Job([], {number}, resume_problem(self.state.messages))
        if kind == "input":
            number, msg = self.input_channel.take()
            return _Job([msg], {number})
        taken = [self.follow_up_channel.take()]
        changes = self.run_options.pop(taken[0][0], None)
        if changes is not None:  # a prompt with settings of its own has a run of its own
            return _Job([taken[0][1]], {taken[0][0]}, changes=changes)
        if self.follow_up_mode == "all":  # the follow-ups queued before anything else share it
            later = [n for n, _ in heads if n > taken[0][0]]
            limit = min(later) if later else None
            while (
                (head := self.follow_up_channel.head_arrival()) is not None
                and (limit is None or head < limit)
                and head not in self.run_options
            ):
                taken.append(self.follow_up_channel.take())
        return _Job([msg for _, msg in taken], {n for n, _ in taken})

    def between_turns(self) -> list[AgentMessage]:
        """The loop's ``take_input``: apply the settings changed during the run, then return
        the messages sent with ``run_agent`` since the run began (all of them, or the oldest
        one with ``steering_mode="one-at-a-time"``); none once shutting down. Messages queued
        before the run began stay: each of those starts a run of its own."""
        if not self.pending and not self.input_channel.queue:  # a lock-free peek, rechecked below
            return []
        with self.cond:
            self.apply_pending()
            queued = self.input_channel.queue
            if self.hub.closed or not queued or queued[-1][0] < self.run_opened:
                return []
            joining: list[Queued] = []
            for item in list(queued):
                if item[0] >= self.run_opened:
                    joining.append(item)
                    if self.steering_mode == "one-at-a-time":
                        break
            for item in joining:
                queued.remove(item)
                self.input_channel.unfinished_tasks = max(0, self.input_channel.unfinished_tasks - 1)
                self.run_arrivals.add(item[0])
            self.cond.notify_all()
            return [msg for _, msg in joining]

    def has_joining_input(self) -> bool:
        """Whether a message sent during the active run waits to join it."""
        with self.cond:
            queued = self.input_channel.queue
            return bool(queued) and queued[-1][0] >= self.run_opened and not self.hub.closed

    def deliver(self, response: AssistantMessage) -> None:
        """End the active run and put its response out, in one step. A response whose messages
        all came from prompts that timed out is not put out (it is in the history)."""
        with self.cond:
            self.apply_pending()
            self.state.active_run = False
            self.signal = None
            self.history_mark = None
            arrivals = frozenset(self.run_arrivals)
            abandoned = self.hub.abandoned
            unwanted = bool(arrivals) and arrivals <= abandoned
            abandoned -= arrivals
            if unwanted:
                self.cond.notify_all()
                return
            self.output_channel.deliver(response, arrivals)

    def close(self) -> None:
        """Mark the worker as ended: no new messages, takers stop waiting."""
        with self.cond:
            self.hub.closed = True
            self.hub.finished = True
            self.cond.notify_all()

    # -- called by the agent, from any thread --------------------------------------------

    def apply_pending(self) -> None:
        """Apply the state settings made during the run (with the lock held)."""
        if self.pending:
            changes, self.pending = self.pending, {}
            for apply in changes.values():
                apply()

    def set_state(self, name: str, apply: Callable[[], None]) -> None:
        """Run ``apply`` (which changes the state) now when no run is active, else before the
        active run's next LLM call; a later setting of the same ``name`` replaces it."""
        with self.cond:
            if self.state.active_run:
                self.pending[name] = apply
            else:
                apply()

    def _paused(self) -> PausedBatch | None:
        """The batch waiting for approval decisions, if any (with the lock held)."""
        paused = self.state.paused_batch
        return paused if paused is not None and not paused.settled else None

    def waiting_batch(self) -> PausedBatch | None:
        """The batch waiting for approval decisions, if any, with each call a tool of the agent
        (or its policy) now wants approved marked as waiting (``reassess``: a session file's
        flags never decide that). The tools' rules are asked without the lock held, so a rule
        may read the agent."""
        with self.cond:
            paused = self._paused()
            if paused is None:
                return None
            state = self.state
            context = AgentContext(state.system_prompt, list(state.messages), state.tools)
            policy = self.config.needs_approval
        reassess(paused, context, policy)
        return paused

    def request_resume(self, approvals: Mapping[str, Any] | None = None) -> None:
        """Queue a resume behind whatever is active or queued; when nothing is, check it now and
        raise ``ValueError`` saying why it cannot resume. While a batch waits for approval, the
        decisions are checked here (``ApprovalError`` names every problem) and nothing runs when
        they are refused; the agent must be idle then."""
        self.waiting_batch()  # every call the tools now want approved needs its decision
        with self.cond:
            if self.hub.closed:
                raise AgentClosedError("the agent was shut down; it takes no new messages")
            paused = self._paused()
            decisions: Mapping[str, Decision] | None = None
            if paused is not None:
                if self.busy():
                    raise ApprovalError(
                        "cannot resume with decisions now: the agent is running or has queued "
                        "messages, and a message sent during the pause supersedes it"
                    )
                decisions = check_decisions(paused, approvals, self.state.tools)
            elif approvals:
                raise ApprovalError("no tool calls are waiting for approval; resume() takes no approvals now")
            elif not self.busy():
                problem = resume_problem(self.state.messages)
                if problem is not None:
                    raise ValueError(problem)
            number = next(self.hub.arrivals)
            self.resumes.append(number)
            if decisions is not None:
                self.resume_jobs[number] = (decisions, False)
            self.cond.notify_all()

    def busy(self) -> bool:
        """Whether a run is active or anything is queued (with the lock held)."""
        return bool(
            self.state.active_run or self.input_channel.queue or self.follow_up_channel.queue or self.resumes
        )

    def clear_queues(self) -> list[UserMessage]:
        """Remove the queued messages and resumes; return the messages, in arrival order."""
        with self.cond:
            return self.drain_queues()

    def drain_queues(self) -> list[UserMessage]:
        """``clear_queues`` with the lock already held; a ``prompt`` waiting for one of the
        dropped messages is told so instead of waiting forever."""
        queued = self.input_channel.drain() + self.follow_up_channel.drain()
        self.hub.dropped.update(number for number, _ in queued)
        self.run_options.clear()
        self.resumes.clear()
        self.resume_jobs.clear()
        self.cond.notify_all()
        return [msg for _, msg in sorted(queued, key=lambda item: item[0])]

    def history_snapshot(self) -> list[AgentMessage]:
        """A copy of the history at a run boundary: during a run, the history as it was before
        the run began (a half-finished turn would not be a valid conversation to resume)."""
        with self.cond:
            messages = list(self.state.messages)
            mark = self.history_mark
        return messages if mark is None else messages[:mark]

    def abort(self, reason: str = "aborted by the caller") -> None:
        """Abort the active run, if any; while idle with a batch waiting for approval, end that
        batch as aborted (in a run of its own, whose response says so). Never raises."""
        with self.cond:
            signal = self.signal
            if signal is None and self._paused() is not None and not self.hub.closed:
                if self.resumes:  # decisions queued, not yet running: they give way to the abort
                    for number in self.resumes:
                        self.resume_jobs[number] = (None, True)
                elif not self.busy():
                    number = next(self.hub.arrivals)
                    self.resumes.append(number)
                    self.resume_jobs[number] = (None, True)
                self.cond.notify_all()
        if signal is not None:
            signal.abort(reason)

    def cancel(self, arrival: int, reason: str) -> None:
        """Withdraw message ``arrival``: still queued, it is dropped (a ``prompt`` waiting for it
        is told so); in the active run, that run is aborted (its response still comes out);
        already answered, nothing happens. Never raises."""
        with self.cond:
            if self.input_channel.remove(arrival) or self.follow_up_channel.remove(arrival):
                self.hub.dropped.add(arrival)
                self.run_options.pop(arrival, None)
                return
            signal = self.signal if arrival in self.run_arrivals else None
        if signal is not None:
            signal.abort(reason)

    def stop(self) -> list[UserMessage]:
        """Stop taking messages; return those queued and never processed, in arrival order."""
        with self.cond:
            self.hub.closed = True
            return self.drain_queues()

    def wait_for_idle(self, timeout: float | None) -> bool:
        """Wait until no run is active and nothing is queued; return whether that happened
        within ``timeout`` seconds (``True`` at once once the worker has ended)."""
        self.hub.check_not_worker("wait_for_idle")
        with self.cond:
            return self.cond.wait_for(lambda: self.hub.finished or not self.busy(), timeout)

    def describe_activity(self) -> str:
        """What the worker is doing, for a shutdown that gave up waiting."""
        state = self.state
        if state.pending_tool_calls:
            return f"a run executing tool calls {sorted(state.pending_tool_calls)}"
        return "a run waiting for llm_call or a hook" if state.active_run else "nothing"

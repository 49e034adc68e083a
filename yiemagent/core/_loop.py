"""One run of the agent loop, as a plain function: the six steps of spec section 6, repeated.

``run_loop(first, state, config, emit, signal, take_input)`` adds ``first`` to the history and
asks the model, runs the tool calls of its reply, and asks again, until the model answers without
tool calls, a batch terminates, the run is aborted or ``config.max_turns`` LLM calls were made.
It returns the run's single response and never raises (a ``KeyboardInterrupt`` aside): a failing
``llm_call``, ``prepare_context`` or ``format_msg_for_llm`` ends the run with an error response
(docs/design.md, decision 10). It knows nothing of agents, threads or channels: ``YiemAgent`` is a
shell of channels, a worker thread and settings around it, and tests drive it directly."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Literal

import attrs

from yiemagent.core._approval import Decision
from yiemagent.core._approval_batch import may_need_approval
from yiemagent.core._approval_gate import ApprovalRun, distinct_ids, run_batch
from yiemagent.core._content import AgentToolCall
from yiemagent.core._context import prepare_context as default_prepare_context
from yiemagent.core._context_overflow import with_overflow_hint
from yiemagent.core._context_window import (
    ContextCount,
    ContextMeter,
    ContextOverflow,
    ContextRun,
    TokenCounter,
    check_strategy,
    listed_window,
)
from yiemagent.core._emit import Emit, SafeEmitter, safe_emitter
from yiemagent.core._events import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from yiemagent.core._llm_keywords import LLM_KEYWORDS, accepted_keywords, keywords_for_llm
from yiemagent.core._messages import (
    AgentMessage,
    AssistantMessage,
    HistoryView,
    ToolResultMessage,
    now_ms,
)
from yiemagent.core._output import OutputSpec, batch_output_response, output_run
from yiemagent.core._repeated_calls import RepeatedCalls, check_max_repeated_calls
from yiemagent.core._request import LlmRequest, SpecFormatter
from yiemagent.core._responses import ABORTED, build_terminated_response, runtime_response
from yiemagent.core._result_caps import cap_result, check_cap
from yiemagent.core._run_points import RunFeature, RunPoints
from yiemagent.core._session_id import check_whole_session_id
from yiemagent.core._tool_calls import extract_tool_calls, new_tool_call_id, normalize_tool_calls
from yiemagent.core._tools import (
    AbortSignal,
    AfterHook,
    AgentContext,
    AgentLoopConfig,
    AgentState,
    AgentToolCallBatch,
    AgentToolResult,
    BeforeHook,
    positive_int,
)
from yiemagent.core._usage import Prices, RunUsage, UsageLimits, price_table, run_budget
from yiemagent.errors import RunError, describe_error, reraise_interrupt

__all__ = [
    "ABORTED",
    "LLM_KEYWORDS",
    "ContextOverflow",
    "RunConfig",
    "build_terminated_response",
    "resume_problem",
    "run_features",
    "run_loop",
    "unanswered_tool_calls",
]

logger = logging.getLogger("yiemagent")

AWAITING_APPROVAL = "awaiting_approval"
ToolSync = Callable[[AgentState, Sequence[str]], None]
FeatureMaker = Callable[[AgentState, "RunConfig"], RunFeature]  # a run-time object for each run


def _no_input() -> list[AgentMessage]:
    return []


def _check_callable(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{attr.name} must be callable, got {type(value).__name__}")


def _check_positive_int(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attr.name == "max_turns":
        raise ValueError("max_turns must be a positive int, got None")
    positive_int(attr.name, value)


def _check_session_id(_inst: Any, _attr: Any, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"session_id must be a string or None, got {type(value).__name__}")
    check_whole_session_id(value)  # it is sent to providers as UTF-8


@attrs.frozen(kw_only=True)
class RunConfig:
    """Everything ``run_loop`` reads besides the state: built and checked once, replaced (with
    ``attrs.evolve``) when a setting changes, never changed in place.

    ``llm_call(request, **kw)`` gets, as keywords and only when its signature declares them (or
    ``**kwargs``): ``on_update`` (streamed ``MessageUpdateEvent``s), ``signal``,
    ``max_retry_delay_ms`` (when set) and ``session_id`` (when set); ``llm_keywords`` records
    which, and is recomputed whenever ``llm_call`` is replaced. ``sync_tools(state, added)``,
    when set, is called before every LLM call with the names that tool results added since
    the last one (the agent uses it to follow its tool store). ``max_repeated_calls`` (default
    2, ``None`` for no limit) is in how many turns one run may call a tool with the same
    prepared arguments (identical calls of one reply count once); a further call gets a
    ``repeated_call`` error result saying the model already has that result, which stops a
    small model that loops. ``skip_tools_on_steer`` makes
    the calls not yet started in a sequential batch give way to a message that arrived during
    the batch. ``clock()`` (milliseconds) stamps the messages the loop makes (tool results, its
    own responses) and ``new_tool_call_id()`` names the tool calls a reply sent without an id;
    they default to ``messages.now_ms`` and ``tool_calls.new_tool_call_id``, and conformance
    runs replace them to get reproducible traces. ``needs_approval(tool, args, context)`` is the
    agent's approval policy and ``approval_checkpoint()`` saves the session while a paused batch
    runs (docs/approval.md). ``output``, when set, makes the run end in data matching its
    schema (docs/output.md). ``usage_limits`` end a run with ``stop_reason="usage_limit"``
    before it would pass one, and ``prices`` (model -> ``Prices``) price its replies
    (docs/budgets.md). ``context_window`` (tokens; or read once per run from ``window_source``
    when not given) and ``context_strategy`` keep each request inside the model's window, measured
    by ``count_tokens(text)`` where given (the model's tokenizer), else estimated; ``meter`` holds
    those counts for the history, for one run at a time (a run of the same config in another
    thread meanwhile counts on a meter of its own). ``features`` makes, for each run, more
    run-time objects (``RunFeature``: a journal, a parent run's forwarding) that meet the loop
    at its points after the built-in ones. Invalid settings raise ``TypeError`` or
    ``ValueError`` at construction.
    """

    llm_call: Callable[..., AssistantMessage] = attrs.field(validator=_check_callable)
    prepare_context: Callable[[AgentState], Any] = attrs.field(
        default=default_prepare_context, validator=_check_callable
    )
    format_msg_for_llm: Callable[[Any], Any] = attrs.field(factory=SpecFormatter, validator=_check_callable)
    before_tool_call: BeforeHook | None = attrs.field(default=None, validator=_check_callable)
    after_tool_call: AfterHook | None = attrs.field(default=None, validator=_check_callable)
    tool_execution: Literal["sequential", "parallel"] = "sequential"
    tool_timeout_s: float | None = None
    max_parallel_tools: int | None = None
    max_turns: int = attrs.field(default=50, validator=_check_positive_int)
    max_repeated_calls: int | None = attrs.field(default=2, converter=check_max_repeated_calls)
    session_id: str | None = attrs.field(default=None, validator=_check_session_id)
    max_retry_delay_ms: float | None = None
    skip_tools_on_steer: bool = attrs.field(default=False, converter=bool)
    sync_tools: ToolSync | None = attrs.field(default=None, validator=_check_callable)
    clock: Callable[[], int] = attrs.field(default=now_ms, validator=_check_callable)
    new_tool_call_id: Callable[[], str] = attrs.field(default=new_tool_call_id, validator=_check_callable)
    needs_approval: Callable[..., bool] | None = attrs.field(default=None, validator=_check_callable)
    approval_checkpoint: Callable[[], None] | None = attrs.field(default=None, validator=_check_callable)
    output: OutputSpec | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(OutputSpec))
    )
    usage_limits: UsageLimits | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(UsageLimits))
    )
    prices: dict[str, Prices] = attrs.field(factory=dict, converter=price_table)
    max_tool_result_chars: int | None = None
    context_window: int | None = None
    context_strategy: Any = attrs.field(default="error", converter=check_strategy)
    count_tokens: TokenCounter | None = attrs.field(default=None, validator=_check_callable)
    window_source: Callable[[], int | None] | None = attrs.field(default=None, validator=_check_callable)
    features: tuple[FeatureMaker, ...] = attrs.field(default=(), converter=tuple)
    llm_keywords: frozenset[str] = attrs.field(init=False)
    # Kept across the runs of the config, and by attrs.evolve (an agent's per-prompt options and
    # settings): a history is counted once, not per run. A new count_tokens gets a new meter.
    meter: ContextMeter = attrs.field(factory=ContextMeter, kw_only=True, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.llm_call is None:
            raise TypeError("llm_call is required: a callable(request) -> AssistantMessage")
        if self.max_retry_delay_ms is not None and (
            isinstance(self.max_retry_delay_ms, bool)
            or not isinstance(self.max_retry_delay_ms, (int, float))
            or not self.max_retry_delay_ms >= 0
        ):
            raise ValueError(
                f"max_retry_delay_ms must be a non-negative number or None, got {self.max_retry_delay_ms!r}"
            )
        self.tool_loop_config({})  # checks the tool options here, not at the first batch
        check_cap("max_tool_result_chars", self.max_tool_result_chars)
        if self.context_window is not None:
            positive_int("context_window", self.context_window)
        object.__setattr__(self, "llm_keywords", accepted_keywords(self.llm_call))
        if self.meter.count != self.count_tokens:
            object.__setattr__(self, "meter", ContextMeter(self.count_tokens))

    def tool_loop_config(
        self,
        tools: Any,
        skip_remaining: Callable[[], bool] | None = None,
        repeated_calls: RepeatedCalls | None = None,
        refused_by_limit: Callable[[AgentToolCall], AgentToolResult | None] | None = None,
    ) -> AgentLoopConfig:
        """The pipeline's ``AgentLoopConfig`` for ``tools`` (shared, not copied)."""
        return AgentLoopConfig(
            tools,
            self.before_tool_call,
            self.after_tool_call,
            self.tool_execution,
            self.tool_timeout_s,
            self.max_parallel_tools,
            skip_remaining=skip_remaining,
            clock=self.clock,
            repeated_calls=repeated_calls,
            refused_by_limit=refused_by_limit,
            needs_approval=self.needs_approval,
            approval_checkpoint=self.approval_checkpoint,
        )


def unanswered_tool_calls(
    messages: Sequence[AgentMessage],
) -> tuple[AssistantMessage | None, list[AgentToolCall]]:
    """The last assistant message of ``messages`` and those of its tool calls that no later
    tool result answers (``(None, [])`` when there is no assistant message, or a user message
    follows the last one)."""
    answered: set[str] = set()
    for msg in reversed(messages):
        if isinstance(msg, ToolResultMessage):
            answered.add(msg.tool_call_id)
        elif isinstance(msg, AssistantMessage):
            _, calls = extract_tool_calls(msg.content)
            return msg, [c for c in calls if c.id not in answered]
        else:
            return None, []
    return None, []


def resume_problem(messages: Sequence[AgentMessage]) -> str | None:
    """Why a run cannot resume from ``messages`` with no new message, or ``None`` when it can:
    the history must end with a user message, a tool result, or an assistant message whose
    tool calls are not all answered."""
    if not messages:
        return "cannot resume: the history is empty; send a message instead"
    last = messages[-1]
    if isinstance(last, AssistantMessage):
        _, pending = unanswered_tool_calls(messages)
        if not pending:
            return (
                "cannot resume: the history ends with the model's answer and no tool call is "
                "left unanswered; send a new message instead"
            )
    return None


def run_features(
    state: AgentState, config: RunConfig, approvals: Mapping[str, Decision] | None
) -> list[RunFeature]:
    """The run-time objects of one run's features, in the order the loop calls them at each
    point: the output, the context window, approval, usage and limits, then the config's own
    (``RunConfig.features``). A feature the config does not use is left out."""
    extra = [make(state, config) for make in config.features]  # first: one may fail
    features: list[RunFeature] = []
    if config.output is not None:
        features.append(output_run(config.output))
    context = _context_run(config)
    if context is not None:
        features.append(context)
    features.append(ApprovalRun(approvals))
    estimate = context.next_call_tokens if context is not None else None
    features.append(run_budget(config.prices, config.usage_limits, estimate, state.paused_batch))
    return features + extra


def _context_run(config: RunConfig) -> ContextCount | None:
    """The context window's run-time object, when the run has a window (given, or read from
    ``window_source``) or a strategy other than ``"error"``; its count alone for a run with
    limits (which estimate the next call by it); else ``None``."""
    window = config.context_window
    if window is None and config.window_source is not None:
        window = listed_window(config.window_source)
    if window is None and config.context_strategy == "error":
        return None if config.usage_limits is None else ContextCount(config.meter, config.count_tokens)
    return ContextRun(config.meter, window, config.context_strategy, config.count_tokens)


class _Run:
    """One run: the shared state, config, sink and signal, the features' points, what the run
    added, and the caches of a turn (the hooks' context, the pipeline's config)."""

    __slots__ = (
        "added",
        "added_tools",
        "config",
        "emit",
        "hooks",
        "llm_keywords",
        "points",
        "reply_started",
        "signal",
        "state",
        "tool_loop",
    )

    def __init__(
        self,
        state: AgentState,
        config: RunConfig,
        emit: SafeEmitter,
        signal: AbortSignal,
        has_input: Callable[[], bool] | None,
        features: Sequence[RunFeature],
    ) -> None:
        self.state = state
        self.config = config
        self.emit = emit
        self.signal = signal
        self.points = RunPoints(features)
        self.added: list[AgentMessage] = []
        self.added_tools: list[str] = []
        self.reply_started = False  # a MessageStartEvent for the model's reply is out
        self.llm_keywords = keywords_for_llm(config, emit, signal)
        # (the context the hooks see, its view, the history list it shows)
        self.hooks: tuple[AgentContext | None, HistoryView | None, list[AgentMessage] | None]
        self.hooks = (None, None, None)
        limit = config.max_repeated_calls
        refusals = self.points.refusal
        self.tool_loop = config.tool_loop_config(
            self.batch_tools(),
            has_input if config.skip_tools_on_steer else None,
            RepeatedCalls(limit) if limit is not None else None,
            (refusals[0] if len(refusals) == 1 else partial(_first_refusal, refusals)) if refusals else None,
        )

    def add(self, msg: AgentMessage, started: bool = False) -> None:
        """Append a message to the history, with its start (unless ``started``) and end events."""
        emit = self.emit
        if emit.active and not started:
            emit.send(MessageStartEvent(msg))
        self.state.messages.append(msg)
        self.added.append(msg)
        if emit.active:
            emit.send(MessageEndEvent(msg))

    def made_up(self, stop_reason: str, error_message: str | None) -> AssistantMessage:
        """A response the runtime makes itself (error, aborted, max_turns); not added to history."""
        return runtime_response(self.state, stop_reason, error_message, self.config.clock())

    def call_llm(self) -> AssistantMessage:
        """Steps 2-4: prepare the context, format it and call the model.

        Raises ``RunError`` naming the step (``prepare_context``, ``context_window``,
        ``format_msg_for_llm`` or ``llm_call``) and the exception's type and text; a provider's
        refusal of a context that is too long also says what to do about it."""
        config, points = self.config, self.points
        step = "prepare_context"
        try:
            ctx = config.prepare_context(self.state)
            step = "context_window"  # measuring may run the model's tokenizer: its failure is named
            for prepare in points.prepare:
                ctx = prepare(self, ctx)
            step = "format_msg_for_llm"
            request = config.format_msg_for_llm(ctx)
            if type(request) is LlmRequest and request.session_id is None:
                request.session_id = config.session_id
            for shape in points.request:
                shape(self, request)
            if self.emit.active:
                self.emit.send(MessageStartEvent(None))
            self.reply_started = True
            step = "llm_call"
            response = config.llm_call(request, **self.llm_keywords)
        except ContextOverflow:
            raise
        except BaseException as exc:
            reraise_interrupt(exc)
            problem = f"{step} failed: {describe_error(exc)}"
            raise RunError(with_overflow_hint(problem) if step == "llm_call" else problem) from exc
        if not isinstance(response, AssistantMessage):
            raise RunError(f"llm_call returned {type(response).__name__}; it must return an AssistantMessage")
        return response

    def call_model(self) -> AssistantMessage:
        """``call_llm``; a failure goes to the ``call_failed`` points, and the call is made once
        more when one asks for it (a context the provider refused, shrunk)."""
        try:
            return self.call_llm()
        except RunError as exc:
            if not self.failed(exc):
                raise
        self.reply_started = False
        try:
            return self.call_llm()
        except RunError as exc:
            self.failed(exc)
            raise

    def failed(self, exc: RunError) -> bool:
        """Tell the features a model call failed; whether one asks to make it again."""
        again = False
        for point in self.points.call_failed:
            again = point(self, exc, self.reply_started) or again
        return again

    def batch_tools(self) -> Any:
        """The tools a batch may call and its hooks see: the state's, through the ``tools``
        points (the output tool added)."""
        tools = self.state.tools
        for point in self.points.tools:
            tools = point(self, tools)
        return tools

    def tool_config(self) -> AgentLoopConfig:
        """The run's pipeline config, rebuilt only when the tools mapping is replaced."""
        cached, tools = self.tool_loop, self.batch_tools()
        if cached.tools is not tools:
            cached = self.tool_loop = self.config.tool_loop_config(
                tools, cached.skip_remaining, cached.repeated_calls, cached.refused_by_limit
            )
        return cached

    def hooks_context(self) -> AgentContext:
        """The context the hooks see: the prompt, a read-only live view of the history (they
        cannot clear it) and the tools. One serves every batch of the run while it still shows
        the state as it is; a new prompt, tools or history list, or a hook that changed a field
        of it, gets a new one."""
        state = self.state
        context, view, source = self.hooks
        # Every field of AgentContext is checked (tests/core/test_hot_path_shortcuts.py fails when
        # one is added).
        tools = self.batch_tools()
        if (
            context is None
            or source is not state.messages
            or context.messages is not view
            or context.tools is not tools
            or context.system_prompt != state.system_prompt
        ):
            view = HistoryView(state.messages)
            context = AgentContext(state.system_prompt, view, tools)
            self.hooks = (context, view, state.messages)
        return context

    def run_tools(
        self, reply: AssistantMessage, calls: list[AgentToolCall], gated: bool
    ) -> AgentToolCallBatch:
        """Step 6: run the calls of ``reply`` (or, ``gated``: when one may need approval, pause
        them), after the ``before_batch`` points."""
        state = self.state
        for point in self.points.before_batch:
            point(self, calls)
        state.pending_tool_calls = {call.id for call in calls}
        try:
            return run_batch(self, self.hooks_context(), reply, calls, self.tool_config(), gated)
        finally:
            state.pending_tool_calls = set()

    def add_results(self, batch: AgentToolCallBatch) -> None:
        """Add a batch's result messages to the history (each capped to its tool's
        ``max_tool_result_chars``, else the run's), noting the tools they added."""
        default = self.config.max_tool_result_chars
        tools = self.state.tools
        for msg in batch.messages:
            tool = tools.get(msg.tool_name)
            cap = tool.max_tool_result_chars if tool is not None and tool.max_tool_result_chars else default
            if cap is not None:
                msg = cap_result(msg, cap)
            self.add(msg)
            if msg.added_tool_names:
                self.added_tools.extend(msg.added_tool_names)

    def batch_done(self, reply: AssistantMessage, batch: AgentToolCallBatch) -> None:
        """Give a batch to the ``after_batch`` points and add its results (none while paused)."""
        for done in self.points.after_batch:
            done(self, reply, batch)
        if batch.paused is None:
            self.add_results(batch)

    def finish_batch(self, reply: AssistantMessage, batch: AgentToolCallBatch) -> AssistantMessage | None:
        """``batch_done``; the run's response when the batch ends the run, else ``None``."""
        self.batch_done(reply, batch)
        return self.outcome(reply, batch)

    def outcome(self, reply: AssistantMessage, batch: AgentToolCallBatch | None) -> AssistantMessage | None:
        """Whether the run ends after ``reply`` and its batch (``None`` when it had no calls):
        the run's response, or ``None`` to go on. An abort ends it; a reply without calls ends
        it as the ``answer`` points have it; else the ``verdict`` points (an output, a limit),
        then the batch's own output, or its ``terminate``."""
        if self.signal.aborted:
            return self.made_up("aborted", ABORTED)
        if batch is None:
            for answer in self.points.answer:
                kept = answer(self, reply)
                if kept is None:
                    return None
                reply = kept
            return reply
        for verdict in self.points.verdict:
            ended = verdict(self, reply, batch)
            if ended is not None:
                return ended
        if batch.output is not None:
            return batch_output_response(self, reply, batch, None)
        if batch.terminate:
            return build_terminated_response(batch, reply, self.config.clock())
        return None

    def play_turn(self) -> AssistantMessage | None:
        """One turn: ask the model, record its reply, run its tool calls. Returns the run's
        response when the run ends in this turn, else ``None``. Every event the turn opens is
        closed."""
        self.reply_started = False
        try:
            reply = self.call_model()
        except ContextOverflow as exc:
            return self.end_turn(self.made_up("context_overflow", str(exc)))
        except RunError as exc:
            return self.end_turn(self.failed_call(exc))
        reply = normalize_tool_calls(reply, self.config.new_tool_call_id)
        has_calls, calls = extract_tool_calls(reply.content)
        gated = has_calls and may_need_approval(calls, self.hooks_context(), self.tool_config())
        if gated:
            reply, calls = distinct_ids(self, reply, calls)
        for shape in self.points.after_reply:
            reply = shape(self, reply)
        self.add(reply, started=True)
        if not has_calls:
            self.end_turn(reply)
            return self.outcome(reply, None)
        # After an abort the calls still get (aborted) results, so the history stays well formed.
        batch = self.run_tools(reply, calls, gated)
        self.batch_done(reply, batch)
        self.end_turn(reply, batch)
        return self.made_up(AWAITING_APPROVAL, None) if batch.paused else self.outcome(reply, batch)

    def failed_call(self, exc: RunError) -> AssistantMessage:
        """The run's response after a failed model call (its ``message_end`` when the model
        was called): an abort makes the client give up, so then the abort is the outcome."""
        aborted = self.signal.aborted
        ended = self.made_up("aborted", ABORTED) if aborted else self.made_up("error", str(exc))
        if self.emit.active and self.reply_started:
            self.emit.send(MessageEndEvent(ended))
        return ended

    def end_turn(self, reply: AssistantMessage, batch: AgentToolCallBatch | None = None) -> AssistantMessage:
        """Send the turn's ``turn_end`` event; returns ``reply``."""
        if self.emit.active:
            self.emit.send(TurnEndEvent(reply, batch.messages if batch is not None else []))
        return reply

    def finish_pending_calls(self) -> AssistantMessage | None:
        """On a resume: run the tool calls of the history's last reply that have no result yet,
        as the turn they belong to would have. Returns the run's response when that ends it."""
        reply, pending = unanswered_tool_calls(self.state.messages)
        if reply is None or not pending:
            return None
        batch = self.run_tools(
            reply, pending, may_need_approval(pending, self.hooks_context(), self.tool_config())
        )
        self.batch_done(reply, batch)
        if batch.paused is not None:  # no turn was opened for these calls: none is closed
            return self.made_up(AWAITING_APPROVAL, None)
        return self.outcome(reply, batch)

    def turns(self, take_input: Callable[[], list[AgentMessage]]) -> AssistantMessage:
        """Turns until the run ends (see ``run_loop``), after the ``start`` points and the
        calls a resume finds unanswered."""
        config, turn = self.config, 0
        for start in self.points.start:
            ended = start(self)
            if ended is not None:
                return ended
        ended = self.finish_pending_calls()
        while ended is None:
            if self.signal.aborted:
                return self.made_up("aborted", ABORTED)
            if turn >= config.max_turns:
                return self.made_up(
                    "max_turns", f"Stopped after {config.max_turns} LLM calls (max_turns={config.max_turns})."
                )
            for msg in take_input():  # step 1: messages sent during the run join it here
                self.add(msg)
            self.sync_tools()
            for before in self.points.before_turn:
                ended = before(self)
                if ended is not None:
                    return ended
            turn += 1
            if self.emit.active:
                self.emit.send(TurnStartEvent(turn))
            ended = self.play_turn()
        return ended

    def sync_tools(self) -> None:
        """Tell ``config.sync_tools`` the tools results added since it last heard."""
        if self.config.sync_tools is not None:
            added, self.added_tools = self.added_tools, []
            self.config.sync_tools(self.state, added)


def _first_refusal(
    refusals: Sequence[Callable[[AgentToolCall], AgentToolResult | None]], call: AgentToolCall
) -> AgentToolResult | None:
    """The first refusal of ``call`` among several features' ``refusal`` points."""
    for refusal in refusals:
        result = refusal(call)
        if result is not None:
            return result
    return None


def run_loop(
    first: Iterable[AgentMessage],
    state: AgentState,
    config: RunConfig,
    emit: Emit | None = None,
    signal: AbortSignal | None = None,
    take_input: Callable[[], list[AgentMessage]] = _no_input,
    has_input: Callable[[], bool] | None = None,
    approvals: Mapping[str, Decision] | None = None,
) -> AssistantMessage:
    """Run one run on ``state`` and return its single response; never raises (except a
    ``KeyboardInterrupt``).

    ``first`` (the messages that start the run, usually one user message; empty to resume from
    the history as it is) joins the history. Then the loop asks the model and runs the tool
    calls of each reply until the model answers without calls, a batch terminates
    (``stop_reason="tool_use_terminated"``), ``signal`` is aborted (``"aborted"``),
    ``config.max_turns`` LLM calls were made (``"max_turns"``) or a step fails (``"error"``,
    with ``error_message`` naming the step). On a resume, tool calls of the last reply that have
    no result yet run first. ``take_input()`` is called before every LLM call and returns the
    messages that join the run there; ``has_input()`` tells whether one is waiting (used by
    ``skip_tools_on_steer``). Every event goes to ``emit`` (wrapped in a ``SafeEmitter``),
    every message the run adds is appended to ``state.messages``, and ``state.error_message``
    records an error response's message. A batch whose calls need approval pauses the run
    (``stop_reason="awaiting_approval"``, the batch in ``state.paused_batch``); the next run
    first finishes it with ``approvals`` (a resume), as aborted (its signal already aborted), or
    as superseded by the messages in ``first``. The run's usage is the response's
    ``run_usage``. The features meet the run at the points of ``RunFeature``.
    """
    sink, signal = safe_emitter(emit), signal or AbortSignal()
    try:
        run = _Run(state, config, sink, signal, has_input, run_features(state, config, approvals))
    except BaseException as exc:  # a feature that could not be made: the run fails, as a run
        reraise_interrupt(exc)
        return _failed_to_start(state, config, sink, exc)
    ended = False
    try:
        response = _run(run, first, take_input)
        for end in run.points.end:
            end(run, response)
        ended = True
        state.error_message = response.error_message if response.stop_reason == "error" else None
        if sink.active:
            sink.send(AgentEndEvent(list(run.added), response=response))
        return response
    finally:
        if not ended:
            for end in run.points.end:
                end(run, None)


def _run(
    run: _Run, first: Iterable[AgentMessage], take_input: Callable[[], list[AgentMessage]]
) -> AssistantMessage:
    """The body of ``run_loop`` (see it), on a ``run`` made for it."""
    if run.emit.active:
        run.emit.send(AgentStartEvent())
    try:
        first = _checked_messages(first)
        ended = None
        for resume in run.points.resume:
            ended = ended or resume(run)
        for msg in first:
            run.add(msg)
        response = ended if ended is not None else run.turns(take_input)
        if run.added_tools and run.config.sync_tools is not None:  # tools added in the last turn
            run.config.sync_tools(run.state, run.added_tools)
    except BaseException as exc:  # defensive: the steps above contain their own failures
        reraise_interrupt(exc)
        response = run.made_up("error", f"the run failed: {describe_error(exc)}")
    return response


def _checked_messages(first: Iterable[AgentMessage]) -> list[AgentMessage]:
    """``first`` as a list; ``TypeError`` for anything in it that is not a message."""
    messages = list(first)
    for msg in messages:
        if not isinstance(msg, AgentMessage):
            raise TypeError(f"a run starts from messages, got {type(msg).__name__}")
    return messages


def _failed_to_start(
    state: AgentState, config: RunConfig, sink: SafeEmitter, exc: BaseException
) -> AssistantMessage:
    """The error response of a run whose features could not be made, with its start and end
    events."""
    response = runtime_response(state, "error", f"the run failed: {describe_error(exc)}", config.clock())
    object.__setattr__(response, "run_usage", RunUsage(runs=1))
    state.error_message = response.error_message
    if sink.active:
        sink.send(AgentStartEvent())
        sink.send(AgentEndEvent([], response=response))
    return response

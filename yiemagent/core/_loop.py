"""One run of the agent loop, as a plain function: the six steps of spec section 6, repeated.

``run_loop(first, state, config, emit, signal, take_input)`` adds ``first`` to the history and
asks the model, runs the tool calls of its reply, and asks again, until the model answers without
tool calls, a batch terminates, the run is aborted or ``config.max_turns`` LLM calls were made.
It returns the run's single response and never raises (a ``KeyboardInterrupt`` aside): a failing
``llm_call``, ``prepare_context`` or ``format_msg_for_llm`` ends the run with an error response
(docs/design.md, decision 10). It knows nothing of agents, threads or channels: ``YiemAgent`` is a
shell of channels, a worker thread and settings around it, and tests drive it directly."""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from yiemagent.core._approval import Decision
from yiemagent.core._approval_batch import may_need_approval, prepare_or_pause, settle_paused_batch
from yiemagent.core._content import AgentToolCall, ContentBlock, TextContent, content_text
from yiemagent.core._context import prepare_context as default_prepare_context
from yiemagent.core._context_overflow import looks_like_context_overflow, with_overflow_hint
from yiemagent.core._context_window import (
    TRIM_GOAL,
    ContextMeter,
    TokenCounter,
    budget_of,
    check_strategy,
    head_end,
    history_problem,
    kept_from,
    trim,
)
from yiemagent.core._emit import Emit, SafeEmitter, safe_emitter
from yiemagent.core._error_kinds import ABORTED as ABORTED_KIND
from yiemagent.core._error_kinds import ERROR_KIND_KEY, SKIPPED, USAGE_LIMIT
from yiemagent.core._events import (
    AgentEndEvent,
    AgentStartEvent,
    ApprovalRequestedEvent,
    MessageEndEvent,
    MessageStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from yiemagent.core._messages import (
    AgentMessage,
    AssistantMessage,
    HistoryView,
    LlmUsage,
    ToolResultMessage,
    UserMessage,
    now_ms,
)
from yiemagent.core._output import OutputSpec
from yiemagent.core._output_json import output_json
from yiemagent.core._pipeline import create_error_tool_result, execute_tool_calls
from yiemagent.core._repeated_calls import RepeatedCalls, check_max_repeated_calls
from yiemagent.core._request import LlmRequest, SpecFormatter
from yiemagent.core._result_caps import cap_result, check_cap
from yiemagent.core._session_id import check_whole_session_id
from yiemagent.core._spec_format import response_format_view
from yiemagent.core._tool_calls import (
    distinct_from,
    extract_tool_calls,
    new_tool_call_id,
    normalize_tool_calls,
    used_tool_call_ids,
)
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
from yiemagent.core._usage import Prices, RunUsage, UsageLimits, price_table
from yiemagent.errors import RunError, describe_error, reraise_interrupt

__all__ = [
    "ABORTED",
    "LLM_KEYWORDS",
    "RunConfig",
    "build_terminated_response",
    "resume_problem",
    "run_loop",
    "unanswered_tool_calls",
]

logger = logging.getLogger("yiemagent")

ABORTED = "The run was aborted."
AWAITING_APPROVAL = "awaiting_approval"
LLM_KEYWORDS = ("on_update", "signal", "max_retry_delay_ms", "session_id")
ToolSync = Callable[[AgentState, Sequence[str]], None]


def _no_input() -> list[AgentMessage]:
    return []


def accepted_keywords(fn: Callable[..., Any]) -> frozenset[str]:
    """Which of ``LLM_KEYWORDS`` ``fn`` declares (all of them when it takes ``**kwargs``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return frozenset(LLM_KEYWORDS)
    names = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
    return frozenset(k for k in LLM_KEYWORDS if k in names)


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
    thread meanwhile counts on a meter of its own). Invalid settings raise ``TypeError`` or
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


class ContextOverflow(Exception):
    """The request cannot be made to fit the context window: the run ends with
    ``stop_reason="context_overflow"`` and this message, before anything is sent."""


class _Run:
    """The working state of one run: the shared state, config, sink, signal and what it added."""

    __slots__ = (
        "added",
        "added_tools",
        "config",
        "context_mark",
        "emit",
        "hook_context",
        "last_model",
        "limit_hit",
        "limits_calls",
        "llm_keywords",
        "loop_config",
        "measured",
        "meter",
        "output",
        "output_failures",
        "output_tools",
        "refused",
        "repeated_calls",
        "reply_started",
        "sent_estimate",
        "shrink",
        "signal",
        "skip_remaining",
        "started",
        "state",
        "usage",
        "window",
        "window_budget",
    )

    def __init__(
        self,
        state: AgentState,
        config: RunConfig,
        emit: SafeEmitter,
        signal: AbortSignal,
        has_input: Callable[[], bool] | None,
    ) -> None:
        self.state = state
        self.config = config
        self.emit = emit
        self.signal = signal
        self.added: list[AgentMessage] = []
        self.added_tools: list[str] = []
        self.loop_config: AgentLoopConfig | None = None
        self.hook_context: tuple[AgentContext | None, HistoryView | None, list[AgentMessage] | None] = (
            None,
            None,
            None,
        )
        self.reply_started = False  # a MessageStartEvent for the model's reply is out
        self.skip_remaining = has_input if config.skip_tools_on_steer else None
        limit = config.max_repeated_calls
        self.repeated_calls = RepeatedCalls(limit) if limit is not None else None
        self.limits_calls = config.usage_limits is not None and config.usage_limits.limits_tool_calls
        self.refused: dict[int, AgentToolResult] = {}  # the batch's calls a tool-call limit stops
        self.llm_keywords = self.keywords_for_llm()
        self.output = config.output
        self.output_failures = 0
        # The state's tools with the output tool, rebuilt when the state's mapping is replaced.
        self.output_tools: tuple[Any, dict[str, Any]] | None = None
        self.usage = RunUsage(runs=1)
        self.started = time.monotonic()
        self.limit_hit: str | None = None  # a tool-call limit the last batch reached
        # (tokens the provider counted in the last reply's context, history length then)
        self.context_mark: tuple[int, int] | None = None
        self.last_model = ""  # the model of the run's last reply
        self.meter = config.meter.for_run()  # given back when the run ends (run_loop)
        self.window = config.context_window
        if self.window is None and config.window_source is not None:
            self.window = _listed_window(config.window_source)
        self.window_budget = budget_of(self.window or 0)
        self.shrink: int | None = None  # the budget after a provider refused the context
        self.measured = 0  # the tokens of the last request, as measured (and scaled) before it went
        self.sent_estimate = 0  # the last request as the meter measured it, before scaling

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
        model = self.state.model
        return AssistantMessage(
            content=[],
            model=model.name if model is not None else "",
            provider=model.provider if model is not None else "",
            api=model.api if model is not None else "",
            stop_reason=stop_reason,
            error_message=error_message,
            timestamp=self.config.clock(),
        )

    def call_llm(self) -> AssistantMessage:
        """Steps 2-4: prepare the context, format it and call the model.

        Raises ``RunError`` naming the step (``prepare_context``, ``format_msg_for_llm`` or
        ``llm_call``) and the exception's type and text; a provider's refusal of a context
        that is too long also says what to do about it (``context_overflow``).
        """
        config = self.config
        step = "prepare_context"
        try:
            ctx = config.prepare_context(self.state)
            output = self.output
            if output is not None and output.mode == "tool" and isinstance(ctx, AgentContext):
                ctx = AgentContext(ctx.system_prompt, ctx.messages, {**ctx.tools, output.name: output.tool})
            if (self.window is not None or self.shrink is not None) and isinstance(ctx, AgentContext):
                step = "context_window"  # measuring may run the model's tokenizer: its failure is named
                ctx = self.fit_context(ctx)
            step = "format_msg_for_llm"
            request = config.format_msg_for_llm(ctx)
            if type(request) is LlmRequest and request.session_id is None:
                request.session_id = config.session_id
            if output is not None and output.mode != "tool":
                _ask_for_output(request, output)
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

    def fit_context(self, ctx: AgentContext) -> AgentContext:
        """``ctx``, or with ``context_strategy`` applied when its measure would not fit the
        window (``context_window``: see ``context_window``); ``ContextOverflow`` when it cannot
        be made to fit, before anything is sent."""
        meter = self.meter
        estimate = meter.request(ctx.system_prompt, ctx.tools, ctx.messages)
        # What the provider will count, as learned from its counts (an estimate can undercount
        # code or other scripts, and a chat template adds text of its own); trims too.
        size = meter.provider_tokens(estimate)
        self.measured, self.sent_estimate = size, estimate
        if size <= (self.shrink or self.window_budget):
            return ctx
        return self.fitted(ctx, size)

    def fitted(self, ctx: AgentContext, size: int) -> AgentContext:
        """``ctx``, whose measure is ``size``, made to fit by ``context_strategy``; else
        ``ContextOverflow`` saying why, before anything is sent."""
        config, messages, meter, window = self.config, ctx.messages, self.meter, self.window
        budget = self.shrink or self.window_budget
        fixed = meter.fixed(ctx.system_prompt, ctx.tools)
        where = f"the context window of {window} tokens" if window else "what the provider accepted"
        strategy = config.context_strategy
        if strategy == "error":
            raise ContextOverflow(
                f"The request (about {size} tokens) does not fit {where} ({budget} tokens for the "
                "request); nothing was sent. Start a new conversation (agent.reset()), or set "
                "context_strategy='trim' to drop the oldest turns."
            )
        kept: list[AgentMessage] | None
        allowed = meter.measure_for(budget)
        if strategy == "trim":
            kept, kept_size = _trimmed(meter, messages, allowed, fixed)
        else:
            try:
                kept = list(strategy(list(messages), allowed - fixed))
            except Exception as exc:
                raise ContextOverflow(f"context_strategy failed: {describe_error(exc)}") from exc
            kept_size = fixed + sum(meter.measure(m) for m in kept)
        if kept is None:
            raise ContextOverflow(
                f"The request does not fit {where} ({budget} tokens for the request) even with "
                "only the first user message and the last turn; nothing was sent. Start a new "
                "conversation (agent.reset()), or use a model with a larger context."
            )
        problem = history_problem(kept)
        counted = meter.provider_tokens(kept_size)
        if problem is None and counted > budget:
            problem = f"it is still about {counted} tokens, over the {budget} allowed"
        if problem is not None:
            raise ContextOverflow(f"context_strategy gave messages that cannot be sent: {problem}")
        self.measured, self.sent_estimate = counted, kept_size
        return AgentContext(ctx.system_prompt, kept, ctx.tools)

    def keywords_for_llm(self) -> dict[str, Any]:
        """The keywords ``llm_call`` declared, with this run's values (the same on every call of
        the run: ``on_update`` is the run's sink, which drops updates while no one listens)."""
        config, wanted = self.config, self.config.llm_keywords
        if not wanted:
            return {}
        kwargs: dict[str, Any] = {}
        if "on_update" in wanted:
            kwargs["on_update"] = self.emit.send
        if "signal" in wanted:
            kwargs["signal"] = self.signal
        if "max_retry_delay_ms" in wanted and config.max_retry_delay_ms is not None:
            kwargs["max_retry_delay_ms"] = config.max_retry_delay_ms
        if "session_id" in wanted and config.session_id is not None:
            kwargs["session_id"] = config.session_id
        return kwargs

    def tool_config(self) -> AgentLoopConfig:
        """The run's pipeline config, rebuilt only when the state's tools mapping is replaced."""
        cached = self.loop_config
        tools = self.tools_with_output()
        if cached is None or cached.tools is not tools:
            cached = self.loop_config = self.config.tool_loop_config(
                tools, self.skip_remaining, self.repeated_calls, self.refusal if self.limits_calls else None
            )
        return cached

    def tools_with_output(self) -> Any:
        """The tools a batch may call: the state's, with the output tool in the ``tool`` mode
        (one mapping while the state's stays the same)."""
        output, tools = self.output, self.state.tools
        if output is None or output.mode != "tool":
            return tools
        cached = self.output_tools
        if cached is None or cached[0] is not tools:
            cached = self.output_tools = (tools, {**tools, output.name: output.tool})
        return cached[1]

    def hooks_context(self) -> AgentContext:
        """The context the hooks see: the prompt, a read-only live view of the history (they
        cannot clear it) and the tools. One serves every batch of the run while it still shows
        the state as it is; a new prompt, tools or history list, or a hook that changed a field
        of it, gets a new one."""
        state = self.state
        context, view, source = self.hook_context
        # Every field of AgentContext is checked (tests/core/test_hot_path_shortcuts.py fails when
        # one is added).
        tools = self.tools_with_output()
        if (
            context is None
            or source is not state.messages
            or context.messages is not view
            or context.tools is not tools
            or context.system_prompt != state.system_prompt
        ):
            view = HistoryView(state.messages)
            context = AgentContext(state.system_prompt, view, tools)
            self.hook_context = (context, view, state.messages)
        return context

    def run_tools(self, response: AssistantMessage, calls: list[AgentToolCall]) -> AgentToolCallBatch:
        """Step 6: execute the calls and add their results (and note the tools they added); or,
        when calls need approval, pause the batch (``batch.paused``) and announce it (its calls
        count when the batch is settled). Calls a tool-call limit stops are refused in their
        place by the pipeline (``refusal``)."""
        state = self.state
        context = self.hooks_context()
        config = self.tool_config()
        refused = self.refused = self.refused_by_limits(calls)
        state.pending_tool_calls = {call.id for call in calls}
        try:
            if may_need_approval(calls, context, config):
                batch = prepare_or_pause(context, response, calls, config, self.signal, self.emit)
            else:
                batch = execute_tool_calls(context, response, calls, config, self.signal, self.emit)
        finally:
            state.pending_tool_calls = set()
            self.refused = {}
        if batch.paused is not None:
            state.paused_batch = batch.paused
            if self.emit.active:
                self.emit.send(ApprovalRequestedEvent(batch.paused.pending()))
            return batch
        self.usage.add_tool_calls(c.name for c in calls if id(c) not in refused)
        self.add_results(batch)
        return batch

    def refused_by_limits(self, calls: list[AgentToolCall]) -> dict[int, AgentToolResult]:
        """The error results of the calls a tool-call limit stops, by the calls' identity; the
        first limit is kept in ``limit_hit`` (the run ends after this batch)."""
        limits = self.config.usage_limits
        if limits is None or not self.limits_calls:
            return {}
        verdicts = limits.allowed_calls(self.usage, [c.name for c in calls])
        refused = {
            id(call): _limit_refusal(call.name, verdict)
            for call, verdict in zip(calls, verdicts, strict=True)
            if verdict is not None
        }
        if refused:
            self.limit_hit = next(v for v in verdicts if v is not None)
        return refused

    def refusal(self, call: AgentToolCall) -> AgentToolResult | None:
        """The pipeline's ``refused_by_limit``: the error result of ``call`` when a tool-call
        limit stops it in the batch being run."""
        return self.refused.get(id(call))

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

    def settle(self, approvals: Mapping[str, Decision] | None) -> AssistantMessage | None:
        """Finish the paused batch, if any, before anything else joins the run: with the
        decisions, or (none given) as aborted when the run is, else superseded by the messages
        that start it. Returns the run's response when that ends the run."""
        paused = self.state.paused_batch
        if paused is None or paused.settled:
            return None
        # Without decisions, messages that start the run supersede the batch.
        # An abort wins over decisions given just before it.
        fallback = ABORTED_KIND if self.signal.aborted else ("" if approvals is not None else SKIPPED)
        paused.settled = (
            True  # decided: no longer pending; kept in the state (and the session) until the run ends
        )
        batch = settle_paused_batch(
            self.hooks_context(), paused, approvals, fallback, self.tool_config(), self.signal, self.emit
        )
        # The batch's turn ended (turn_end) when it paused; its results join this run as
        # messages do, before its first turn. A call a limit refused when it paused does not
        # count, and the limit ends this run after the batch, as it would have ended that one.
        limits = {id(m): limit for m in batch.messages if (limit := _limit_of(m)) is not None}
        self.usage.add_tool_calls(m.tool_name for m in batch.messages if id(m) not in limits)
        if limits:
            self.limit_hit = next(iter(limits.values()))
        self.add_results(batch)
        return _after_batch(self, paused.message, batch)


_REFUSED = 'Tool "{}" was not run: the run reached its usage limit ({}).'


def _limit_refusal(name: str, limit: str) -> AgentToolResult:
    """The error result of a call of ``name`` that the tool-call limit ``limit`` (its verdict,
    such as ``max_tool_calls=3 reached``) stops."""
    return create_error_tool_result(_REFUSED.format(name, limit), USAGE_LIMIT)


def _limit_of(message: ToolResultMessage) -> str | None:
    """The verdict of the tool-call limit that refused the call ``message`` answers (the
    inverse of ``_limit_refusal``), or ``None`` when no limit refused it. Read back from the
    text, which a saved session keeps: a batch paused in one run may be settled in another."""
    if not message.is_error or message.details.get(ERROR_KIND_KEY) != USAGE_LIMIT:
        return None
    head, _, tail = _REFUSED.format(message.tool_name, "\0").partition("\0")
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    if text.startswith(head) and text.endswith(tail) and len(text) > len(head) + len(tail):
        return text[len(head) : len(text) - len(tail)]
    return None


def build_terminated_response(
    batch: AgentToolCallBatch, response: AssistantMessage, timestamp: int | None = None
) -> AssistantMessage:
    """The final response of a terminated batch (spec section 10): the tools' text after
    ``Tool execution completed.``, ``error_message`` set when any call failed; ``timestamp``
    (milliseconds) defaults to now."""
    content: list[ContentBlock] = [TextContent("Tool execution completed.")]
    for msg in batch.messages:
        for block in msg.content:
            if isinstance(block, TextContent):
                content.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                content.append(TextContent(block["text"]))
    failed = any(m.is_error for m in batch.messages)
    return AssistantMessage(
        content=content,
        api=response.api,
        provider=response.provider,
        model=response.model,
        usage=response.usage,
        stop_reason="tool_use_terminated",
        error_message="One or more tool calls failed" if failed else None,
        timestamp=now_ms() if timestamp is None else timestamp,
    )


def _ask_for_output(request: Any, output: OutputSpec) -> None:
    """Put the output's schema on the request, for the ``native`` and ``grammar`` modes: as
    ``LlmRequest.output`` (its spec view shows it as ``response_format``), or as a
    ``response_format`` key of a request dict a custom ``format_msg_for_llm`` made."""
    if isinstance(request, LlmRequest):
        request.output = output.request
    elif isinstance(request, dict):
        request.setdefault("response_format", response_format_view(output.request))


def _output_response(run: _Run, reply: AssistantMessage, value: Any) -> AssistantMessage:
    """The run's response for an output given through a tool: the output as JSON text, with
    the reply's provider fields and usage."""
    return AssistantMessage(
        content=[TextContent(json.dumps(output_json(value), ensure_ascii=False))],
        api=reply.api,
        provider=reply.provider,
        model=reply.model,
        usage=reply.usage,
        stop_reason="stop",
        timestamp=run.config.clock(),
        output=value,
    )


def _refused(run: _Run, problem: str) -> AssistantMessage | None:
    """Count a refused output; the run's error response once the retries are spent, else
    ``None`` (the run goes on, the problem already before the model)."""
    output = run.output
    assert output is not None
    run.output_failures += 1
    if run.output_failures <= output.retries:
        return None
    return run.made_up(
        "error",
        f"No valid output after {run.output_failures} attempts (output_retries={output.retries}); "
        f"the last one: {problem}",
    )


def _batch_output(
    run: _Run, response: AssistantMessage, batch: AgentToolCallBatch
) -> AssistantMessage | None:
    """The run's response when the batch gave an output (from the output tool, or a tool's
    own ``output``, checked against the schema), or when it spent the last retry; ``None`` to
    go on."""
    output = run.output
    if batch.output is not None:
        call_id, value = batch.output
        tool_name = next((m.tool_name for m in batch.messages if m.tool_call_id == call_id), "")
        if output is not None and tool_name != output.name:
            ok, value = output.accept(output.wrap(output_json(value)))
            if not ok:
                return run.made_up("error", f'Tool "{tool_name}" gave an output that does not fit: {value}')
        if batch.terminate:
            return attrs.evolve(build_terminated_response(batch, response, run.config.clock()), output=value)
        return _output_response(run, response, value)
    if output is not None:
        for msg in batch.messages:
            if msg.tool_name == output.name and msg.is_error:
                ended = _refused(run, content_text(msg.content))
                if ended is not None:
                    return ended
    return None


def _after_batch(
    run: _Run, response: AssistantMessage, batch: AgentToolCallBatch | None
) -> AssistantMessage | None:
    """The run's response once a reply and its batch are in, or ``None`` to go on."""
    if run.signal.aborted:
        return run.made_up("aborted", ABORTED)
    if batch is None:
        return response if run.output is None else _text_output(run, response)
    if batch.output is not None or run.output is not None:
        ended = _batch_output(run, response, batch)
        if ended is not None or batch.output is not None:
            return ended
    if batch.terminate:
        return build_terminated_response(batch, response, run.config.clock())
    if run.limit_hit is not None:  # a tool-call limit stopped calls of this batch
        return run.made_up("usage_limit", f"Stopped: {run.limit_hit}.")
    return None


def _text_output(run: _Run, reply: AssistantMessage) -> AssistantMessage | None:
    """A reply without tool calls in a run with an output: its text as the output when it is
    JSON that fits; else the problem goes back to the model as a user message (``None``: the
    run goes on) until the retries are spent. A failed or aborted reply ends the run as it is."""
    output = run.output
    assert output is not None
    if reply.stop_reason in ("error", "aborted"):
        return reply
    ok, value = output.accept_text(content_text(reply.content))
    if ok:
        return attrs.evolve(reply, output=value)
    ended = _refused(run, value)
    if ended is None:
        run.add(UserMessage([TextContent(output.retry_text(value))], run.config.clock()))
    return ended


def _learn_scale(run: _Run, usage: LlmUsage) -> None:
    """Let the meter learn from what the provider counted for the request just sent
    (``ContextMeter.learn``). Not where the meter counts with the model's own tokenizer: that
    count needs no correcting (and the embedded model's usage sums the several prompts of its
    steps)."""
    if run.sent_estimate > 0 and run.config.count_tokens is None:
        run.meter.learn(run.sent_estimate, usage.input + usage.cache_read + usage.cache_write)


def _trimmed(
    meter: ContextMeter, messages: Sequence[AgentMessage], budget: int, fixed: int
) -> tuple[list[AgentMessage] | None, int]:
    """``messages`` trimmed to fit ``budget``, and their tokens: from where the last trim of
    this history began while that still fits (the same start, so a provider's prompt cache keeps
    working), else trimmed afresh down to ``TRIM_GOAL`` of the budget; ``None`` when nothing
    fits. The size counts a result left out for want of its call too: an upper bound."""
    cut, head = meter.cut, head_end(messages)
    head_size = meter.tokens(messages) - meter.tokens(messages, head)
    if cut is not None:
        message, start = cut
        if head <= start < len(messages) and messages[start] is message:
            size = fixed + head_size + meter.tokens(messages, start)
            if size <= budget:
                return kept_from(messages, head, start), size
    made = trim(messages, budget, fixed, meter.sizes(messages), int(budget * TRIM_GOAL))
    if made is None:
        return None, 0
    kept, start = made
    meter.cut = (messages[start], start) if start < len(messages) else None
    return kept, fixed + head_size + meter.tokens(messages, start)


def _listed_window(source: Callable[[], int | None]) -> int | None:
    """The context window ``source`` reports (a server's model listing, which the client keeps
    once it answered), or ``None`` when it does not know or fails: a window that cannot be read
    is not a reason to fail the run (the failure is logged)."""
    try:
        window = source()
    except Exception as exc:
        logger.warning("could not read the model's context window: %s", describe_error(exc))
        return None
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    return None


def _call_fitting(run: _Run) -> AssistantMessage:
    """``run.call_llm()``; when the provider refuses the context as too long and the run has a
    strategy other than ``"error"``, the strategy is applied once more to fit 70 % of what was
    sent, and the call made again (``ContextOverflow`` with the ``"error"`` strategy)."""
    try:
        return run.call_llm()
    except RunError as exc:
        config = run.config
        if run.window is None and config.context_strategy == "error":
            raise
        if run.shrink is not None or not looks_like_context_overflow(str(exc)):
            raise
        if config.context_strategy == "error":
            raise ContextOverflow(f"The provider refused the request as too long: {exc}") from exc
        run.usage.add_failed_call()
        sent = run.measured or run.meter.fixed(run.state.system_prompt, run.state.tools) + run.meter.tokens(
            run.state.messages
        )
        run.shrink = max(1, int(sent * 0.7))
        run.reply_started = False
        return run.call_llm()


def _play_turn(run: _Run) -> AssistantMessage | None:
    """One turn: ask the model, record its reply, run its tool calls. Returns the run's response
    when the run ends in this turn, else ``None``. Every event the turn opens is closed."""
    run.reply_started = False
    try:
        response = _call_fitting(run)
    except ContextOverflow as exc:
        ended = run.made_up("context_overflow", str(exc))
        if run.emit.active:
            run.emit.send(TurnEndEvent(ended, []))
        return ended
    except RunError as exc:
        if run.reply_started:  # the model was called: the call counts, no tokens are known
            run.usage.add_failed_call()
        # An abort makes the client give up: then the abort, not the error, is the outcome.
        ended = run.made_up("aborted", ABORTED) if run.signal.aborted else run.made_up("error", str(exc))
        if run.emit.active:
            if run.reply_started:
                run.emit.send(MessageEndEvent(ended))
            run.emit.send(TurnEndEvent(ended, []))
        return ended
    response = normalize_tool_calls(response, run.config.new_tool_call_id)
    has_calls, calls = extract_tool_calls(response.content)
    if has_calls and may_need_approval(calls, run.hooks_context(), run.tool_config()):
        # A call shown for approval is decided by its id: an id the history used already (a
        # model that numbers its calls afresh each turn) gets a fresh one, so a decision given
        # for an earlier, superseded batch can never apply to this one.
        used = used_tool_call_ids(run.state.messages)
        renamed = distinct_from(response, used, run.config.new_tool_call_id)
        if renamed is not response:
            response = renamed
            has_calls, calls = extract_tool_calls(response.content)
    run.usage.add_reply(response, run.config.prices)
    run.last_model = response.model
    run.add(response, started=True)
    if response.usage is not None:
        run.context_mark = (response.usage.input + response.usage.output, len(run.state.messages))
        _learn_scale(run, response.usage)
    # After an abort the calls still get (aborted) results, so the history stays well formed.
    batch = run.run_tools(response, calls) if has_calls else None
    if run.emit.active:
        run.emit.send(TurnEndEvent(response, batch.messages if batch is not None else []))
    if batch is not None and batch.paused is not None:
        return run.made_up(AWAITING_APPROVAL, None)
    return _after_batch(run, response, batch)


def _finish_pending_calls(run: _Run) -> AssistantMessage | None:
    """On a resume: run the tool calls of the history's last reply that have no result yet, as
    the turn they belong to would have. Returns the run's response when that ends the run."""
    reply, pending = unanswered_tool_calls(run.state.messages)
    if reply is None or not pending:
        return None
    batch = run.run_tools(reply, pending)
    if batch.paused is not None:  # no turn was opened for these calls: none is closed
        return run.made_up(AWAITING_APPROVAL, None)
    return _after_batch(run, reply, batch)


def _next_call_estimate(run: _Run) -> int:
    """About how many input tokens the next LLM call takes: what the provider counted for the
    last reply's context and the reply, and the context meter's estimate of what was added
    since; before the run's first reply, the meter's estimate of the whole request."""
    mark, messages = run.context_mark, run.state.messages
    if mark is not None:
        counted, upto = mark
        return counted + run.meter.tokens(messages, upto)
    return run.meter.fixed(run.state.system_prompt, run.state.tools) + run.meter.tokens(messages)


def _next_call_price(run: _Run) -> Prices | None:
    """The prices of the model the next call goes to, as far as the run knows it: the last
    reply's model, else the agent's."""
    prices = run.config.prices
    if not prices:
        return None
    last = run.last_model or (run.state.model.name if run.state.model is not None else "")
    return prices.get(last)


def _with_usage(response: AssistantMessage, run: _Run) -> AssistantMessage:
    """The run's response, given the run's usage as ``run_usage``: in place, so a response
    that is the history's last reply stays that very object (``to_dict`` leaves it out: the
    history and sessions hold plain data)."""
    run.usage.wall_time_s = time.monotonic() - run.started
    object.__setattr__(response, "run_usage", run.usage)
    return response


def _output_tool_clash(run: _Run) -> AssistantMessage | None:
    """An error response when an agent's tool has the output tool's name."""
    output = run.output
    if output is None or output.mode != "tool" or output.name not in run.state.tools:
        return None
    return run.made_up(
        "error",
        f'A tool of the agent is named "{output.name}", the name of the output tool; '
        "rename that tool, or use another output_mode",
    )


def _turns(run: _Run, take_input: Callable[[], list[AgentMessage]]) -> AssistantMessage:
    config, state, turn = run.config, run.state, 0
    ended = _output_tool_clash(run) or _finish_pending_calls(run)
    if ended is not None:
        return ended
    while True:
        if run.signal.aborted:
            return run.made_up("aborted", ABORTED)
        if turn >= config.max_turns:
            return run.made_up(
                "max_turns", f"Stopped after {config.max_turns} LLM calls (max_turns={config.max_turns})."
            )
        for msg in take_input():  # step 1: messages sent during the run join it here
            run.add(msg)
        if config.sync_tools is not None:
            added, run.added_tools = run.added_tools, []
            config.sync_tools(state, added)
        if config.usage_limits is not None:
            problem = config.usage_limits.check_before_call(
                run.usage, _next_call_estimate(run), _next_call_price(run)
            )
            if problem is not None:
                return run.made_up("usage_limit", f"Stopped before the next LLM call: {problem}.")
        turn += 1
        if run.emit.active:
            run.emit.send(TurnStartEvent(turn))
        ended = _play_turn(run)
        if ended is not None:
            return ended


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
    as superseded by the messages in ``first``.
    """
    run = _Run(state, config, safe_emitter(emit), signal or AbortSignal(), has_input)
    try:
        return _run(run, first, approvals, take_input)
    finally:
        run.meter.release()


def _run(
    run: _Run,
    first: Iterable[AgentMessage],
    approvals: Mapping[str, Decision] | None,
    take_input: Callable[[], list[AgentMessage]],
) -> AssistantMessage:
    """The body of ``run_loop`` (see it), on a ``run`` made for it."""
    state, config = run.state, run.config
    if run.emit.active:
        run.emit.send(AgentStartEvent())
    try:
        first = list(first)
        for msg in first:
            if not isinstance(msg, AgentMessage):
                raise TypeError(f"a run starts from messages, got {type(msg).__name__}")
        ended = run.settle(approvals)
        for msg in first:
            run.add(msg)
        response = ended if ended is not None else _turns(run, take_input)
        if run.added_tools and config.sync_tools is not None:  # tools added in the last turn
            config.sync_tools(state, run.added_tools)
    except BaseException as exc:  # defensive: the steps above contain their own failures
        reraise_interrupt(exc)
        response = run.made_up("error", f"the run failed: {describe_error(exc)}")
    response = _with_usage(response, run)
    if state.paused_batch is not None and state.paused_batch.settled:
        state.paused_batch = None
    state.error_message = response.error_message if response.stop_reason == "error" else None
    if run.emit.active:
        run.emit.send(AgentEndEvent(list(run.added), response=response))
    return response

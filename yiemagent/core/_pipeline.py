"""The per-call tool pipeline: prepare -> execute -> finalize, run sequentially or in parallel.

Spec sections 8-12. Every public function here returns a result for every call and never raises
to its caller, whatever a tool or hook does: failures become error results fed back to the model.

A batch runs in two halves. ``prepare_batch`` prepares every call in call order (start event,
arguments, ``before_tool_call``; a call that ends there gets its end event) and decides whether
the batch runs in parallel (spec section 9), giving a ``PreparedBatch``. ``run_prepared`` runs
one: its prepared calls execute and finalize in order or at once, between optional
``on_start``/``on_end`` callbacks. ``execute_tool_calls_parallel`` is the two halves in a row;
``execute_tool_calls_sequential`` runs a batch of calls still to prepare, so each call is
prepared just before it runs; the approval path (``_approval_batch``) prepares, pauses, then
runs the batch with the decisions.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import attrs

from yiemagent.core._arguments import (
    ToolArgumentError,
    format_arguments,
    prepare_tool_call_arguments,
    validate_tool_arguments,
)
from yiemagent.core._content import AgentToolCall, TextContent, content_list
from yiemagent.core._emit import Emit, SafeEmitter, safe_emitter
from yiemagent.core._error_kinds import (
    ABORTED,
    BLOCKED,
    ERROR_KIND_KEY,
    HOOK_FAILED,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_RESULT,
    PREPARE_FAILED,
    REPEATED_CALL,
    SKIPPED,
    TIMEOUT,
    TOOL_NOT_FOUND,
    TOOL_RAISED,
)
from yiemagent.core._events import ToolExecEndEvent, ToolExecStartEvent, ToolExecUpdateEvent
from yiemagent.core._json_safety import MAX_JSON_DEPTH, argument_problem, clip, json_ready, reject_constant
from yiemagent.core._messages import AssistantMessage, LlmUsage, ToolResultMessage, now_ms
from yiemagent.core._repeated_calls import call_key
from yiemagent.core._tool_calls import UNUSABLE_NOTE
from yiemagent.core._tools import (
    AbortSignal,
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentToolCallBatch,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ExecutedOutcome,
    FinalizedOutcome,
    ImmediateOutcome,
    PreparedToolCall,
)
from yiemagent.errors import describe_error, reraise_interrupt

logger = logging.getLogger("yiemagent")
# A raising tool becomes an error result for the model; its traceback goes here, at DEBUG, so
# that whoever wrote the tool can still see where it failed.
tools_logger = logging.getLogger("yiemagent.tools")

__all__ = [
    "BatchEntry",
    "PreparedBatch",
    "UnannouncedOutcome",
    "create_error_tool_result",
    "create_tool_result_message",
    "emit_tool_execution_end",
    "execute_prepared_tool_call",
    "execute_tool_calls",
    "execute_tool_calls_parallel",
    "execute_tool_calls_sequential",
    "finalize_executed_tool_call",
    "prepare_batch",
    "prepare_tool_call",
    "run_prepared",
    "should_terminate",
]


def create_error_tool_result(msg: str, kind: str | None = None) -> AgentToolResult:
    """Return a result holding one text block with ``msg``; its details are empty, or hold
    ``{"error_kind": kind}`` when a kind is given (the pipeline always gives one, see
    ``error_kinds``)."""
    return AgentToolResult([TextContent(msg)], {ERROR_KIND_KEY: kind} if kind else {})


def _is_aborted(signal: AbortSignal | None) -> bool:
    return signal is not None and signal.aborted


def _aborted_outcome(name: str) -> tuple[AgentToolResult, bool]:
    return (create_error_tool_result(f'Tool "{name}" was not run: the operation was aborted.', ABORTED), True)


def skipped_result(name: str) -> AgentToolResult:
    """The error result of a call that gave way to a new message before it ran."""
    return create_error_tool_result(
        f'Tool "{name}" was skipped: a new message from the user arrived before it '
        "ran. Read the new message, then call the tool again if it is still needed.",
        SKIPPED,
    )


def _skipped(tool_call: AgentToolCall, emit: SafeEmitter, started: bool = False) -> FinalizedOutcome:
    """The outcome of a call skipped for a new message, with its end event, and its start
    event unless ``started`` (a batch prepared in full already sent it)."""
    if emit.active and not started:
        emit.send(ToolExecStartEvent(tool_call.id, tool_call.name, tool_call.arguments))
    finalized = FinalizedOutcome(tool_call, skipped_result(tool_call.name), True)
    emit_tool_execution_end(finalized, emit)
    return finalized


def _parsed_call(tool_call: AgentToolCall) -> AgentToolCall:
    """Return the call with its arguments as a finite-JSON object; raise ``ToolArgumentError``
    saying what is wrong otherwise (not JSON, not an object, NaN, nested too deep)."""
    args = tool_call.arguments
    name = tool_call.name
    if type(args) is dict:  # nearly every call: skip the str and Mapping (ABC) checks
        pass
    elif isinstance(args, str):
        try:
            args = json.loads(args, parse_constant=reject_constant)
        except (ValueError, RecursionError) as exc:
            reason = exc if isinstance(exc, ValueError) else "nested too deep to parse"
            kind = INVALID_ARGUMENTS if args.startswith(UNUSABLE_NOTE) else INVALID_JSON
            raise ToolArgumentError(
                f'The arguments for tool "{name}" are not valid JSON ({reason}). '
                f"Received: {clip(repr(tool_call.arguments))}. Send the arguments as one JSON "
                "object.",
                kind=kind,
            ) from None
    elif isinstance(args, Mapping) and not isinstance(args, dict):
        args = dict(args)
    if not isinstance(args, dict):
        raise ToolArgumentError(
            f'The arguments for tool "{name}" must be a JSON object, got '
            f"{type(args).__name__}: {format_arguments(args)}",
            kind=INVALID_ARGUMENTS,
        )
    problem = argument_problem(args)
    if problem is not None:
        raise ToolArgumentError(
            f'The arguments for tool "{name}" cannot be used: {problem}. '
            "Send finite JSON numbers and at most "
            f"{MAX_JSON_DEPTH} levels of nesting.",
            kind=INVALID_ARGUMENTS,
        )
    return tool_call if args is tool_call.arguments else attrs.evolve(tool_call, arguments=args)


def _require_bool(hook: str, field: str, value: Any) -> None:
    """Hooks are strict: a flag that is not a bool (the string "false" is truthy) is an error."""
    if not isinstance(value, bool):
        raise TypeError(f"{hook} returned {field}={value!r}; it must be True or False")


def _before_hook_block(
    config: AgentLoopConfig, ctx: BeforeToolCallContext, signal: AbortSignal | None
) -> str | None:
    """Run ``before_tool_call``; return the block reason, or ``None`` to proceed."""
    if config.before_tool_call is None:
        return None
    before = config.before_tool_call(ctx, signal)
    if before is None:
        return None
    if isinstance(before, BeforeToolCallResult):
        block, reason = before.block, before.reason
    elif isinstance(before, Mapping):
        block, reason = before.get("block", False), before.get("reason")
    else:
        raise TypeError(
            f"before_tool_call returned {type(before).__name__}; expected None, "
            "a BeforeToolCallResult or a dict with 'block' and 'reason'"
        )
    _require_bool("before_tool_call", "block", block)
    return (str(reason) if reason else "Tool execution was blocked") if block else None


def prepare_tool_call(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_call: AgentToolCall,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
) -> PreparedToolCall | ImmediateOutcome:
    """Resolve the tool, prepare and validate the arguments, and run ``before_tool_call``.

    Returns a ``PreparedToolCall`` ready to execute, or an error ``ImmediateOutcome`` when a
    usage limit of the run refuses the call (``config.refused_by_limit``), the tool is unknown,
    the arguments are invalid, the call repeats one the run already made
    ``config.repeated_calls.limit`` times, the hook blocks or fails, or the signal is aborted.
    Never raises.
    """
    name = tool_call.name
    if _is_aborted(signal):
        return ImmediateOutcome(*_aborted_outcome(name))
    refuse = config.refused_by_limit
    if refuse is not None and (refused := refuse(tool_call)) is not None:
        return ImmediateOutcome(refused, True)
    tool = context.tools.get(name)
    if tool is None:
        known = ", ".join(context.tools) or "(none)"
        return ImmediateOutcome(
            create_error_tool_result(f'Tool "{name}" not found. Available tools: {known}.', TOOL_NOT_FOUND),
            True,
        )
    try:
        call = prepare_tool_call_arguments(tool, _parsed_call(tool_call))
        args = validate_tool_arguments(tool, call)
    except ToolArgumentError as exc:
        return ImmediateOutcome(create_error_tool_result(str(exc), exc.kind), True)
    except BaseException as exc:
        reraise_interrupt(exc)
        msg = f'Preparing the arguments for tool "{name}" failed: {describe_error(exc)}'
        return ImmediateOutcome(create_error_tool_result(msg, PREPARE_FAILED), True)
    repeats, key = config.repeated_calls, None
    if repeats is not None:
        key = call_key(name, args)
        if (refusal := repeats.refusal(name, args, assistant_message, key)) is not None:
            return ImmediateOutcome(create_error_tool_result(refusal, REPEATED_CALL), True)
    if config.before_tool_call is not None:
        key = None  # the hook may change the arguments: they are counted as they are then
        try:
            reason = _before_hook_block(
                config, BeforeToolCallContext(assistant_message, tool_call, args, context), signal
            )
        except BaseException as exc:
            reraise_interrupt(exc)
            msg = f'before_tool_call hook failed for tool "{name}": {describe_error(exc)}'
            return ImmediateOutcome(create_error_tool_result(msg, HOOK_FAILED), True)
        if reason is not None and not _is_aborted(signal):
            return ImmediateOutcome(create_error_tool_result(reason, BLOCKED), True)
    if _is_aborted(signal):
        return ImmediateOutcome(*_aborted_outcome(name))
    if repeats is not None:
        repeats.record(name, args, assistant_message, key)
    return PreparedToolCall(tool, tool_call, args)


class _UpdateGate:
    """Forwards partial results as update events until closed (the spec's ``accepting`` guard)."""

    __slots__ = ("_emit", "_lock", "_open", "_prep")

    def __init__(self, prep: PreparedToolCall, emit: SafeEmitter) -> None:
        self._prep, self._emit = prep, emit
        self._lock = threading.Lock()
        self._open = True

    def report(self, partial: Any) -> None:
        with self._lock:
            if self._open and self._emit.active:
                call = self._prep.tool_call
                self._emit.send(ToolExecUpdateEvent(call.id, call.name, call.arguments, partial))

    def close(self) -> None:
        with self._lock:
            self._open = False


class _TimedOut(Exception):
    """Raised by ``_call_with_timeout`` only; distinct from a ``TimeoutError`` the tool raises."""


def _call_with_timeout(
    fn: Callable[[AbortSignal], Any],
    timeout_s: float,
    name: str,
    signal: AbortSignal | None,
    on_timeout: Callable[[], None],
) -> Any:
    """Run ``fn(child_signal)`` on its own daemon thread; return its value, re-raise its error,
    or raise ``_TimedOut`` after ``timeout_s``.

    The child signal follows ``signal`` and is aborted on timeout, so a tool that watches its
    signal stops; one that does not is left to finish on its own. ``on_timeout`` runs first, so
    whatever the tool does in reaction to that abort already finds its updates dropped.
    """
    child = AbortSignal()
    unlink = signal.on_abort(lambda: child.abort(signal.reason)) if signal is not None else None
    done = threading.Event()
    box: list[Any] = [None, None]

    def target() -> None:
        try:
            box[0] = fn(child)
        except BaseException as exc:  # reported to the waiting caller, not lost in the thread
            box[1] = exc
        finally:
            done.set()

    # The tool runs in a copy of the caller's context (tracing, the agent it runs for).
    threading.Thread(
        target=contextvars.copy_context().run, args=(target,), name=f"yiemagent-tool-{name}", daemon=True
    ).start()
    finished = done.wait(timeout_s)
    if unlink is not None:
        unlink()
    if not finished:
        on_timeout()
        child.abort(f"timed out after {timeout_s:g} s")
        raise _TimedOut
    if box[1] is not None:
        raise box[1]
    return box[0]


def _execute_with_timeout(
    prep: PreparedToolCall, gate: _UpdateGate, limit: float, signal: AbortSignal | None
) -> Any:
    """Run the tool on its own thread with ``limit`` seconds to finish (``_call_with_timeout``);
    apart from the hot path, so calls without a limit make no closure."""

    def run(run_signal: AbortSignal | None) -> Any:
        return prep.tool.execute(prep.tool_call.id, prep.args, run_signal, gate.report)

    return _call_with_timeout(run, limit, prep.tool_call.name, signal, gate.close)


def _result_problem(name: str, result: Any) -> str | None:
    """Why ``result`` is not a usable tool result, or ``None`` when it is."""
    if not isinstance(result, AgentToolResult):
        return (
            f'Tool "{name}" returned {type(result).__name__}; its execute function must '
            "return an AgentToolResult."
        )
    details: Any = result.details  # typed as a dict, but a tool may pass anything
    if not isinstance(details, dict):
        return f'Tool "{name}" returned details of type {type(details).__name__}; details must be a dict.'
    usage: Any = result.usage
    if usage is not None and not isinstance(usage, (LlmUsage, Mapping)):
        return (
            f'Tool "{name}" returned usage of type {type(usage).__name__}; usage must be an '
            "LlmUsage, a dict of its fields, or None."
        )
    return None


def _usable_result(result: AgentToolResult) -> AgentToolResult:
    """``result`` with a ``usage`` given as a dict turned into an ``LlmUsage``."""
    usage: Any = result.usage  # typed as LlmUsage, but a tool may pass a dict
    if isinstance(usage, Mapping):
        return attrs.evolve(result, usage=LlmUsage.from_dict(usage))
    return result


def execute_prepared_tool_call(
    prep: PreparedToolCall,
    signal: AbortSignal | None,
    emit: Emit | None,
    timeout_s: float | None = None,
) -> ExecutedOutcome:
    """Call ``prep.tool.execute`` and turn whatever happens into an ``ExecutedOutcome``.

    Partial results become ``ToolExecUpdateEvent``s until ``execute`` returns; later ones are
    dropped. An exception, a wrong return type, an abort before the start, or running past the
    tool's ``timeout_s`` (else ``timeout_s`` given here) become error results; a timed-out tool
    sees its signal aborted. Never raises.
    """
    name = prep.tool_call.name
    if _is_aborted(signal):
        return ExecutedOutcome(*_aborted_outcome(name))
    gate = _UpdateGate(prep, safe_emitter(emit))
    limit = prep.tool.timeout_s if prep.tool.timeout_s is not None else timeout_s
    try:
        result = (
            prep.tool.execute(prep.tool_call.id, prep.args, signal, gate.report)
            if limit is None
            else _execute_with_timeout(prep, gate, limit, signal)
        )
    except _TimedOut:
        gate.close()
        return ExecutedOutcome(
            create_error_tool_result(f'Tool "{name}" timed out after {limit:g} s.', TIMEOUT), True
        )
    except BaseException as exc:
        reraise_interrupt(exc)
        gate.close()
        tools_logger.debug('Tool "%s" raised (call %s)', name, prep.tool_call.id, exc_info=exc)
        msg = f'Tool "{name}" failed: {describe_error(exc)}'
        return ExecutedOutcome(create_error_tool_result(msg, TOOL_RAISED), True)
    gate.close()
    if type(result) is AgentToolResult and type(result.details) is dict and result.usage is None:
        return ExecutedOutcome(result, False)  # the usual result: nothing to check or convert
    problem = _result_problem(name, result)
    if problem is None:
        try:
            return ExecutedOutcome(_usable_result(result), False)
        except (TypeError, ValueError) as exc:  # a usage dict with fields LlmUsage refuses
            problem = f'Tool "{name}" returned unusable usage: {describe_error(exc)}'
    return ExecutedOutcome(create_error_tool_result(problem, INVALID_RESULT), True)


def _merge_after(result: AgentToolResult, is_error: bool, after: Any) -> tuple[AgentToolResult, bool]:
    """Apply an ``after_tool_call`` return value; omitted fields keep their values."""
    if after is None:
        return result, is_error
    if isinstance(after, AfterToolCallResult):
        given: Mapping[str, Any] = attrs.asdict(after, recurse=False)
    elif isinstance(after, Mapping):
        allowed = {"content", "details", "usage", "terminate", "is_error"}
        unknown = set(after) - allowed
        if unknown:
            raise ValueError(
                f"after_tool_call returned unknown fields {sorted(unknown)}; allowed: {sorted(allowed)}"
            )
        given = after
    else:
        raise TypeError(
            f"after_tool_call returned {type(after).__name__}; expected None, "
            "an AfterToolCallResult or a dict"
        )
    # ``None`` means "keep", in the dict form as in the object form.
    changes = {k: v for k, v in given.items() if v is not None}
    for flag in ("is_error", "terminate"):
        if flag in changes:
            _require_bool("after_tool_call", flag, changes[flag])
    is_error = changes.pop("is_error", is_error)
    if "content" in changes:
        changes["content"] = content_list(changes["content"])
    if isinstance(changes.get("usage"), Mapping):
        changes["usage"] = LlmUsage.from_dict(changes["usage"])
    if not isinstance(changes.get("usage", result.usage), (LlmUsage, type(None))):
        raise TypeError(
            f"after_tool_call returned usage of type {type(changes['usage']).__name__}; "
            "expected an LlmUsage or a dict of its fields"
        )
    if not isinstance(changes.get("details", {}), dict):
        raise TypeError(
            f"after_tool_call returned details of type "
            f"{type(changes['details']).__name__}; details must be a dict"
        )
    return attrs.evolve(result, **changes), is_error


def finalize_executed_tool_call(
    context: AgentContext,
    assistant_message: AssistantMessage,
    prep: PreparedToolCall,
    executed: ExecutedOutcome,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
) -> FinalizedOutcome:
    """Run ``after_tool_call`` and merge what it returns; never raises (a failing hook gives an
    error result)."""
    result, is_error = executed.result, executed.is_error
    if config.after_tool_call is not None:
        ctx = AfterToolCallContext(assistant_message, prep.tool_call, prep.args, result, is_error, context)
        try:
            result, is_error = _merge_after(result, is_error, config.after_tool_call(ctx, signal))
        except BaseException as exc:
            reraise_interrupt(exc)
            msg = f'after_tool_call hook failed for tool "{prep.tool_call.name}": {describe_error(exc)}'
            result, is_error = create_error_tool_result(msg, HOOK_FAILED), True
    return FinalizedOutcome(prep.tool_call, result, is_error)


def emit_tool_execution_end(finalized: FinalizedOutcome, emit: Emit | None) -> None:
    """Emit the ``ToolExecEndEvent`` of a finalized call (through a ``SafeEmitter``, so a
    failing sink is logged, not raised; nothing is built when no sink listens)."""
    sink = safe_emitter(emit)
    if sink.active:
        call = finalized.tool_call
        sink.send(ToolExecEndEvent(call.id, call.name, finalized.result, finalized.is_error))


def _added_tool_names(details: Any) -> list[str]:
    """``details["addedToolNames"]`` as a list of names; anything unusable counts as none."""
    added = details.get("addedToolNames") if type(details) is dict or isinstance(details, Mapping) else None
    if isinstance(added, str):
        return [added]
    if isinstance(added, (list, tuple)):
        return [n for n in added if isinstance(n, str)]
    return []


def create_tool_result_message(f: FinalizedOutcome, timestamp: int | None = None) -> ToolResultMessage:
    """Wrap a finalized call as the ``ToolResultMessage`` that enters the history; details that
    are not JSON-ready are converted (``json_safety.json_ready``), so the history can be saved.
    ``timestamp`` (milliseconds) defaults to now."""
    return ToolResultMessage(
        tool_call_id=f.tool_call.id,
        tool_name=f.tool_call.name,
        content=f.result.content,
        details=json_ready(f.result.details),
        usage=f.result.usage,
        added_tool_names=_added_tool_names(f.result.details),
        is_error=f.is_error,
        timestamp=now_ms() if timestamp is None else timestamp,
    )


def should_terminate(finalized: Sequence[FinalizedOutcome]) -> bool:
    """True only when the batch is non-empty and every result asked to terminate."""
    for f in finalized:  # a loop, not all() over a generator: this runs on every batch
        if not f.result.terminate:
            return False
    return bool(finalized)


def _execute_and_finalize(
    context: AgentContext,
    assistant_message: AssistantMessage,
    prep: PreparedToolCall,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: SafeEmitter,
) -> FinalizedOutcome:
    executed = execute_prepared_tool_call(prep, signal, emit, config.tool_timeout_s)
    finalized = finalize_executed_tool_call(context, assistant_message, prep, executed, config, signal)
    emit_tool_execution_end(finalized, emit)
    return finalized


def _start_and_prepare(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_call: AgentToolCall,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: SafeEmitter,
) -> PreparedToolCall | FinalizedOutcome:
    """Emit the start event and prepare; an immediate outcome is finalized and its end emitted."""
    if emit.active:
        emit.send(ToolExecStartEvent(tool_call.id, tool_call.name, tool_call.arguments))
    prep = prepare_tool_call(context, assistant_message, tool_call, config, signal)
    if isinstance(prep, PreparedToolCall):
        return prep
    finalized = FinalizedOutcome(tool_call, prep.result, prep.is_error)
    emit_tool_execution_end(finalized, emit)
    return finalized


def batch_output(finalized: Sequence[FinalizedOutcome]) -> tuple[str, Any] | None:
    """The first output a successful result gives, in call order, with its call's id."""
    for f in finalized:
        if f.result.output is not None and not f.is_error:
            return f.tool_call.id, f.result.output
    return None


def _batch(finalized: list[FinalizedOutcome], clock: Callable[[], int]) -> AgentToolCallBatch:
    return AgentToolCallBatch(
        [_result_message(f, clock()) for f in finalized],
        should_terminate(finalized),
        output=batch_output(finalized),
    )


def _result_message(f: FinalizedOutcome, timestamp: int) -> ToolResultMessage:
    """The call's result message; one that cannot be built (a hook or tool left a field of the
    wrong type) becomes an error result, so every call keeps its result and the batch goes on."""
    call, result = f.tool_call, f.result
    usage = result.usage
    # When every field has the type the message needs (details and usage were checked after
    # ``execute`` and after the hook; the content is checked block by block as it is copied),
    # the message is built without checking each field once more.
    if (
        type(call.id) is str
        and type(call.name) is str
        and type(result.details) is dict
        and (usage is None or type(usage) is LlmUsage)
        and type(f.is_error) is bool
        and type(timestamp) is int
    ):
        try:
            content = content_list(result.content)
        except (TypeError, ValueError):
            pass  # the checked path below turns it into an error result
        else:
            return ToolResultMessage._checked_fields(
                call.id,
                call.name,
                content,
                json_ready(result.details),
                usage,
                _added_tool_names(result.details) if result.details else [],
                f.is_error,
                timestamp,
            )
    try:
        return create_tool_result_message(f, timestamp)
    except (TypeError, ValueError) as exc:
        problem = f'The result of tool "{f.tool_call.name}" cannot be stored: {describe_error(exc)}'
        failed = FinalizedOutcome(f.tool_call, create_error_tool_result(problem, INVALID_RESULT), True)
        return create_tool_result_message(failed, timestamp)


class UnannouncedOutcome(FinalizedOutcome):
    """An outcome of a call that will not run whose end event is still to be emitted:
    ``run_prepared`` emits it in the call's place."""


BatchEntry = PreparedToolCall | FinalizedOutcome | AgentToolCall
"""What becomes of one call of a ``PreparedBatch``: a prepared call to execute, an outcome (it
ended already), or a call still to prepare when its turn comes."""


@attrs.define(eq=False)
class PreparedBatch:
    """A batch ready to run: the reply its calls came in, one entry per call in call order, and
    whether its calls run at once (``run_prepared``)."""

    message: AssistantMessage
    entries: Sequence[BatchEntry]
    parallel: bool = False


def prepare_batch(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_calls: Sequence[AgentToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit | None,
) -> PreparedBatch:
    """Prepare every call in call order (its start event, ``prepare_tool_call``, and the end
    event of one that ends there) and decide how the batch runs: in parallel when the config
    says so and no known tool of it may not run in parallel (spec section 9). Every entry is a
    ``PreparedToolCall`` or a ``FinalizedOutcome``; nothing executes. Never raises."""
    sink = safe_emitter(emit)
    entries = [_start_and_prepare(context, assistant_message, tc, config, signal, sink) for tc in tool_calls]
    parallel = config.tool_execution == "parallel" and not _sequential_only(tool_calls, context)
    return PreparedBatch(assistant_message, entries, parallel)


def run_prepared(
    context: AgentContext,
    batch: PreparedBatch,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit | None,
    *,
    on_start: Callable[[PreparedToolCall], FinalizedOutcome | None] | None = None,
    on_end: Callable[[FinalizedOutcome], None] | None = None,
) -> AgentToolCallBatch:
    """Run a prepared batch: every entry gets exactly one result, in call order.

    Prepared calls execute and finalize, each followed by its end event: at once on a thread
    pool (one thread per call unless ``config.max_parallel_tools`` caps it) when
    ``batch.parallel`` and more than one is prepared, else one after another. A call still to
    prepare is prepared when its turn comes (in parallel, all of them first); an outcome is
    kept, and an ``UnannouncedOutcome`` gets its end event in its place (in parallel, before
    the pool starts). Run in order, a batch that is not parallel gives the calls not yet run
    "skipped" results once ``config.skip_remaining`` answers true. ``on_start`` is called with
    each prepared call just before it executes, on the thread that runs it: an outcome it
    returns becomes the call's, unrun; ``on_end`` with each executed call's outcome just after
    its end event. Never raises.
    """
    run = _Run(context, batch.message, config, signal, safe_emitter(emit), on_start, on_end)
    if not batch.parallel:
        return _batch(run.in_order(batch.entries, config.skip_remaining), config.clock)
    ready = [run.prepare(e) if isinstance(e, AgentToolCall) else e for e in batch.entries]
    jobs = [e for e in ready if isinstance(e, PreparedToolCall)]
    if len(jobs) > 1:
        return _batch(run.at_once(ready, jobs), config.clock)
    return _batch(run.in_order(ready, None), config.clock)


@attrs.define(eq=False)
class _Run:
    """What running the entries of one batch needs (``run_prepared``)."""

    context: AgentContext
    message: AssistantMessage
    config: AgentLoopConfig
    signal: AbortSignal | None
    sink: SafeEmitter
    on_start: Callable[[PreparedToolCall], FinalizedOutcome | None] | None
    on_end: Callable[[FinalizedOutcome], None] | None

    def prepare(self, call: AgentToolCall) -> PreparedToolCall | FinalizedOutcome:
        return _start_and_prepare(self.context, self.message, call, self.config, self.signal, self.sink)

    def one(self, prep: PreparedToolCall) -> FinalizedOutcome:
        """Execute and finalize ``prep`` between the callbacks."""
        if self.on_start is not None and (refused := _refused_at_start(self.on_start, prep)) is not None:
            emit_tool_execution_end(refused, self.sink)
            return refused
        done = _execute_and_finalize(self.context, self.message, prep, self.config, self.signal, self.sink)
        if self.on_end is not None:
            _tell_end(self.on_end, done)
        return done

    def in_order(
        self, entries: Sequence[BatchEntry], skip: Callable[[], bool] | None
    ) -> list[FinalizedOutcome]:
        out: list[FinalizedOutcome] = []
        for entry in entries:
            if isinstance(entry, FinalizedOutcome):
                if isinstance(entry, UnannouncedOutcome):
                    emit_tool_execution_end(entry, self.sink)
                out.append(entry)
            elif out and skip is not None and _asks_to_skip(skip):
                if isinstance(entry, PreparedToolCall):  # its start event was sent
                    out.append(_skipped(entry.tool_call, self.sink, started=True))
                else:
                    out.append(_skipped(entry, self.sink))
            else:
                prep = self.prepare(entry) if isinstance(entry, AgentToolCall) else entry
                out.append(self.one(prep) if isinstance(prep, PreparedToolCall) else prep)
        return out

    def at_once(
        self, entries: Sequence[PreparedToolCall | FinalizedOutcome], jobs: list[PreparedToolCall]
    ) -> list[FinalizedOutcome]:
        for entry in entries:  # they end before the others run, as preparation failures do
            if isinstance(entry, UnannouncedOutcome):
                emit_tool_execution_end(entry, self.sink)
        with ThreadPoolExecutor(_pool_size(self.config, len(jobs)), "yiemagent-tool") as pool:
            # Each call runs in a copy of the caller's context (tracing, the agent it runs for);
            # the callbacks run on its pool thread, as it starts and ends.
            futures = iter([pool.submit(contextvars.copy_context().run, self.one, job) for job in jobs])
            return [_outcome(next(futures), e) if isinstance(e, PreparedToolCall) else e for e in entries]


def _refused_at_start(
    on_start: Callable[[PreparedToolCall], FinalizedOutcome | None], prep: PreparedToolCall
) -> FinalizedOutcome | None:
    """What ``on_start`` answers; a callback that raises keeps the call from running."""
    try:
        return on_start(prep)
    except BaseException as exc:
        reraise_interrupt(exc)
        msg = f'Tool "{prep.tool_call.name}" was not run: on_start failed: {describe_error(exc)}'
        return FinalizedOutcome(prep.tool_call, create_error_tool_result(msg, HOOK_FAILED), True)


def _tell_end(on_end: Callable[[FinalizedOutcome], None], done: FinalizedOutcome) -> None:
    """Call ``on_end``; what it raises is logged, since the call has run and keeps its result."""
    try:
        on_end(done)
    except BaseException as exc:
        reraise_interrupt(exc)
        logger.warning('on_end for tool "%s" raised %s', done.tool_call.name, describe_error(exc))


def execute_tool_calls_sequential(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_calls: Sequence[AgentToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit | None,
) -> AgentToolCallBatch:
    """Run the calls one after another, each prepared just before it runs; every call gets
    exactly one result, in call order.

    After an abort, the remaining calls get "aborted" error results (with their start and end
    events) instead of being skipped. When ``config.skip_remaining`` answers true after a call,
    the calls not yet started get "skipped" error results. Never raises.
    """
    return run_prepared(context, PreparedBatch(assistant_message, tool_calls), config, signal, emit)


def _asks_to_skip(skip: Callable[[], bool]) -> bool:
    try:
        return bool(skip())
    except BaseException as exc:  # a broken check must not lose the batch: run the calls
        reraise_interrupt(exc)
        return False


def _pool_size(config: AgentLoopConfig, jobs: int) -> int:
    cap = config.max_parallel_tools  # validated: None or at least 1
    return jobs if cap is None else min(cap, jobs)


def execute_tool_calls_parallel(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_calls: Sequence[AgentToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit | None,
) -> AgentToolCallBatch:
    """Prepare the calls in order, then execute the prepared ones concurrently on a thread pool.

    The pool has one thread per prepared call unless ``config.max_parallel_tools`` caps it.
    Results come back in call order; the sink is never entered by two threads at once.
    Never raises.
    """
    sink = safe_emitter(emit)
    batch = prepare_batch(context, assistant_message, tool_calls, config, signal, sink)
    batch.parallel = True  # whatever the tools say: this function does not dispatch
    return run_prepared(context, batch, config, signal, sink)


def _sequential_only(tool_calls: Sequence[AgentToolCall], context: AgentContext) -> list[str]:
    """The names of the batch's known tools that may not run in parallel, one per call."""
    tools = context.tools
    return [tc.name for tc in tool_calls if tc.name in tools and not tools[tc.name].parallel_tool_execute]


_hinted: set[str] = set()
_hinted_lock = threading.Lock()


def _hint_sequential_fallback(names: Sequence[str]) -> None:
    """Log, once per tool name and process, that a parallel batch ran in order because of it."""
    with _hinted_lock:
        new = sorted(set(names) - _hinted)
        _hinted.update(new)
    if new:
        logger.info(
            "tool_execution='parallel', but %s do not allow parallel execution "
            "(parallel_tool_execute=False), so batches with them run in order; pass "
            "parallel_tool_execute=True (or @function_tool(parallel=True)) if they may "
            "run at once",
            ", ".join(repr(n) for n in new),
        )


def _outcome(future: Future[FinalizedOutcome], prep: PreparedToolCall) -> FinalizedOutcome:
    try:
        return future.result()
    except BaseException as exc:  # defensive: _execute_and_finalize does not raise
        reraise_interrupt(exc)
        msg = f'Tool "{prep.tool_call.name}" failed: {describe_error(exc)}'
        return FinalizedOutcome(prep.tool_call, create_error_tool_result(msg, TOOL_RAISED), True)


def execute_tool_calls(
    context: AgentContext,
    assistant_message: AssistantMessage,
    tool_calls: Sequence[AgentToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit | None,
) -> AgentToolCallBatch:
    """Run a batch sequentially if the config says so or any known tool in it is not parallel,
    else in parallel (spec section 9). Never raises."""
    if config.tool_execution == "sequential":
        return execute_tool_calls_sequential(context, assistant_message, tool_calls, config, signal, emit)
    serial = _sequential_only(tool_calls, context)
    if serial:
        _hint_sequential_fallback(serial)
        return execute_tool_calls_sequential(context, assistant_message, tool_calls, config, signal, emit)
    return execute_tool_calls_parallel(context, assistant_message, tool_calls, config, signal, emit)

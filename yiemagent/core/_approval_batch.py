"""Running a batch that may need approval: prepare it in full, pause it, and resume it.

A batch where some call may need approval (the agent has a policy, or a tool in it declares
``needs_approval``) is prepared in full first, in call order, in both execution modes: each
call's start event, ``prepare_arguments``, validation and ``before_tool_call`` (a blocked call is
blocked, not asked about). When no prepared call needs approval, the batch then executes as its
mode says. When one does, nothing of the batch executes: it pauses as a whole (``PausedBatch``),
and ``settle_paused_batch`` later executes it with the decisions: approved calls with exactly
the arguments shown, edited ones with the edit, denied ones get an error result; calls that
needed no approval run then too, in their place. Every call ends with exactly one result.

Preparing and running are the pipeline's two halves (``prepare_batch``, ``run_prepared``);
this module decides which calls wait, pauses the batch, and records each call's start and end
as it settles.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from yiemagent.core._approval import Decision, Deny, Edit, PausedBatch, PausedCall, result_from_dict
from yiemagent.core._arguments import validate_tool_arguments
from yiemagent.core._content import AgentToolCall
from yiemagent.core._emit import Emit, safe_emitter
from yiemagent.core._error_kinds import ABORTED, DENIED, INTERRUPTED, PREPARE_FAILED, SKIPPED, TOOL_NOT_FOUND
from yiemagent.core._messages import AssistantMessage
from yiemagent.core._pipeline import (
    PreparedBatch,
    UnannouncedOutcome,
    create_error_tool_result,
    prepare_batch,
    run_prepared,
    skipped_result,
)
from yiemagent.core._tools import (
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentToolCallBatch,
    FinalizedOutcome,
    PreparedToolCall,
)
from yiemagent.errors import ToolArgumentError, describe_error, reraise_interrupt

__all__ = ["SUPERSEDED", "may_need_approval", "prepare_or_pause", "reassess", "settle_paused_batch"]

logger = logging.getLogger("yiemagent")
SUPERSEDED = "superseded by a new message: the user sent a message while this call waited for approval"
Entry = PreparedToolCall | FinalizedOutcome


def may_need_approval(calls: Sequence[AgentToolCall], context: AgentContext, config: AgentLoopConfig) -> bool:
    """Whether any call of the batch could need approval: the agent has a policy, or a tool it
    names declares ``needs_approval`` (a cheap check; the decision is made per prepared call)."""
    if config.needs_approval is not None:
        return True
    tools = context.tools
    return any((tool := tools.get(c.name)) is not None and tool.needs_approval is not False for c in calls)


def _needs_approval(
    prep: PreparedToolCall, context: AgentContext, policy: Callable[..., bool] | None
) -> bool:
    """Whether the prepared call waits for a decision: its tool's rule, else the agent's
    ``policy``. A rule that raises asks for approval: a broken policy must not let a call run
    unasked."""
    rule = prep.tool.needs_approval
    try:
        if rule is True or (callable(rule) and rule(copy.deepcopy(prep.args), context)):
            return True
        return bool(policy is not None and policy(prep.tool, copy.deepcopy(prep.args), context))
    except BaseException as exc:
        reraise_interrupt(exc)
        logger.warning(
            'needs_approval for tool "%s" raised %s; the call waits for approval',
            prep.tool.name,
            describe_error(exc),
        )
        return True


def reassess(paused: PausedBatch, context: AgentContext, policy: Callable[..., bool] | None) -> None:
    """Ask the tools as they are now (and the agent's ``policy``) whether each call of
    ``paused`` that has not ended waits for a decision, and mark those that do. Never unmarks:
    a call shown for approval stays so; and whatever a session file says, a call of a tool that
    needs approval never runs without a decision. Never raises."""
    tools = context.tools
    for call in paused.calls:
        if call.needs_approval or call.outcome is not None or call.started:
            continue
        tool = tools.get(call.tool_call.name)
        if tool is None:
            continue  # it gets a tool_not_found result, and never runs
        prep = PreparedToolCall(tool, call.tool_call, dict(call.arguments or {}))
        if _needs_approval(prep, context, policy):
            call.needs_approval = True


def _unrecorded(prep: PreparedToolCall) -> FinalizedOutcome:
    """The outcome of an approved call that could not be recorded as started: not run, since
    after a crash nothing would tell that it had run."""
    text = (
        f'Tool "{prep.tool_call.name}" was not run: the session could not record that it starts, '
        "and a call must never run twice after a crash."
    )
    return FinalizedOutcome(prep.tool_call, create_error_tool_result(text, INTERRUPTED), True)


def prepare_or_pause(
    context: AgentContext,
    message: AssistantMessage,
    calls: Sequence[AgentToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit | None,
) -> AgentToolCallBatch:
    """Prepare every call of the batch, then execute it when no call needs approval, or return
    a batch with no results whose ``paused`` holds the ``PausedBatch``. Never raises."""
    sink = safe_emitter(emit)
    batch = prepare_batch(context, message, calls, config, signal, sink)
    entries = cast("Sequence[Entry]", batch.entries)  # prepare_batch prepares every call
    gated = {
        id(e)
        for e in entries
        if isinstance(e, PreparedToolCall) and _needs_approval(e, context, config.needs_approval)
    }
    if not gated:
        return run_prepared(context, batch, config, signal, sink)
    entries = _one_call_per_id(entries, gated)
    paused_calls = [
        PausedCall(e.tool_call, copy.deepcopy(e.args), id(e) in gated)
        if isinstance(e, PreparedToolCall)
        else PausedCall(e.tool_call, None, False, (e.result.to_dict(), e.is_error))
        for e in entries
    ]
    return AgentToolCallBatch([], False, paused=PausedBatch(message, paused_calls, batch.parallel))


def _one_call_per_id(entries: Sequence[Entry], gated: set[int]) -> Sequence[Entry]:
    """``entries`` with each call that would wait for a decision under an id an earlier call of
    the batch has too refused in its place: a decision names a call by its id, and must never
    cover two calls. (The loop gives a reply's calls distinct ids; this holds for a history
    given as it is, too.)"""
    if len({e.tool_call.id for e in entries}) == len(entries):
        return entries
    out: list[Entry] = []
    seen: set[str] = set()
    for entry in entries:
        call = entry.tool_call
        if id(entry) in gated and call.id in seen:
            text = (
                f'Tool "{call.name}" was not run: another call of this reply has the same id '
                f"({call.id}), so an approval could not tell the two apart."
            )
            entry = UnannouncedOutcome(call, create_error_tool_result(text, DENIED), True)
        seen.add(call.id)
        out.append(entry)
    return out


def _ended(call: PausedCall, text: str, kind: str) -> FinalizedOutcome:
    """An error outcome for a paused call that will not run (its end event comes in its place)."""
    return UnannouncedOutcome(call.tool_call, create_error_tool_result(text, kind), True)


def _entry(
    call: PausedCall,
    decision: Decision | None,
    fallback: str,
    context: AgentContext,
    from_file: bool = False,
) -> Entry:
    """What becomes of one paused call: its outcome, a refusal, or a prepared call to run."""
    name = call.tool_call.name
    if call.outcome is not None:
        result, is_error = call.outcome
        return FinalizedOutcome(call.tool_call, result_from_dict(result), is_error)
    if call.started:
        text = (
            f'Tool "{name}" had started when the process running it stopped; its outcome is unknown, '
            "so it was not run again. Check whether it took effect before calling it again."
        )
        return _ended(call, text, INTERRUPTED)
    if fallback == ABORTED:
        return _ended(call, f'Tool "{name}" was not run: the operation was aborted.', ABORTED)
    if call.needs_approval:
        if decision is None:
            why = SUPERSEDED if fallback == SKIPPED else "no decision was given for it"
            return _ended(call, f'Tool "{name}" was not run: {why}.', DENIED)
        if isinstance(decision, Deny):
            return _ended(call, decision.reason, DENIED)
    elif fallback == SKIPPED:
        return UnannouncedOutcome(call.tool_call, skipped_result(name), True)
    tool = context.tools.get(name)
    if tool is None:
        text = f'Tool "{name}" no longer exists, so the approved call was not run.'
        return _ended(call, text, TOOL_NOT_FOUND)
    if isinstance(decision, Edit):  # checked against the tool when the decision was given
        return PreparedToolCall(tool, call.tool_call, copy.deepcopy(dict(decision.arguments)))
    args = dict(call.arguments or {})
    if from_file:  # arguments a file holds are checked again, as the model's were
        try:
            args = validate_tool_arguments(tool, AgentToolCall(call.tool_call.id, name, args))
        except ToolArgumentError as exc:
            return _ended(call, str(exc), exc.kind)
        except Exception as exc:  # the tool's own validator raised
            text = f'Checking the arguments for tool "{name}" failed: {describe_error(exc)}'
            return _ended(call, text, PREPARE_FAILED)
    return PreparedToolCall(tool, call.tool_call, args)


def settle_paused_batch(
    context: AgentContext,
    paused: PausedBatch,
    decisions: Mapping[str, Decision] | None,
    fallback: str,
    config: AgentLoopConfig,
    signal: AbortSignal | None,
    emit: Emit | None,
) -> AgentToolCallBatch:
    """Execute a paused batch: each waiting call by its decision (``Approve`` when it needed
    none), or, for calls without one, by ``fallback``: ``"skipped"`` (a new message superseded
    the batch: waiting calls are denied, the others skipped) or ``"aborted"``. Calls that ended
    before keep their outcome; one that had started and has none is ``interrupted``. Marks each
    call started before it runs and records its outcome after, calling the config's
    ``approval_checkpoint`` each time. Whether a call waits for a decision is asked of the
    tools again first (``reassess``). Never raises."""
    sink = safe_emitter(emit)
    decisions = decisions or {}
    reassess(paused, context, config.needs_approval)
    by_entry: dict[int, PausedCall] = {}
    entries: list[Entry] = []
    for call in paused.calls:
        entry = _entry(call, decisions.get(call.tool_call.id), fallback, context, paused.from_file)
        if isinstance(entry, PreparedToolCall):
            by_entry[id(entry)] = call
        elif call.outcome is None:
            call.outcome = (entry.result.to_dict(), entry.is_error)
        entries.append(entry)
    checkpoint = config.approval_checkpoint

    by_call = {id(c.tool_call): c for c in by_entry.values()}
    # One mark and its save at a time: a save that began earlier must never overwrite, with an
    # older picture of the batch, a mark another thread saved since.
    saving = threading.Lock()

    def started(job: PreparedToolCall) -> FinalizedOutcome | None:
        with saving:
            marked = by_entry[id(job)]
            marked.started = True
            if _checkpoint(checkpoint):
                return None
            marked.started = False
        return _unrecorded(job)

    def ended(done: FinalizedOutcome) -> None:
        with saving:
            by_call[id(done.tool_call)].outcome = (done.result.to_dict(), done.is_error)
            _checkpoint(checkpoint)

    # Each call is marked started, and its outcome recorded, on the thread that runs it as it
    # starts and ends (the lock serialises the saves), so a crash loses at most the calls that
    # were running.
    batch = PreparedBatch(paused.message, entries, paused.parallel)
    return run_prepared(context, batch, config, signal, sink, on_start=started, on_end=ended)


def _checkpoint(checkpoint: Callable[[], None] | None) -> bool:
    """Call the checkpoint; whether it succeeded (logged when not)."""
    if checkpoint is None:
        return True
    try:
        checkpoint()
    except BaseException as exc:
        reraise_interrupt(exc)
        logger.warning("the approval checkpoint (saving the session) failed: %s", describe_error(exc))
        return False
    return True

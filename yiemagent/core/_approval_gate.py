"""Approval at the run loop's points: a batch whose calls may need a decision is prepared and
paused (``run_batch``), its calls first given ids no earlier call used (``distinct_ids``), and
the next run settles it before anything else joins (``ApprovalRun.resume``). Whether a batch may
need a decision (``may_need_approval``) the loop asks once per reply."""

from __future__ import annotations

from collections.abc import Mapping

from yiemagent.core._approval import Decision
from yiemagent.core._approval_batch import prepare_or_pause, settle_paused_batch
from yiemagent.core._content import AgentToolCall
from yiemagent.core._error_kinds import ABORTED, SKIPPED
from yiemagent.core._events import ApprovalRequestedEvent
from yiemagent.core._messages import AssistantMessage
from yiemagent.core._pipeline import execute_tool_calls
from yiemagent.core._run_points import RunFeature, RunView
from yiemagent.core._tool_calls import distinct_from, extract_tool_calls, used_tool_call_ids
from yiemagent.core._tools import AgentContext, AgentLoopConfig, AgentToolCallBatch

__all__ = ["ApprovalRun", "distinct_ids", "run_batch"]


def run_batch(
    run: RunView,
    context: AgentContext,
    reply: AssistantMessage,
    calls: list[AgentToolCall],
    config: AgentLoopConfig,
    gated: bool,
) -> AgentToolCallBatch:
    """Step 6: execute the calls; or, when one may need approval (``gated``:
    ``may_need_approval``), prepare them and pause the batch if one does (kept in
    the run's ``state.paused_batch`` and announced by an ``ApprovalRequestedEvent``). Never raises."""
    emit = run.emit
    if not gated:
        return execute_tool_calls(context, reply, calls, config, run.signal, emit)
    batch = prepare_or_pause(context, reply, calls, config, run.signal, emit)
    if batch.paused is not None:
        run.state.paused_batch = batch.paused
        if emit.active:
            emit.send(ApprovalRequestedEvent(batch.paused.pending()))
    return batch


def distinct_ids(
    run: RunView, reply: AssistantMessage, calls: list[AgentToolCall]
) -> tuple[AssistantMessage, list[AgentToolCall]]:
    """``reply`` and its calls, for a batch whose calls may be shown for approval, where a call
    is decided by its id: an id the history used already (a model that numbers its calls afresh
    each turn) gets a fresh one, so a decision given for an earlier, superseded batch can never
    apply to this one."""
    used = used_tool_call_ids(run.state.messages)
    renamed = distinct_from(reply, used, run.config.new_tool_call_id)
    if renamed is reply:
        return reply, calls
    return renamed, extract_tool_calls(renamed.content)[1]


class ApprovalRun(RunFeature):
    """A run's part in approval: before its messages join, it finishes the batch an earlier run
    paused, with ``approvals`` (a resume), as aborted when the run is, or else as superseded by
    the messages that start it; at the end, a batch it settled leaves the state."""

    __slots__ = ("approvals",)

    def __init__(self, approvals: Mapping[str, Decision] | None) -> None:
        self.approvals = approvals

    def resume(self, run: RunView) -> AssistantMessage | None:
        paused = run.state.paused_batch
        if paused is None or paused.settled:
            return None
        # Without decisions, messages that start the run supersede the batch.
        # An abort wins over decisions given just before it.
        fallback = ABORTED if run.signal.aborted else ("" if self.approvals is not None else SKIPPED)
        paused.settled = True  # decided: no longer pending; kept (and in the session) until the run ends
        batch = settle_paused_batch(
            run.hooks_context(), paused, self.approvals, fallback, run.tool_config(), run.signal, run.emit
        )
        # The batch's turn ended (turn_end) when it paused; its results join this run as
        # messages do, before its first turn.
        return run.finish_batch(paused.message, batch)

    def end(self, run: RunView, response: AssistantMessage | None) -> None:
        paused = run.state.paused_batch
        if paused is not None and paused.settled:
            run.state.paused_batch = None

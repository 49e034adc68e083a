"""Where a feature meets the run loop: the ``RunFeature`` points and the ``RunPoints`` that
call them.

A feature that needs state for one run (budgets and usage, the context window, structured
output, approval; next a journal, a parent run forwarding a child's events, compaction) keeps
that state in a ``RunFeature`` object of its own, made for the run, in the module that holds
the feature's types. The loop knows none of its fields: it calls the points below, in the order
of the run, on every feature that overrides them, in the order the features were given. A
point a feature does not override costs the loop nothing (``RunPoints`` keeps, per point, only
the features' own methods), so a run that uses no feature pays nothing for the features.

The points, in the order of a run (``run`` is the loop's ``RunView``):

- ``resume(run)``: before the messages that start the run join the history; finish what an
  earlier run left (a paused approval batch). May return the run's response.
- ``start(run)``: the new messages are in, before the first turn. May return the response.
- ``before_turn(run)``: before each LLM call, before its ``turn_start`` event (limits). May
  return the response, which ends the run there.
- ``prepare(run, context)``: the ``AgentContext`` of the call, returned changed or as it is
  (the output tool, the context window); ``ContextOverflow`` ends the run.
- ``request(run, request)``: the formatted request, changed in place (an output's schema).
- ``call_failed(run, error, called)``: the model call failed (``called``: the model was
  reached); ``True`` to make it once more (a context a provider refused as too long, shrunk).
- ``after_reply(run, reply)``: the model's reply, before it joins the history; returns it,
  or a replacement (usage counted, call ids made distinct).
- ``tools(run, tools)``: the tools a batch may call and hooks see (the output tool added).
- ``before_batch(run, calls)`` and ``refusal(call)``: before a batch runs; ``refusal`` gives
  a call's error result in its place (a tool-call limit), or ``None``.
- ``after_batch(run, reply, batch)``: every batch, paused or run (its calls counted).
- ``verdict(run, reply, batch)``: whether the run ends after a reply's batch; the first
  response given ends it (output before limits), ``None`` is no objection.
- ``answer(run, response)``: a reply without tool calls, which ends the run: returns the
  response, changed (the output read from its text) or as it is, or ``None`` to go on (the
  output refused, the problem sent back to the model).
- ``end(run, response)``: the run's response, once, before its ``agent_end`` event; the
  feature gives back what it holds. ``response`` is ``None`` when the run was interrupted
  (``KeyboardInterrupt``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from yiemagent.core._content import AgentToolCall
    from yiemagent.core._emit import SafeEmitter
    from yiemagent.core._messages import AgentMessage, AssistantMessage
    from yiemagent.core._tools import (
        AbortSignal,
        AgentContext,
        AgentLoopConfig,
        AgentState,
        AgentToolCallBatch,
        AgentToolResult,
    )
    from yiemagent.errors import RunError

__all__ = ["POINTS", "RunFeature", "RunPoints", "RunView"]


class RunView(Protocol):
    """What a feature may read and do of the run it serves."""

    state: AgentState
    config: Any
    emit: SafeEmitter
    signal: AbortSignal

    def add(self, msg: AgentMessage, started: bool = False) -> None:
        """Append a message to the history, with its events."""

    def made_up(self, stop_reason: str, error_message: str | None) -> AssistantMessage:
        """A response the run makes itself (not added to the history)."""

    def hooks_context(self) -> AgentContext:
        """The context the hooks of a batch see."""

    def tool_config(self) -> AgentLoopConfig:
        """The pipeline's config for a batch of this run."""

    def finish_batch(self, reply: AssistantMessage, batch: AgentToolCallBatch) -> AssistantMessage | None:
        """Add a batch's results (through ``after_batch``); the run's response when it ends
        the run (``verdict``), else ``None``."""


class RunFeature:
    """A feature's run-time object: each point does nothing here; a feature overrides the ones
    it needs (see the module's docstring for when each is called)."""

    __slots__ = ()

    def resume(self, run: RunView) -> AssistantMessage | None:
        return None

    def start(self, run: RunView) -> AssistantMessage | None:
        return None

    def before_turn(self, run: RunView) -> AssistantMessage | None:
        return None

    def prepare(self, run: RunView, context: AgentContext) -> AgentContext:
        return context

    def request(self, run: RunView, request: Any) -> None:
        return None

    def call_failed(self, run: RunView, error: RunError, called: bool) -> bool:
        return False

    def after_reply(self, run: RunView, reply: AssistantMessage) -> AssistantMessage:
        return reply

    def tools(self, run: RunView, tools: Any) -> Any:
        return tools

    def before_batch(self, run: RunView, calls: Sequence[AgentToolCall]) -> None:
        return None

    def refusal(self, call: AgentToolCall) -> AgentToolResult | None:
        return None

    def after_batch(self, run: RunView, reply: AssistantMessage, batch: AgentToolCallBatch) -> None:
        return None

    def verdict(
        self, run: RunView, reply: AssistantMessage, batch: AgentToolCallBatch
    ) -> AssistantMessage | None:
        return None

    def answer(self, run: RunView, response: AssistantMessage) -> AssistantMessage | None:
        return response

    def end(self, run: RunView, response: AssistantMessage | None) -> None:
        return None


POINTS = (
    "resume",
    "start",
    "before_turn",
    "prepare",
    "request",
    "call_failed",
    "after_reply",
    "tools",
    "before_batch",
    "refusal",
    "after_batch",
    "verdict",
    "answer",
    "end",
)


class RunPoints:
    """For each point, the bound methods of the features that override it, in feature order
    (an empty tuple when none does): what the loop calls."""

    __slots__ = POINTS

    def __init__(self, features: Sequence[RunFeature]) -> None:
        for point in POINTS:
            base = getattr(RunFeature, point)
            methods: tuple[Callable[..., Any], ...] = tuple(
                getattr(f, point) for f in features if getattr(type(f), point) is not base
            )
            setattr(self, point, methods)

    if TYPE_CHECKING:
        resume: tuple[Callable[[RunView], AssistantMessage | None], ...]
        start: tuple[Callable[[RunView], AssistantMessage | None], ...]
        before_turn: tuple[Callable[[RunView], AssistantMessage | None], ...]
        prepare: tuple[Callable[[RunView, AgentContext], AgentContext], ...]
        request: tuple[Callable[[RunView, Any], None], ...]
        call_failed: tuple[Callable[[RunView, RunError, bool], bool], ...]
        after_reply: tuple[Callable[[RunView, AssistantMessage], AssistantMessage], ...]
        tools: tuple[Callable[[RunView, Any], Any], ...]
        before_batch: tuple[Callable[[RunView, Sequence[AgentToolCall]], None], ...]
        refusal: tuple[Callable[[AgentToolCall], AgentToolResult | None], ...]
        after_batch: tuple[Callable[[RunView, AssistantMessage, AgentToolCallBatch], None], ...]
        verdict: tuple[
            Callable[[RunView, AssistantMessage, AgentToolCallBatch], AssistantMessage | None], ...
        ]
        answer: tuple[Callable[[RunView, AssistantMessage], AssistantMessage | None], ...]
        end: tuple[Callable[[RunView, AssistantMessage | None], None], ...]

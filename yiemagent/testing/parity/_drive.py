"""Running one scenario against this implementation: a real ``YiemAgent`` built from the
scenario, fed its inputs, with every event recorded and normalised as it is emitted.

Inputs without ``"at"`` are sent one after another, each once the agent is idle again, so
which run a message starts never depends on timing. Inputs with ``"at"`` fire synchronously
where their point is reached: inside the event sink for event points (before the loop goes on),
or inside the step that reaches a named point. The agent gets a counting clock and id maker,
so even the raw trace is the same on every run.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from yiemagent.agent._agent import YiemAgent
from yiemagent.agent._options import ContextOptions, OutputOptions, QueueOptions, ToolOptions
from yiemagent.core._approval import Approve, Deny, Edit
from yiemagent.core._content import AgentToolCall, ContentBlock, TextContent
from yiemagent.core._events import AgentEvent
from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._usage import UsageLimits
from yiemagent.errors import AgentClosedError, ResponseTimeout, ToolLoadError
from yiemagent.tools._store import ToolStore, clear_tools, load_tools

from ._behaviours import (
    Harness,
    ScriptedModel,
    build_format_msg_for_llm,
    build_hooks,
    build_prepare_context,
    build_tools,
    other_store,
)
from ._normalise import Normaliser
from ._scenario import Scenario
from ._tool_files import CodePlaceholders, materialise

__all__ = ["IMPLEMENTATION", "Outcome", "history_message", "run_scenario"]

IMPLEMENTATION = "yiemagent"


@attrs.frozen
class Outcome:
    """What a run of a scenario produced, normalised (``events``, ``responses``, ``history``),
    the raw ``to_dict()`` events, and any ``problems`` of the harness (a stuck latch, an input
    whose point was never reached) that make the run unusable as evidence."""

    events: list[dict[str, Any]]
    responses: list[dict[str, Any]]
    history: list[dict[str, Any]]
    requests: list[dict[str, Any]] = attrs.field(factory=list)
    hooks: list[dict[str, Any]] = attrs.field(factory=list)
    raw_events: list[dict[str, Any]] = attrs.field(factory=list)
    problems: list[str] = attrs.field(factory=list)

    def expect(self) -> dict[str, list[dict[str, Any]]]:
        """The scenario's ``expect`` section for this outcome."""
        return {
            "events": self.events,
            "requests": self.requests,
            "hooks": self.hooks,
            "responses": self.responses,
            "history": self.history,
        }


def history_message(data: Mapping[str, Any], timestamp: int) -> AgentMessage:
    """A library message from the normalised form a scenario's ``history`` uses."""
    text: list[ContentBlock] = [TextContent(data["text"])] if data.get("text") else []
    role = data["role"]
    if role == "user":
        return UserMessage(text, timestamp)
    if role == "assistant":
        calls = [AgentToolCall(c["id"], c["name"], c["arguments"]) for c in data["tool_calls"]]
        return AssistantMessage(
            [*text, *calls],
            stop_reason=data["stop_reason"],
            error_message=data.get("error_message"),
            timestamp=timestamp,
        )
    details = dict(data["details"])
    if data.get("error_kind"):
        details["error_kind"] = data["error_kind"]
    return ToolResultMessage(
        data["tool_call_id"],
        data["tool_name"],
        text,
        details,
        added_tool_names=list(data["added_tool_names"]),
        is_error=bool(data["is_error"]),
        timestamp=timestamp,
    )


class _Recorder:
    """The agent's event sink: keeps each event's ``to_dict()`` and its normalised form, and
    fires the inputs waiting for an event (in the sink, so before the loop goes on)."""

    def __init__(self, normaliser: Normaliser) -> None:
        self.normaliser = normaliser
        self.raw: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.hooks: list[dict[str, Any]] = []
        self.triggers: list[tuple[dict[str, Any], list[int], Callable[[], None]]] = []
        # Hooks of a parallel batch run on the pool's threads; the normaliser is not thread-safe.
        self.lock = threading.RLock()

    def request(self, request: Any) -> None:
        """Record what the loop gave the model: its spec view, as any ``llm_call`` may read it."""
        spec = request if isinstance(request, Mapping) else {}
        typed = [m.to_dict() for m in getattr(request, "messages", []) if hasattr(m, "to_dict")]
        session_id = getattr(request, "session_id", None)
        with self.lock:
            self.requests.append(self.normaliser.request(spec, typed, session_id))

    def hook(self, kind: str, ctx: Any) -> None:
        """Record what a hook received (before its rule, if any, acts)."""
        result = ctx.result.to_dict() if kind == "after" else None
        messages = list(ctx.context.messages)
        call = {"id": ctx.tool_call.id, "name": ctx.tool_call.name}
        with self.lock:
            record = self.normaliser.hook(
                kind, call, ctx.args, messages, result, getattr(ctx, "is_error", False)
            )
            self.hooks.append(record)

    def on(self, point: Mapping[str, Any], action: Callable[[], None]) -> None:
        match = {k: v for k, v in point.items() if k != "nth"}
        self.triggers.append((match, [int(point.get("nth", 1))], action))

    def __call__(self, event: AgentEvent) -> None:
        raw = event.to_dict()
        with self.lock:
            self.raw.append(raw)
            normal = self.normaliser.event(raw)
            if normal is None:
                return
            self.events.append(normal)
        for trigger in list(self.triggers):
            match, left, action = trigger
            if all(_field(normal, k) == v for k, v in match.items()):
                left[0] -= 1
                if left[0] == 0:
                    self.triggers.remove(trigger)
                    action()

    def pending(self) -> list[dict[str, Any]]:
        return [dict(match, nth=left[0]) for match, left, _ in self.triggers]


def _field(event: Mapping[str, Any], key: str) -> Any:
    """A point's field in a normalised event; ``role`` is also read from a message_end's message."""
    if key == "role" and "role" not in event and isinstance(event.get("message"), Mapping):
        return event["message"].get("role")
    return event.get(key)


@attrs.define
class _World:
    """What a scenario's agent lives in besides itself: its store, the other store of the same
    process, the tool folder (if any) and what shutdown handed back."""

    store: ToolStore
    other: ToolStore
    folder: Path | None = None
    handed_back: list[UserMessage] = attrs.field(factory=list)
    earlier: list[AssistantMessage] = attrs.field(factory=list)  # responses of agents reloaded since
    reload: Callable[[], None] | None = None


def _world(scenario: Scenario, harness: Harness) -> _World:
    """The stores: the scenario's tools (and listTools, by hand) in the agent's store, then the
    tool folder loaded into it (a bad file never stops the good ones)."""
    _tools, store = build_tools(scenario.tools, harness, bool(scenario.setting("list_tools")))
    world = _World(store, other_store(scenario.data.get("other_store", []), harness))
    files = scenario.data.get("tool_files", [])
    write_tool = bool(scenario.setting("write_tool"))
    if files or write_tool:
        world.folder = Path(tempfile.mkdtemp(prefix="parity-tools-"))
        materialise(files, world.folder, write_tool)
        # Strict, so the bad files are not logged; the good ones are loaded all the same.
        with contextlib.suppress(ToolLoadError):
            load_tools(store, world.folder, strict=True)
    return world


def _agent(
    scenario: Scenario,
    harness: Harness,
    sink: _Recorder,
    clock: Callable[[], int],
    world: _World,
    codes: CodePlaceholders,
    model: ScriptedModel,
    session: Path | None = None,
) -> YiemAgent:
    """The scenario's agent; with ``session``, loaded from that saved session (a reload), with
    the same model (which goes on with the script) and everything else as the scenario says."""
    before, after = build_hooks(scenario.hooks, harness, sink.hook)
    settings: dict[str, Any] = dict(
        llm_call=model,
        # The store's tools as a list, not the store's own mapping: the agent then takes up a
        # tool added to the store only when a result names it (added_tool_names), which the
        # suite must be able to see, rather than every change of the store.
        tools=list(world.store.tools.values()),
        tool_store=world.store,
        prepare_context=build_prepare_context(scenario.data.get("prepare_context")),
        format_msg_for_llm=build_format_msg_for_llm(scenario.data.get("format_msg_for_llm")),
        agent_event_sink=sink,
        before_tool_call=before,
        after_tool_call=after,
        max_turns=scenario.setting("max_turns"),
        queues=QueueOptions(
            steering=scenario.setting("steering_mode"), follow_up=scenario.setting("follow_up_mode")
        ),
        tool_options=_tool_options(scenario),
        **_output_settings(scenario.data.get("output")),
        **_budget_settings(scenario.data.get("budgets")),
    )
    if session is not None:
        agent = YiemAgent.load(session, **settings)
    else:
        agent = YiemAgent(
            session_id=scenario.setting("session_id"),
            system_prompt=scenario.setting("system_prompt"),
            messages=[history_message(m, clock()) for m in scenario.history],
            **settings,
        )
    # Settings of the run config, set before the first run: a fixed clock and id maker make
    # the trace reproducible.
    ids = (f"gen_{n}" for n in itertools.count(1))
    agent.clock = clock
    agent.new_tool_call_id = lambda: next(ids)
    return agent


def _output_settings(output: Mapping[str, Any] | None) -> dict[str, Any]:
    """The agent's output settings from a scenario's ``output`` (none without one)."""
    if output is None:
        return {}
    return {
        "output": OutputOptions(
            dict(output["schema"]), mode=output.get("mode", "tool"), retries=output.get("retries", 2)
        )
    }


def _tool_options(scenario: Scenario) -> ToolOptions:
    """The agent's tool options: the scenario's settings, and the agent's cap on tool results
    from its ``budgets``."""
    budgets = scenario.data.get("budgets") or {}
    return ToolOptions(
        execution=scenario.setting("execution"),
        skip_on_steer=scenario.setting("skip_tools_on_steer"),
        max_result_chars=budgets.get("max_tool_result_chars"),
    )


def _budget_settings(budgets: Mapping[str, Any] | None) -> dict[str, Any]:
    """The agent's budget settings from a scenario's ``budgets`` (none without one): its usage
    limits, context window and strategy."""
    if budgets is None:
        return {}
    context = ContextOptions(
        window=budgets.get("context_window"), strategy=budgets.get("context_strategy", "error")
    )
    settings: dict[str, Any] = {"context": context}
    if "usage_limits" in budgets:
        settings["usage_limits"] = UsageLimits(**budgets["usage_limits"])
    return settings


def _perform(
    agent: YiemAgent, harness: Harness, item: Mapping[str, Any], clock: Callable[[], int], world: _World
) -> None:
    action = item["do"]
    if action == "shutdown":  # from a listener or step too, so the agent is not waited for
        world.handed_back += agent.shutdown(wait=False, abort=bool(item.get("abort", False)))
    elif action == "clear_store":
        clear_tools(world.store if item["store"] == "own" else world.other)
    elif action == "user":
        agent.run_agent(UserMessage(item["text"], clock()))
    elif action == "follow_up":
        agent.follow_up(UserMessage(item["text"], clock()))
    elif action == "resume":
        agent.resume()
    elif action == "decide":
        agent.resume(approvals={i: _decision(d) for i, d in item["decisions"].items()})
    elif action == "reload":
        if world.reload is not None:
            world.reload()
    elif action == "abort":
        agent.abort()
    else:
        harness.release(item["latch"])


def _decision(data: Mapping[str, Any]) -> Approve | Deny | Edit:
    """A decision of the vocabulary (``{"approve": true}``, ``{"deny": reason}``, ``{"edit": args}``)."""
    if "deny" in data:
        return Deny(data["deny"])
    if "edit" in data:
        return Edit(data["edit"])
    return Approve()


def run_scenario(scenario: Scenario, wait_s: float = 20.0) -> Outcome:
    """Run ``scenario`` on a fresh ``YiemAgent`` and return its normalised outcome; never
    raises for anything the agent does (harness problems are listed in ``problems``)."""
    harness = Harness()
    codes = CodePlaceholders()
    normaliser = Normaliser(scenario.known_ids(), codes.restore)
    recorder = _Recorder(normaliser)
    ticks = itertools.count(1)

    def clock() -> int:
        return next(ticks)

    world = _world(scenario, harness)
    try:
        return _run(scenario, harness, normaliser, recorder, clock, world, codes, wait_s)
    finally:
        if world.folder is not None:
            shutil.rmtree(world.folder, ignore_errors=True)


def _run(
    scenario: Scenario,
    harness: Harness,
    normaliser: Normaliser,
    recorder: _Recorder,
    clock: Callable[[], int],
    world: _World,
    codes: CodePlaceholders,
    wait_s: float,
) -> Outcome:
    model = ScriptedModel(scenario.replies, harness, recorder.request, codes)  # goes on across a reload
    holder = [_agent(scenario, harness, recorder, clock, world, codes, model)]

    def reload() -> None:
        """Save the session, shut the agent down (keeping its responses) and go on with an agent
        loaded from that session, as another process would."""
        old = holder[0]
        old.wait_for_idle(wait_s)
        while True:
            try:
                world.earlier.append(old.take_response(timeout=0))
            except (ResponseTimeout, AgentClosedError):
                break
        path = (world.folder or Path(tempfile.mkdtemp(prefix="parity-"))) / "session.json"
        world.folder = path.parent
        old.save(path)
        old.shutdown(wait=True, timeout=wait_s)
        holder[0] = _agent(scenario, harness, recorder, clock, world, codes, model, path)

    world.reload = reload
    for item in scenario.inputs:
        at = item.get("at")

        def action(item: Mapping[str, Any] = item) -> None:
            _perform(holder[0], harness, item, clock, world)

        if isinstance(at, str):
            harness.at_point(at, action)
        elif isinstance(at, Mapping):
            recorder.on(at, action)
    problems = harness.problems
    responses: list[AssistantMessage] = []
    try:
        for item in scenario.inputs:
            if "at" in item:
                continue
            try:
                _perform(holder[0], harness, item, clock, world)
            except (TypeError, ValueError) as exc:  # e.g. a resume the agent refuses
                problems.append(f"input {item} was refused: {exc}")
            if not holder[0].wait_for_idle(wait_s):
                problems.append(f"the agent was still busy {wait_s:g} s after input {item}")
                break
        while True:
            try:
                responses.append(holder[0].take_response(timeout=0))
            except (ResponseTimeout, AgentClosedError):  # closed: shut down, nothing left
                break
    finally:
        holder[0].shutdown(wait=True, abort=True, timeout=wait_s)
    problems += [f"no step reached point {p!r}" for p in harness.pending_points()]
    problems += [f"no event matched {p}" for p in recorder.pending()]
    return Outcome(
        events=recorder.events,
        # What shutdown handed back (the messages it never processed) follows the responses.
        responses=[normaliser.message(r.to_dict()) for r in [*world.earlier, *responses, *world.handed_back]],
        history=[normaliser.message(m.to_dict()) for m in holder[0].messages],
        requests=recorder.requests,
        hooks=recorder.hooks,
        raw_events=recorder.raw,
        problems=list(problems),
    )

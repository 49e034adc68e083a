"""Property-based tests (hypothesis) over random batches of calls, tools and hook behaviours.

For any batch: every call gets exactly one result message, in call order, with exactly one start and
one end event, start before updates before end; the sink is never entered twice at once; and the
batch's terminate flag equals ``should_terminate`` of its results. Without aborts, a small model
predicts each call's outcome exactly.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_helpers import Recorder, assert_batch_well_formed, make_tool, text

from yiemagent import (
    AbortSignal,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallResult,
    ImageContent,
    LlmUsage,
    TextContent,
    ThinkingContent,
    ToolExecEndEvent,
    ToolExecUpdateEvent,
    ToolResultMessage,
    UserMessage,
    execute_tool_calls,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS = {"alpha": True, "beta": True, "gamma": False}  # name -> parallel_tool_execute

ARGS = {"valid": {"n": 1}, "wrong_type": {"n": "one"}, "missing": {}, "bad_json": '{"n": '}
TOOL_BEHAVIOURS = ["ok", "terminate", "raise", "wrong_type", "none", "partials"]
BEFORE = ["allow", "block_object", "block_dict", "raise", "wrong_type"]
AFTER = ["none", "terminate_true", "terminate_false", "is_error", "content", "raise"]


@attrs.define(frozen=True)
class CallPlan:
    call_id: str
    tool: str
    args: str
    behaviour: str
    partials: int
    before: str
    after: str


@st.composite
def call_plans(draw: st.DrawFn, with_abort: bool = False) -> list[CallPlan]:
    n = draw(st.integers(min_value=0, max_value=6))
    behaviours = TOOL_BEHAVIOURS + (["abort"] if with_abort else [])
    return [
        CallPlan(
            call_id=f"call_{i}",
            tool=draw(st.sampled_from([*TOOLS, "ghost"])),
            args=draw(st.sampled_from(list(ARGS)) if draw(st.booleans()) else st.just("valid")),
            behaviour=draw(st.sampled_from(behaviours)),
            partials=draw(st.integers(min_value=0, max_value=3)),
            before=draw(st.sampled_from(BEFORE) if draw(st.booleans()) else st.just("allow")),
            after=draw(st.sampled_from(AFTER) if draw(st.booleans()) else st.just("none")),
        )
        for i in range(n)
    ]


def _build(
    plans: list[CallPlan], mode: str, cap: int | None
) -> tuple[AgentContext, AgentLoopConfig, list[AgentToolCall]]:
    by_id = {p.call_id: p for p in plans}

    def execute(call_id: str, _args: Any, signal: AbortSignal | None, on_partial: Any) -> Any:
        plan = by_id[call_id]
        for i in range(plan.partials if plan.behaviour == "partials" else 0):
            on_partial({"step": i})
        if plan.behaviour == "raise":
            raise RuntimeError(f"boom {call_id}")
        if plan.behaviour == "wrong_type":
            return {"not": "a result"}
        if plan.behaviour == "none":
            return None
        if plan.behaviour == "abort" and signal is not None:
            signal.abort()
        return AgentToolResult(
            [TextContent(f"ok {call_id}")], {"id": call_id}, terminate=plan.behaviour == "terminate"
        )

    def before(ctx: Any, _signal: Any) -> Any:
        kind = by_id[ctx.tool_call.id].before
        if kind == "block_object":
            return BeforeToolCallResult(block=True, reason=f"blocked {ctx.tool_call.id}")
        if kind == "block_dict":
            return {"block": True, "reason": f"blocked {ctx.tool_call.id}"}
        if kind == "raise":
            raise ValueError("before failed")
        if kind == "wrong_type":
            return 42
        return None

    def after(ctx: Any, _signal: Any) -> Any:
        kind = by_id[ctx.tool_call.id].after
        if kind == "terminate_true":
            return AfterToolCallResult(terminate=True)
        if kind == "terminate_false":
            return {"terminate": False}
        if kind == "is_error":
            return {"is_error": True}
        if kind == "content":
            return AfterToolCallResult(content=[TextContent(f"after {ctx.tool_call.id}")])
        if kind == "raise":
            raise KeyError("after failed")
        return None

    tools = [make_tool(name, execute, SCHEMA, parallel=par) for name, par in TOOLS.items()]
    calls = [AgentToolCall(p.call_id, p.tool, ARGS[p.args]) for p in plans]
    config = AgentLoopConfig(tools, before, after, mode, max_parallel_tools=cap)  # type: ignore[arg-type]
    return AgentContext("sys", [], tools), config, calls


@attrs.define
class Expected:
    is_error: bool
    terminate: bool
    text: str
    updates: int = 0


def _expect(p: CallPlan) -> Expected:
    """The model: what the pipeline must produce for one call (no aborts)."""
    if p.tool not in TOOLS:
        return Expected(True, False, f'Tool "{p.tool}" not found')
    if p.args == "bad_json":
        return Expected(True, False, "are not valid JSON")
    if p.args != "valid":
        return Expected(True, False, f'Validation failed for tool "{p.tool}"')
    if p.before in ("block_object", "block_dict"):
        return Expected(True, False, f"blocked {p.call_id}")
    if p.before == "raise":
        return Expected(True, False, "before_tool_call hook failed")
    if p.before == "wrong_type":
        return Expected(True, False, "before_tool_call returned int")
    updates = p.partials if p.behaviour == "partials" else 0
    if p.behaviour == "raise":
        got = Expected(True, False, f"RuntimeError: boom {p.call_id}", updates)
    elif p.behaviour == "wrong_type":
        got = Expected(True, False, "returned dict", updates)
    elif p.behaviour == "none":
        got = Expected(True, False, "returned NoneType", updates)
    else:
        got = Expected(False, p.behaviour == "terminate", f"ok {p.call_id}", updates)
    if p.after == "terminate_true":
        got.terminate = True
    elif p.after == "terminate_false":
        got.terminate = False
    elif p.after == "is_error":
        got.is_error = True
    elif p.after == "content":
        got.text = f"after {p.call_id}"
    elif p.after == "raise":
        got = Expected(True, False, "after_tool_call hook failed", updates)
    return got


def _executes(p: CallPlan) -> bool:
    """Whether the plan's call reaches its tool's ``execute`` (when nothing aborted before it)."""
    return p.tool in TOOLS and p.args == "valid" and p.before == "allow"


def _run(
    plans: list[CallPlan], mode: str, cap: int | None, signal: AbortSignal | None = None
) -> tuple[Any, Recorder, list[AgentToolCall]]:
    context, config, calls = _build(plans, mode, cap)
    rec = Recorder()
    batch = execute_tool_calls(context, AssistantMessage(list(calls)), calls, config, signal, rec)
    return batch, rec, calls


def _check_structure(batch: Any, rec: Recorder, calls: list[AgentToolCall]) -> None:
    assert_batch_well_formed(calls, batch, rec.events)
    assert rec.overlaps == 0
    assert all(isinstance(m, ToolResultMessage) for m in batch.messages)
    ends = rec.of(ToolExecEndEvent)
    assert batch.terminate == (bool(ends) and all(e.result.terminate for e in ends))


@SETTINGS
@given(
    plans=call_plans(), mode=st.sampled_from(["sequential", "parallel"]), cap=st.sampled_from([None, 1, 2, 4])
)
def test_every_call_gets_one_result_in_order_with_its_events(
    plans: list[CallPlan], mode: str, cap: int | None
) -> None:
    batch, rec, calls = _run(plans, mode, cap)
    _check_structure(batch, rec, calls)
    expected = [_expect(p) for p in plans]
    for plan, want, msg in zip(plans, expected, batch.messages, strict=True):
        assert msg.is_error == want.is_error, (plan, text(msg))
        assert want.text in text(msg), (plan, text(msg))
        assert len(rec.of(ToolExecUpdateEvent, plan.call_id)) == want.updates, plan
    terminate_flags = [e.result.terminate for e in rec.of(ToolExecEndEvent)]
    assert sorted(terminate_flags) == sorted(w.terminate for w in expected)
    assert batch.terminate == (bool(expected) and all(w.terminate for w in expected))


@SETTINGS
@given(
    plans=call_plans(with_abort=True),
    mode=st.sampled_from(["sequential", "parallel"]),
    cap=st.sampled_from([None, 1, 3]),
    pre_aborted=st.booleans(),
)
def test_aborts_never_leave_a_call_without_its_result(
    plans: list[CallPlan], mode: str, cap: int | None, pre_aborted: bool
) -> None:
    signal = AbortSignal(aborted=pre_aborted)
    batch, rec, calls = _run(plans, mode, cap, signal)
    _check_structure(batch, rec, calls)
    aborted = ["the operation was aborted" in text(m) for m in batch.messages]
    if pre_aborted:
        assert all(aborted)
    sequential = mode == "sequential" or any(TOOLS.get(p.tool) is False for p in plans)
    if sequential:
        # in sequential mode, once a tool aborts, every later call is aborted and nothing else is
        first = next((i for i, p in enumerate(plans) if _executes(p) and p.behaviour == "abort"), None)
        if first is not None and not pre_aborted:
            assert aborted == [False] * (first + 1) + [True] * (len(plans) - first - 1)


# --- lossless message round trips -----------------------------------------------------------------

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=4)

blocks = st.one_of(
    st.builds(TextContent, st.text()),
    st.builds(ImageContent, st.text(), st.sampled_from(["image/png", "image/jpeg", "image/gif"])),
    st.builds(ThinkingContent, st.text(), st.none() | st.text()),
    st.builds(
        AgentToolCall, st.text(), st.text(), json_objects | st.text(), st.sampled_from(["function", "x"])
    ),
    st.builds(
        lambda calls: {"type": "tool_calls", "tool_calls": calls},
        st.lists(
            st.fixed_dictionaries({"id": st.text(), "name": st.text(), "arguments": json_objects}), max_size=2
        ),
    ),
    st.builds(
        lambda i, n, a: {"type": "tool_call", "id": i, "name": n, "arguments": a},
        st.text(),
        st.text(),
        json_objects,
    ),
)
usages = st.none() | st.builds(
    LlmUsage,
    st.integers(0, 10**9),
    st.integers(0, 10**9),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**9),
    st.floats(0, 100, allow_nan=False),
)
timestamps = st.integers(min_value=0, max_value=2**53)

messages = st.one_of(
    st.builds(
        UserMessage,
        st.lists(
            st.one_of(st.builds(TextContent, st.text()), st.builds(ImageContent, st.text())), max_size=3
        ),
        timestamps,
    ),
    st.builds(
        AssistantMessage,
        st.lists(blocks, max_size=4),
        st.text(),
        st.text(),
        st.text(),
        usages,
        st.sampled_from(["stop", "toolUse", "error", "aborted", ""]),
        st.none() | st.text(),
        timestamps,
    ),
    st.builds(
        ToolResultMessage,
        st.text(),
        st.text(),
        st.lists(
            st.one_of(st.builds(TextContent, st.text()), st.builds(ImageContent, st.text())), max_size=3
        ),
        json_objects,
        usages,
        st.lists(st.text(), max_size=2),
        st.booleans(),
        timestamps,
    ),
)


@settings(max_examples=150, deadline=None)
@given(message=messages)
def test_messages_round_trip_losslessly_through_json(message: AgentMessage) -> None:
    data = message.to_dict()
    wire = json.loads(json.dumps(data))
    back = AgentMessage.from_dict(wire)
    assert back == message
    assert type(back) is type(message)
    assert back.to_dict() == data

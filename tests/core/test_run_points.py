"""The run loop's named points (``RunFeature``): a feature made per run by ``RunConfig.features``
meets the run at each point, in the order of the run, without a field of the loop; a point a
feature does not define is never called; a paused call refused by a tool-call limit keeps its
verdict as a field, which ends the run that settles the batch whatever its result's text says."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import ScriptedLLM, call, echo_tool, reply

from yiemagent import AgentState, Approve, AssistantMessage, RunConfig, UsageLimits, UserMessage, run_loop
from yiemagent.core._approval import paused_batch_from_dict
from yiemagent.core._loop import _Run
from yiemagent.core._output import OutputSpec, output_run
from yiemagent.core._run_points import POINTS, RunFeature, RunPoints

LOOP = Path(__file__).resolve().parents[2] / "yiemagent" / "core" / "_loop.py"


class Recorder(RunFeature):
    """Records every point it is called at (and, for batches, how many results they had)."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def resume(self, run: Any) -> None:
        self.seen.append("resume")

    def start(self, run: Any) -> None:
        self.seen.append("start")

    def before_turn(self, run: Any) -> None:
        self.seen.append("before_turn")

    def prepare(self, run: Any, context: Any) -> Any:
        self.seen.append("prepare")
        return context

    def request(self, run: Any, request: Any) -> None:
        self.seen.append("request")

    def after_reply(self, run: Any, reply: AssistantMessage) -> AssistantMessage:
        self.seen.append("after_reply")
        return reply

    def before_batch(self, run: Any, calls: Any) -> None:
        self.seen.append(f"before_batch:{len(calls)}")

    def after_batch(self, run: Any, reply: AssistantMessage, batch: Any) -> None:
        self.seen.append(f"after_batch:{len(batch.messages)}")

    def verdict(self, run: Any, reply: AssistantMessage, batch: Any) -> None:
        self.seen.append("verdict")

    def answer(self, run: Any, response: AssistantMessage) -> AssistantMessage:
        self.seen.append("answer")
        return response

    def end(self, run: Any, response: AssistantMessage | None) -> None:
        self.seen.append(f"end:{None if response is None else response.stop_reason}")


def test_a_feature_meets_the_run_at_each_point_in_order() -> None:
    seen: list[str] = []
    llm = ScriptedLLM(call("echo", {"text": "hi"}), reply("done"))
    config = RunConfig(llm_call=llm, features=(lambda _state, _config: Recorder(seen),))
    state = AgentState("system", None, [echo_tool()], [])
    response = run_loop([UserMessage("go")], state, config)
    assert response.stop_reason == "stop"
    turn = ["before_turn", "prepare", "request", "after_reply"]
    assert seen == [
        "resume",
        "start",
        *turn,
        "before_batch:1",
        "after_batch:1",
        "verdict",
        *turn,
        "answer",
        "end:stop",
    ]


def test_an_answer_point_may_send_the_run_on_and_another_may_end_it() -> None:
    class SendsBackOnce(RunFeature):
        def __init__(self) -> None:
            self.sent_back = False

        def answer(self, run: Any, response: AssistantMessage) -> AssistantMessage | None:
            if self.sent_back:
                return response
            self.sent_back = True
            run.add(UserMessage("again"))
            return None

    llm = ScriptedLLM(reply("first"), reply("second"))
    config = RunConfig(llm_call=llm, features=(lambda _s, _c: SendsBackOnce(),))
    state = AgentState("system", None, [echo_tool()], [])
    response = run_loop([UserMessage("go")], state, config)
    assert [b.text for b in response.content] == ["second"]
    assert len(llm.requests) == 2


def test_a_point_a_feature_does_not_define_is_not_called() -> None:
    class OnlyEnd(RunFeature):
        def end(self, run: Any, response: AssistantMessage | None) -> None:
            return None

    feature = OnlyEnd()
    points = RunPoints([feature])
    for point in POINTS:
        assert getattr(points, point) == ((feature.end,) if point == "end" else ())


def test_a_feature_that_cannot_be_made_fails_the_run_not_the_caller() -> None:
    def broken(_state: Any, _config: Any) -> RunFeature:
        raise RuntimeError("no journal here")

    events: list[Any] = []
    state = AgentState("system", None, [echo_tool()], [])
    response = run_loop(
        [UserMessage("go")], state, RunConfig(llm_call=ScriptedLLM(), features=(broken,)), events.append
    )
    assert response.stop_reason == "error"
    assert "no journal here" in (response.error_message or "")
    assert response.run_usage is not None
    assert [type(e).__name__ for e in events] == ["AgentStartEvent", "AgentEndEvent"]


def test_a_paused_calls_limit_is_a_field_that_ends_the_settling_run() -> None:
    """A batch of two calls under max_tool_calls=1 pauses (one call needs approval); the refused
    call's verdict is kept on the paused call, survives a save, and ends the run that settles
    the batch, even when the refusal's text was changed meanwhile."""
    llm = ScriptedLLM(
        AssistantMessage(
            [*call("echo", {"text": "a"}, "c1").content, *call("echo", {"text": "b"}, "c2").content]
        ),
        reply("never asked"),
    )
    config = RunConfig(
        llm_call=llm,
        usage_limits=UsageLimits(max_tool_calls=1),
        needs_approval=lambda _tool, _args, _context: True,
    )
    state = AgentState("system", None, [echo_tool()], [])
    paused = run_loop([UserMessage("go")], state, config)
    assert paused.stop_reason == "awaiting_approval"
    assert state.paused_batch is not None
    saved = state.paused_batch.to_dict()
    assert [c.get("limit") for c in saved["calls"]] == [None, "max_tool_calls=1 reached"]
    saved["calls"][1]["outcome"]["result"]["content"][0]["text"] = "some other words"
    state.paused_batch = paused_batch_from_dict(saved)
    response = run_loop([], state, config, approvals={"c1": Approve()})
    assert response.stop_reason == "usage_limit"
    assert response.error_message == "Stopped: max_tool_calls=1 reached."
    assert response.run_usage is not None and response.run_usage.tool_calls == 1
    assert len(llm.requests) == 1


def test_the_loop_stays_small() -> None:
    """The issue's targets for the loop's shape: at most 750 lines, a run object of at most 12
    fields, no function of the loop with more than 10 branches."""
    source = LOOP.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 750
    assert len(_Run.__slots__) <= 12
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert _complexity(node) <= 10, node.name


def _complexity(function: ast.AST) -> int:
    """McCabe's cyclomatic complexity of a function, as radon and mccabe count it."""
    count = 1
    for node in ast.walk(function):
        if isinstance(node, (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler)):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
    return count


def test_a_file_cannot_give_a_limit_to_a_call_that_is_still_to_run() -> None:
    """A verdict keeps a call out of the run's count: a hand-edited file may not put one on a
    call that has not ended (it would run uncounted)."""
    llm = ScriptedLLM(call("echo", {"text": "a"}, "c1"))
    config = RunConfig(llm_call=llm, needs_approval=lambda _tool, _args, _context: True)
    state = AgentState("system", None, [echo_tool()], [])
    assert run_loop([UserMessage("go")], state, config).stop_reason == "awaiting_approval"
    assert state.paused_batch is not None
    saved = state.paused_batch.to_dict()
    saved["calls"][0]["limit"] = "max_tool_calls=1 reached"
    with pytest.raises(ValueError, match="limit must be null, or a text on a call with an outcome"):
        paused_batch_from_dict(saved)


def test_only_the_output_modes_that_use_a_point_are_called_there() -> None:
    """The tool mode offers a tool and puts nothing on the request; the native mode the
    opposite: neither pays for the other's point on every turn."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    tool_mode = RunPoints([output_run(OutputSpec(schema=schema, mode="tool"))])
    native = RunPoints([output_run(OutputSpec(schema=schema, mode="native"))])
    assert tool_mode.request == () and len(tool_mode.tools) == 1 and len(tool_mode.prepare) == 1
    assert len(native.request) == 1 and native.tools == () and native.prepare == ()

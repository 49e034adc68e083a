"""The shortcuts the per-turn path takes (issue 9's turn-overhead work) give exactly what the
general, checked code gives: each test compares a shortcut with the code it stands in for, or
drives the case it must hand back to that code."""

from __future__ import annotations

import json
import threading
from typing import Any

import attrs
import pytest
from agent_helpers import ScriptedLLM, call, echo_tool, reply

from yiemagent import (
    AgentState,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    LlmUsage,
    RunConfig,
    TextContent,
    ToolResultMessage,
    UserMessage,
    run_loop,
)
from yiemagent.core._context import prepare_context
from yiemagent.core._json_safety import argument_problem, json_ready
from yiemagent.core._pipeline import create_tool_result_message, execute_tool_calls
from yiemagent.core._request import SpecFormatter
from yiemagent.core._schema_fast import json_copy
from yiemagent.core._tool_calls import normalize_tool_calls
from yiemagent.core._tools import AgentContext, AgentLoopConfig, FinalizedOutcome
from yiemagent.llm._jsonutil import to_json as _to_json


def test_a_result_built_from_checked_fields_equals_the_checked_constructor() -> None:
    fields: dict[str, Any] = dict(
        tool_call_id="c1",
        tool_name="echo",
        content=[TextContent("ok")],
        details={"n": 1},
        usage=LlmUsage(input=3),
        added_tool_names=["x"],
        is_error=True,
        timestamp=42,
    )
    fast = ToolResultMessage._checked_fields(**fields)
    assert fast == ToolResultMessage(**fields)
    # Every field is set: a field added to the class but not to the shortcut fails here.
    for field in attrs.fields(ToolResultMessage):
        getattr(fast, field.name)
    assert fast.role == "toolResult"


@attrs.frozen
class _TaggedReply(AssistantMessage):
    tag: str = attrs.field(default="kept", validator=attrs.validators.instance_of(str))


def test_normalizing_converts_content_changed_after_the_reply_was_built() -> None:
    reply_msg = AssistantMessage(
        [{"type": "tool_calls", "tool_calls": [{"id": "c1", "name": "echo", "arguments": {"text": "x"}}]}],
        stop_reason="toolUse",
    )
    reply_msg.content.append("late text")  # type: ignore[arg-type]
    fixed = normalize_tool_calls(reply_msg)
    assert fixed.content == [AgentToolCall("c1", "echo", {"text": "x"}), TextContent("late text")]


def test_the_hooks_context_check_covers_every_field() -> None:
    # run._Run.hooks_context reuses a context only while each of these still shows the state.
    assert [f.name for f in attrs.fields(AgentContext)] == ["system_prompt", "messages", "tools"]


@pytest.mark.parametrize("cls", [AssistantMessage, _TaggedReply])
def test_a_reply_with_new_content_equals_evolve(cls: type[AssistantMessage]) -> None:
    original = cls(
        [{"type": "tool_calls", "tool_calls": []}],
        api="a",
        provider="p",
        model="m",
        usage=LlmUsage(output=2),
        stop_reason="toolUse",
        error_message=None,
        timestamp=7,
    )
    content: list[Any] = [AgentToolCall("c1", "echo", {"text": "hi"})]
    fast = original._with_checked_content(content)
    assert fast == attrs.evolve(original, content=content)
    assert type(fast) is cls
    for field in attrs.fields(cls):
        getattr(fast, field.name)


@pytest.mark.parametrize(
    "details",
    [
        {},
        {"addedToolNames": ["extra"], "n": 1, "nested": {"when": (1, 2)}},
        {"addedToolNames": {"a"}},  # a set is not a list of names: none, as the checked path says
        {"addedToolNames": "one"},
    ],
)
def test_the_pipeline_result_message_equals_the_checked_one(details: dict[str, Any]) -> None:
    returned = AgentToolResult(
        [TextContent("ok"), TextContent("two")], details, usage=LlmUsage(input=2, output=3)
    )
    tool = AgentTool("t", "t", "Returns a fixed result.", {"type": "object"}, lambda *_: returned)
    reply_msg = call("t", {"x": 1}, "c9")
    calls = [b for b in reply_msg.content if isinstance(b, AgentToolCall)]
    batch = execute_tool_calls(
        AgentContext("", [], {"t": tool}),
        reply_msg,
        calls,
        AgentLoopConfig({"t": tool}, clock=lambda: 5),
        None,
        None,
    )
    (msg,) = batch.messages
    expected = create_tool_result_message(FinalizedOutcome(calls[0], returned, False), 5)
    assert msg == expected
    assert msg.added_tool_names == expected.added_tool_names
    assert msg.content is not returned.content  # the message holds its own list


def test_a_result_with_a_field_of_the_wrong_type_takes_the_checked_path() -> None:
    # A tool result whose content list was changed after it was built holds a non-block: the
    # checked constructor refuses it, and the call gets an error result instead of a bad message.
    result = AgentToolResult([TextContent("ok")])
    result.content.append(3)  # type: ignore[arg-type]
    tool = AgentTool("bad", "bad", "Returns a broken result.", {"type": "object"}, lambda *_: result)
    reply_msg = call("bad", {}, "c1")
    calls = [b for b in reply_msg.content if isinstance(b, AgentToolCall)]
    batch = execute_tool_calls(
        AgentContext("", [], {"bad": tool}), reply_msg, calls, AgentLoopConfig({"bad": tool}), None, None
    )
    (msg,) = batch.messages
    assert msg.is_error and "cannot be stored" in msg.content[0].text  # type: ignore[union-attr]


def test_a_clock_that_returns_a_float_is_refused_by_the_checked_path() -> None:
    tool = echo_tool()
    reply_msg = call("echo", {"text": "hi"}, "c1")
    calls = [b for b in reply_msg.content if isinstance(b, AgentToolCall)]
    with pytest.raises(TypeError, match="timestamp"):
        execute_tool_calls(
            AgentContext("", [], {"echo": tool}),
            reply_msg,
            calls,
            AgentLoopConfig({"echo": tool}, clock=lambda: 1.5),  # type: ignore[arg-type,return-value]
            None,
            None,
        )


def test_ids_and_names_that_are_not_text_become_text_when_the_reply_enters_the_history() -> None:
    odd = AssistantMessage(
        [AgentToolCall(7, "echo", {"text": "x"})],  # type: ignore[arg-type]
        stop_reason="toolUse",
    )
    fixed = normalize_tool_calls(odd)
    (block,) = fixed.content
    assert isinstance(block, AgentToolCall) and block.id == "7"
    state = AgentState("", None, [echo_tool()])
    response = run_loop([UserMessage("go")], state, RunConfig(llm_call=ScriptedLLM(odd, reply("done"))), None)
    assert response.stop_reason == "stop"
    result = state.messages[2]
    assert isinstance(result, ToolResultMessage) and result.tool_call_id == "7"
    assert not result.is_error


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"a": 1, "b": "x", "c": None, "d": True, "e": 1.5}, None),
        ({"a": [1, {"b": float("nan")}]}, "args.a[1].b is nan, which is not a JSON number"),
        ({"a": {"0": [1, 2, float("inf")]}}, "args.a.0[2] is inf, which is not a JSON number"),
        ({"a": {1: "x"}}, "args.a has a key 1 that is not a string"),
        ({"a": [object]}, "args.a[0] is a type, which is not JSON"),
        ({"n": float("nan")}, "args.n is nan, which is not a JSON number"),
        ({3: 1}, "args has a key 3 that is not a string"),
    ],
)
def test_argument_problems_name_the_path_of_the_bad_value(value: Any, expected: str | None) -> None:
    assert argument_problem(value) == expected


def test_flat_details_are_kept_and_others_converted() -> None:
    flat = {"a": 1, "b": "x"}
    assert json_ready(flat) is flat
    assert json_ready({"a": float("nan")}) == {"a": "nan"}
    assert json_ready({"a": (1, 2)}) == {"a": [1, 2]}


def test_json_copy_shares_no_container_with_the_original() -> None:
    original = {"n": 1, "items": [{"x": 1}], "note": None}
    copied = json_copy(original)
    assert copied == original
    copied["items"][0]["x"] = 2
    copied["n"] = 5
    assert original == {"n": 1, "items": [{"x": 1}], "note": None}


def test_the_argument_encoder_matches_json_and_survives_a_failure() -> None:
    encode = json.JSONEncoder(ensure_ascii=False).encode
    for value in ({"n": 1, "t": "é", "f": 1.5, "l": [None, True]}, [1, {"a": []}], {}):
        assert _to_json(value) == encode(value)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular"):
        _to_json({"a": cyclic})
    with pytest.raises(TypeError):
        _to_json({"a": object()})
    shared = {"x": 1}
    assert _to_json({"a": shared, "b": shared}) == '{"a": {"x": 1}, "b": {"x": 1}}'


def test_each_thread_has_its_own_encoder_state() -> None:
    from yiemagent.core._json_text import _encoding as _json

    barrier = threading.Barrier(2)
    tables: list[int] = []
    failures: list[str] = []

    def work(fail: bool) -> None:
        try:
            barrier.wait(timeout=10)
            tables.append(id(_json.markers))
            if fail:
                cyclic: list[Any] = []
                cyclic.append(cyclic)
                try:
                    _to_json(cyclic)
                    failures.append("a cycle was encoded")
                except ValueError:
                    pass
            barrier.wait(timeout=10)  # one thread failed while the other holds its own table
            if _to_json({"a": [1, {"b": None}]}) != '{"a": [1, {"b": null}]}':
                failures.append("wrong text")
        except BaseException as exc:  # reported to the test thread, not lost in this one
            failures.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i == 0,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(set(tables)) == 2 and not failures


def test_the_system_message_follows_the_prompt() -> None:
    state = AgentState("first", None, [])
    state.messages.append(UserMessage("hi"))
    format_msg_for_llm = SpecFormatter()  # an agent's default: its spec view is cached
    one = format_msg_for_llm(prepare_context(state))
    assert one["messages"][0]["content"][0]["text"] == "first"
    state.system_prompt = "second"
    two = format_msg_for_llm(prepare_context(state))
    assert two["messages"][0]["content"][0]["text"] == "second"
    assert one["messages"][0]["content"][0]["text"] == "first"  # the old request is unchanged


def test_hooks_see_the_live_history_and_a_replaced_one() -> None:
    seen: list[tuple[int, int]] = []

    def before(ctx: Any, _signal: Any) -> None:
        seen.append((len(ctx.context.messages), id(ctx.context)))

    replacement: list[Any] = []

    def take_input() -> list[Any]:
        if len(seen) == 2 and not replacement:  # after the second batch: a new history list
            replacement.extend(state.messages)
            state.messages = replacement
        return []

    state = AgentState("", None, [echo_tool()])
    llm = ScriptedLLM(
        call("echo", {"text": "1"}, "a"),
        call("echo", {"text": "2"}, "b"),
        call("echo", {"text": "3"}, "c"),
        reply("done"),
    )
    response = run_loop(
        [UserMessage("go")], state, RunConfig(llm_call=llm, before_tool_call=before), None, None, take_input
    )
    assert response.stop_reason == "stop"
    assert [n for n, _ in seen] == [2, 4, 6]  # the view grows with the history
    assert seen[0][1] == seen[1][1] != seen[2][1]  # a new context for the new list
    assert state.messages is replacement and len(replacement) == 8


def test_a_hook_that_changes_its_context_does_not_change_what_the_next_batch_sees() -> None:
    seen: list[int] = []

    def before(ctx: Any, _signal: Any) -> None:
        seen.append(len(ctx.context.messages))
        ctx.context.messages = []  # a careless hook: the next batch must still see the history
        ctx.context.system_prompt = "changed"

    state = AgentState("system", None, [echo_tool()])
    llm = ScriptedLLM(call("echo", {"text": "1"}, "a"), call("echo", {"text": "2"}, "b"), reply("done"))
    response = run_loop([UserMessage("go")], state, RunConfig(llm_call=llm, before_tool_call=before), None)
    assert response.stop_reason == "stop"
    assert seen == [2, 4]
    assert state.system_prompt == "system"

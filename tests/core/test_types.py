"""The core types: defaults, immutability, lossless dict round trips, tool mappings, AbortSignal."""

from __future__ import annotations

import json
import threading
import traceback
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import attrs
import pytest
from pipeline_helpers import WAIT_S, make_tool, ok_execute

from yiemagent import (
    AbortSignal,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AgentState,
    AgentTool,
    AgentToolCall,
    AgentToolCallBatch,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallResult,
    ExecutedOutcome,
    FinalizedOutcome,
    ImageContent,
    ImmediateOutcome,
    LlmModel,
    LlmUsage,
    PreparedToolCall,
    TextContent,
    ThinkingContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    ToolResultMessage,
    UserMessage,
)

USAGE = LlmUsage(input=12, output=34, cache_read=5, cache_write=6, total_tokens=57, cost=0.0125)


# --- defaults -------------------------------------------------------------------------------------


def test_assistant_message_needs_only_content() -> None:
    msg = AssistantMessage(content=[TextContent("hi")])
    assert msg.role == "assistant"
    assert msg.content == [TextContent("hi")]
    assert msg.usage is None
    assert msg.stop_reason == "stop"
    assert msg.error_message is None
    assert isinstance(msg.timestamp, int) and msg.timestamp > 0


def test_tool_result_needs_only_content() -> None:
    result = AgentToolResult([TextContent("ok")])
    assert result.content == [TextContent("ok")]
    assert result.details == {}
    assert result.usage is None
    assert result.terminate is False


def test_default_details_are_not_shared_between_instances() -> None:
    a, b = AgentToolResult([]), AgentToolResult([])
    a.details["x"] = 1
    assert b.details == {}


def test_string_content_becomes_one_text_block() -> None:
    assert UserMessage("hello").content == [TextContent("hello")]
    assert AgentToolResult("done").content == [TextContent("done")]
    assert AssistantMessage(["a", TextContent("b")]).content == [TextContent("a"), TextContent("b")]


def test_content_that_is_not_a_block_is_rejected_at_construction() -> None:
    with pytest.raises(TypeError, match=r"UserMessage\.content\[1\]: content blocks must be"):
        UserMessage([TextContent("a"), 42])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("make", "owner"),
    [
        (lambda: UserMessage(5), "UserMessage.content"),  # type: ignore[arg-type]
        (lambda: AssistantMessage(5), "AssistantMessage.content"),  # type: ignore[arg-type]
        (lambda: ToolResultMessage("c", "t", 5), "ToolResultMessage.content"),  # type: ignore[arg-type]
        (lambda: UserMessage(3.5), "UserMessage.content"),  # type: ignore[arg-type]
        (lambda: AssistantMessage(content=object()), "AssistantMessage.content"),  # type: ignore[arg-type]
        (lambda: ToolResultMessage("c", "t", b"raw"), "ToolResultMessage.content"),  # type: ignore[arg-type]
    ],
)
def test_content_that_is_not_content_names_the_class_the_field_and_what_it_accepts(
    make: Any, owner: str
) -> None:
    with pytest.raises(TypeError) as info:
        make()
    text = str(info.value)
    assert text.startswith(f"{owner} must be a str, one content block or a list of them, got ")
    assert "TextContent" in text and "dict" in text  # what it accepts
    shown = "".join(traceback.format_exception(info.value))
    assert "During handling" not in shown and "direct cause" not in shown  # no inner traceback


def test_bytes_content_says_to_decode_it() -> None:
    with pytest.raises(TypeError, match=r"got bytes \(b'hi'\) \(decode bytes to a str first\)"):
        UserMessage(b"hi")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "make",
    [
        lambda: UserMessage([TextContent("a"), None]),  # type: ignore[list-item]
        lambda: AssistantMessage(iter(["a", 7])),  # type: ignore[list-item]
        lambda: ToolResultMessage("c", "t", ("a", 2.5)),  # type: ignore[arg-type]
    ],
)
def test_a_bad_block_is_named_by_class_field_and_index(make: Any) -> None:
    with pytest.raises(
        TypeError,
        match=r"^(User|Assistant|ToolResult)Message\.content\[1\]: "
        r"content blocks must be MessageContent",
    ):
        make()


def test_one_dict_block_is_one_block_not_its_keys() -> None:
    block = {"type": "text", "text": "hi"}
    assert UserMessage(block).content == [block]  # type: ignore[arg-type]
    assert AssistantMessage(MappingProxyType(block)).content == [block]  # type: ignore[arg-type]


def test_positional_order_follows_design() -> None:
    call = AgentToolCall("c1", "getTime", {"tz": "UTC"}, "function")
    assert (call.id, call.name, call.arguments, call.type) == ("c1", "getTime", {"tz": "UTC"}, "function")
    result = AgentToolResult([TextContent("x")], {"k": 1}, USAGE, True)
    assert (result.details, result.usage, result.terminate) == ({"k": 1}, USAGE, True)
    fin = FinalizedOutcome(call, result, True)
    assert (fin.tool_call, fin.result, fin.is_error) == (call, result, True)
    batch = AgentToolCallBatch([], True)
    assert batch.terminate is True

    def before(_ctx: Any, _sig: Any) -> None:
        return None

    def after(_ctx: Any, _sig: Any) -> None:
        return None

    tool = make_tool("t")
    config = AgentLoopConfig([tool], before, after, "parallel")
    assert (config.before_tool_call, config.after_tool_call, config.tool_execution) == (
        before,
        after,
        "parallel",
    )
    execute = ok_execute()
    tool2 = AgentTool("n", "L", "D", {"type": "object"}, execute, None, None, True)
    assert (tool2.label, tool2.description, tool2.execute, tool2.parallel_tool_execute) == (
        "L",
        "D",
        execute,
        True,
    )
    assert PreparedToolCall(tool2, call, {"a": 1}).args == {"a": 1}


# --- immutability ---------------------------------------------------------------------------------


def _frozen_instances() -> list[tuple[Any, str]]:
    call = AgentToolCall("c", "t", {})
    result = AgentToolResult([TextContent("x")])
    return [
        (TextContent("x"), "text"),
        (ImageContent("aGk=", "image/png"), "data"),
        (ThinkingContent("hmm", "sig"), "thinking"),
        (call, "name"),
        (UserMessage("x"), "content"),
        (AssistantMessage(["x"]), "stop_reason"),
        (ToolResultMessage("c", "t", ["x"]), "is_error"),
        (USAGE, "input"),
        (LlmModel("m"), "name"),
        (result, "terminate"),
        (AgentToolCallBatch([], False), "terminate"),
        (PreparedToolCall(make_tool("t"), call, {}), "args"),
        (ImmediateOutcome(result, True), "is_error"),
        (ExecutedOutcome(result, True), "is_error"),
        (FinalizedOutcome(call, result, True), "is_error"),
        (BeforeToolCallResult(True, "no"), "block"),
        (AfterToolCallResult(terminate=True), "terminate"),
        (ToolExecStartEvent("c", "t", {}), "tool_name"),
        (ToolExecUpdateEvent("c", "t", {}, 1), "partial_result"),
        (ToolExecEndEvent("c", "t", result, False), "is_error"),
        (make_tool("t"), "name"),
    ]


@pytest.mark.parametrize(
    ("instance", "field"),
    _frozen_instances(),
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else v,
)
def test_values_are_frozen(instance: Any, field: str) -> None:
    before = getattr(instance, field)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(instance, field, before)


# --- dict round trips -----------------------------------------------------------------------------


def _messages() -> list[AgentMessage]:
    return [
        UserMessage(
            [TextContent("look at this"), ImageContent("iVBORw0KGgo=", "image/jpeg")],
            timestamp=1_700_000_000_000,
        ),
        UserMessage("epoch", timestamp=0),
        AssistantMessage(
            content=[
                ThinkingContent("Let me think.", signature="sig-abc=="),
                ThinkingContent("unsigned"),
                TextContent("Checking the weather."),
                AgentToolCall("call_1", "getWeather", {"city": "Tokyo", "days": [1, 2]}),
                AgentToolCall("call_2", "bad", "{not json", type="custom"),
                {
                    "type": "tool_calls",
                    "tool_calls": [
                        {"id": "call_3", "name": "getTime", "arguments": {"timezone": "Asia/Tokyo"}},
                        {
                            "id": "call_4",
                            "type": "function",
                            "function": {"name": "getTime", "arguments": '{"timezone": "UTC"}'},
                        },
                    ],
                },
                {"type": "tool_call", "id": "call_5", "name": "listTools", "arguments": {}},
            ],
            api="openai-completions",
            provider="openai",
            model="gpt-x",
            usage=USAGE,
            stop_reason="toolUse",
            error_message="partial",
            timestamp=1_700_000_000_001,
        ),
        AssistantMessage(["plain"], stop_reason="", timestamp=5),
        ToolResultMessage(
            tool_call_id="call_1",
            tool_name="getWeather",
            content=[TextContent("Sunny"), ImageContent("R0lGOD", "image/gif")],
            details={"temp": 22.5, "nested": {"list": [1, "two", None, True]}, "addedToolNames": ["x"]},
            usage=USAGE,
            added_tool_names=["x"],
            is_error=True,
            timestamp=1_700_000_000_002,
        ),
        ToolResultMessage("c0", "t", []),
    ]


@pytest.mark.parametrize("message", _messages(), ids=lambda m: type(m).__name__)
def test_messages_round_trip_through_json(message: AgentMessage) -> None:
    data = message.to_dict()
    wire = json.loads(json.dumps(data))  # to_dict output is JSON-ready
    assert wire == data
    assert AgentMessage.from_dict(wire) == message
    assert type(message).from_dict(wire) == message
    assert AgentMessage.from_dict(wire).to_dict() == data


def test_round_trip_keeps_typed_blocks_typed() -> None:
    msg = _messages()[2]
    assert isinstance(msg, AssistantMessage)
    back = AgentMessage.from_dict(msg.to_dict())
    assert isinstance(back, AssistantMessage)
    kinds = [type(b).__name__ for b in back.content]
    assert kinds == [
        "ThinkingContent",
        "ThinkingContent",
        "TextContent",
        "AgentToolCall",
        "AgentToolCall",
        "dict",
        "dict",
    ]
    assert back.content[0] == ThinkingContent("Let me think.", "sig-abc==")
    assert back.content[4] == AgentToolCall("call_2", "bad", "{not json", "custom")
    assert back.usage == USAGE


def test_to_dict_does_not_alias_message_state() -> None:
    msg = ToolResultMessage("c", "t", ["x"], details={"inner": {"n": 1}})
    data = msg.to_dict()
    data["details"]["inner"]["n"] = 99
    data["content"].append({"type": "text", "text": "injected"})
    assert msg.details == {"inner": {"n": 1}}
    assert msg.content == [TextContent("x")]


def test_usage_and_model_round_trip() -> None:
    assert LlmUsage.from_dict(USAGE.to_dict()) == USAGE
    assert LlmUsage.from_dict({"input": 3}) == LlmUsage(input=3)
    model = LlmModel("gpt", "openai", "chat", "http://x", 128_000, 4096, True)
    assert LlmModel.from_dict(model.to_dict()) == model


def test_from_dict_unknown_role_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"role 'system'.*user, assistant or toolResult"):
        AgentMessage.from_dict({"role": "system", "content": []})
    with pytest.raises(ValueError, match="role None"):
        AgentMessage.from_dict({"content": []})


def test_subclass_from_dict_rejects_other_roles() -> None:
    data = UserMessage("x").to_dict()
    with pytest.raises(ValueError, match="as AssistantMessage; expected role assistant"):
        AssistantMessage.from_dict(data)
    assert isinstance(UserMessage.from_dict(data), UserMessage)


def test_role_cannot_be_forged() -> None:
    with pytest.raises(ValueError, match="role must be 'user'"):
        UserMessage("x", role="assistant")


# --- AgentTool construction -----------------------------------------------------------------------


def test_invalid_schema_raises_value_error_naming_the_tool() -> None:
    with pytest.raises(ValueError, match=r'Tool "broken": input_schema is not a valid JSON Schema'):
        make_tool("broken", schema={"type": "objekt"})
    with pytest.raises(ValueError, match=r'Tool "nested".*properties/city'):
        make_tool("nested", schema={"type": "object", "properties": {"city": {"type": 12}}})
    with pytest.raises(ValueError, match=r'Tool "notadict": input_schema must be a JSON Schema object'):
        make_tool("notadict", schema=["type", "object"])  # type: ignore[arg-type]


def test_valid_schema_is_compiled_once_at_construction() -> None:
    tool = make_tool("w", schema={"type": "object", "required": ["a"]})
    assert tool.schema_validator.is_valid({"a": 1})
    assert not tool.schema_validator.is_valid({})


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"timeout_s": 0}, "timeout_s must be a positive number of seconds"),
        ({"timeout_s": -1.5}, "timeout_s must be a positive number of seconds"),
        ({"timeout_s": "5"}, "timeout_s must be a positive number of seconds"),
        ({"timeout_s": True}, "timeout_s must be a positive number of seconds"),
    ],
)
def test_bad_timeout_is_rejected(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_tool("t", **kw)


def test_bad_name_and_execute_are_rejected() -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        make_tool("")
    with pytest.raises(TypeError, match='Tool "t": execute must be callable'):
        AgentTool("t", "T", "d", {"type": "object"}, "not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prepare_arguments must be callable"):
        make_tool("t", prepare_arguments=3)


# --- tool mappings --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [AgentContext, AgentLoopConfig, AgentState])
def test_tools_become_an_ordered_mapping_from_a_list(kind: type) -> None:
    tools = [make_tool(n) for n in ("zeta", "alpha", "mid")]
    holder = kind(tools=tools)
    assert list(holder.tools) == ["zeta", "alpha", "mid"]
    assert all(holder.tools[t.name] is t for t in tools)


@pytest.mark.parametrize("kind", [AgentContext, AgentLoopConfig])
def test_tools_from_any_mapping_keep_order(kind: type) -> None:
    b, a = make_tool("b"), make_tool("a")
    for mapping in (OrderedDict([("b", b), ("a", a)]), MappingProxyType({"b": b, "a": a})):
        holder = kind(tools=mapping)
        assert type(holder.tools) is dict
        assert list(holder.tools.items()) == [("b", b), ("a", a)]
    shared = {"b": b}
    assert kind(tools=shared).tools is shared  # a plain dict is shared, as in the spec
    assert kind().tools == {}
    assert kind(tools=None).tools == {}


def test_tools_must_be_agent_tools() -> None:
    with pytest.raises(TypeError, match="AgentTool instances"):
        AgentContext(tools=[object()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="AgentTool instances"):
        AgentLoopConfig(tools=OrderedDict(x=1))  # type: ignore[arg-type]


def test_loop_config_checks_the_execution_mode() -> None:
    assert AgentLoopConfig().tool_execution == "sequential"
    with pytest.raises(ValueError, match="tool_execution"):
        AgentLoopConfig(tool_execution="concurrent")  # type: ignore[arg-type]


# --- AbortSignal ----------------------------------------------------------------------------------


def test_abort_signal_starts_clear_and_aborts_once() -> None:
    signal = AbortSignal()
    assert not signal.aborted
    assert signal.wait(0) is False
    signal.abort("user pressed stop")
    signal.abort("second reason is ignored")
    assert signal.aborted and signal.reason == "user pressed stop"
    assert AbortSignal(aborted=True).aborted


def test_abort_from_another_thread_wakes_a_waiter() -> None:
    signal = AbortSignal()
    seen = threading.Event()

    def waiter() -> None:
        if signal.wait(WAIT_S):
            seen.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    aborter = threading.Thread(target=signal.abort)
    aborter.start()
    aborter.join(WAIT_S)
    thread.join(WAIT_S)
    assert seen.is_set()
    assert signal.aborted


def test_on_abort_callbacks_run_exactly_once_under_concurrent_aborts() -> None:
    signal = AbortSignal()
    calls: list[str] = []
    lock = threading.Lock()

    def record(tag: str) -> Any:
        def callback() -> None:
            with lock:
                calls.append(tag)

        return callback

    signal.on_abort(record("a"))
    signal.on_abort(record("b"))
    n = 8
    barrier = threading.Barrier(n, timeout=WAIT_S)

    def hammer() -> None:
        barrier.wait()
        signal.abort()

    threads = [threading.Thread(target=hammer) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert sorted(calls) == ["a", "b"]


def test_on_abort_after_abort_runs_immediately_and_unregister_works() -> None:
    signal = AbortSignal()
    calls: list[str] = []
    unregister = signal.on_abort(lambda: calls.append("removed"))
    unregister()
    signal.abort()
    assert calls == []
    signal.on_abort(lambda: calls.append("late"))
    assert calls == ["late"]


def test_a_raising_abort_callback_does_not_stop_the_others() -> None:
    signal = AbortSignal()
    calls: list[str] = []

    def boom() -> None:
        raise RuntimeError("callback failed")

    signal.on_abort(boom)
    signal.on_abort(lambda: calls.append("second"))
    signal.abort()  # must not raise
    assert signal.aborted
    assert calls == ["second"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: UserMessage("user", [TextContent("x")]),  # type: ignore[arg-type]
        lambda: AssistantMessage([TextContent("x")], timestamp="now"),  # type: ignore[arg-type]
        lambda: ToolResultMessage("c1", "t", "ok", timestamp=1.5),  # type: ignore[arg-type]
    ],
)
def test_a_misplaced_argument_is_caught_by_the_timestamp_check(make: Any) -> None:
    with pytest.raises(TypeError, match="timestamp must be an int"):
        make()


@pytest.mark.parametrize(
    "kw", [{"max_parallel_tools": True}, {"max_parallel_tools": 2.0}, {"tool_timeout_s": False}]
)
def test_loop_config_rejects_booleans_and_wrong_types(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be a positive"):
        AgentLoopConfig(**kw)


def test_a_callback_registered_after_abort_that_raises_is_logged_not_raised() -> None:
    signal = AbortSignal(aborted=True)

    def broken() -> None:
        raise RuntimeError("callback broke")

    signal.on_abort(broken)  # does not raise
    assert signal.wait(0)

"""``ScriptedModel``: replies in order, in every documented form, from Python or a file (a saved
session replays the assistant's side); bad scripts are refused up front, naming the reply."""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yiemagent import (
    AgentToolCall,
    AssistantMessage,
    MessageUpdateEvent,
    TextContent,
    ThinkingContent,
    YiemAgent,
    function_tool,
)
from yiemagent.testing._scripted import (
    DEFAULT_KEEP_REQUESTS,
    MAX_SCRIPT_BYTES,
    ScriptedModel,
    ScriptError,
    ScriptExhaustedError,
)

WAIT = 60.0  # seconds a read or a command may take before the test fails


def test_replies_come_in_order_in_every_form() -> None:
    given = AssistantMessage(content=[TextContent("given")])
    model = ScriptedModel(
        [
            "plain text",
            {
                "text": "calling",
                "thinking": "hmm",
                "tool_calls": [{"name": "t", "arguments": {"a": 1}}, {"name": "u", "id": "mine"}],
            },
            {"content": [{"type": "text", "text": "as dict"}], "stop_reason": "length"},
            given,
            lambda request: f"saw {len(request['messages'])} messages",
            {"error_message": "rate limited"},
        ]
    )
    first = model({"messages": []})
    assert first.content == [TextContent("plain text")] and first.stop_reason == "stop"
    second = model({})
    assert second.content == [
        ThinkingContent("hmm"),
        TextContent("calling"),
        AgentToolCall("call_2_1", "t", {"a": 1}),
        AgentToolCall("mine", "u", {}),
    ]
    assert second.stop_reason == "toolUse"
    assert model({}).stop_reason == "length"
    assert model({}).content == given.content
    assert model({"messages": [1, 2]}).content == [TextContent("saw 2 messages")]
    error = model({})
    assert error.stop_reason == "error" and error.error_message == "rate limited"
    assert model.calls == 6 and len(model.requests) == 6
    with pytest.raises(ScriptExhaustedError, match="has 6 replies"):
        model({})


def test_text_streams_word_by_word_to_on_update() -> None:
    updates: list[MessageUpdateEvent] = []
    ScriptedModel(["It is  noon."])({}, on_update=updates.append)
    assert [u.delta for u in updates] == ["It ", "is  ", "noon."]
    assert all(u.kind == "text" for u in updates)
    quiet: list[MessageUpdateEvent] = []
    ScriptedModel(["x y"], stream=False)({}, on_update=quiet.append)
    assert quiet == []


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (42, "reply 1: a reply must be a string or an object"),
        ({"txt": "x"}, "unknown key(s) 'txt'"),
        ({"tool_calls": [{"arguments": {}}]}, 'must be an object with a "name"'),
        ({"tool_calls": [{"name": "t", "args": {}}]}, "unknown tool-call key(s) args"),
        ({"tool_calls": "t"}, '"tool_calls" must be a list'),
        ({"role": "user", "content": []}, "a reply is the assistant's"),
    ],
)
def test_bad_replies_are_refused_when_the_script_is_made(reply: Any, says: str) -> None:
    with pytest.raises(ScriptError) as info:
        ScriptedModel([reply])
    assert says in str(info.value)


def test_a_file_holds_a_list_or_an_object_of_replies(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(["a", {"text": "b"}]), encoding="utf-8")
    assert [m({}).content for m in [ScriptedModel.from_file(listed)] for _ in range(2)] == [
        [TextContent("a")],
        [TextContent("b")],
    ]
    wrapped = tmp_path / "object.json"
    wrapped.write_text(json.dumps({"replies": ["c"]}), encoding="utf-8")
    assert ScriptedModel.from_file(wrapped)({}).content == [TextContent("c")]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1,", "is not valid JSON"),
        ('{"x": NaN}', "is not valid JSON"),
        ('"just text"', "must be a JSON list of replies"),
        ('[{"text": "ok"}, {"bad": 1}]', "reply 2"),
    ],
)
def test_bad_files_say_what_is_wrong(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        ScriptedModel.from_file(path)
    assert says in str(info.value) and str(path) in str(info.value)
    with pytest.raises(ScriptError, match="cannot read"):
        ScriptedModel.from_file(tmp_path / "missing.json")


def test_a_saved_session_replays_the_conversation(tmp_path: Path) -> None:
    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first.
            b: The second.
        """
        return a + b

    original = ScriptedModel([{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 40}}]}, "It is 42."])
    with YiemAgent(llm_call=original, tools=[add]) as agent:
        agent.prompt("2 + 40?", timeout=10)
        agent.save(tmp_path / "session.json")
        history = agent.messages
    replay = ScriptedModel.from_file(tmp_path / "session.json")
    with YiemAgent(llm_call=replay, tools=[add]) as agent:
        answer = agent.prompt("2 + 40?", timeout=10)
        assert answer.content == [TextContent("It is 42.")]
        assert [m.to_dict()["role"] for m in agent.messages] == [m.to_dict()["role"] for m in history]
        assert agent.messages[2].content == history[2].content  # the tool ran again


# -- bounded memory ----------------------------------------------------------------------------


def test_requests_holds_the_latest_ones_kept_as_given() -> None:
    model = ScriptedModel(["ok"] * 5, keep_requests=2)
    sent = [{"n": n} for n in range(5)]
    for request in sent:
        model(request)
    assert model.calls == 5 and model.keep_requests == 2
    assert model.requests == sent[3:] and model.requests[0] is sent[3]  # a reference, no copy
    everything = ScriptedModel(["ok"] * 3, keep_requests=None)
    nothing = ScriptedModel(["ok"] * 3, keep_requests=0)
    for request in sent[:3]:
        everything(request)
        nothing(request)
    assert everything.requests == sent[:3] and nothing.requests == [] and nothing.calls == 3


def test_by_default_the_latest_hundred_requests_are_kept() -> None:
    model = ScriptedModel(["ok"] * 150)
    for n in range(150):
        model({"n": n})
    assert model.keep_requests == DEFAULT_KEEP_REQUESTS == 100
    assert [r["n"] for r in model.requests] == list(range(50, 150))


@pytest.mark.parametrize("bad", [-1, True, 1.5, "3"])
def test_keep_requests_must_be_a_count_or_none(bad: Any) -> None:
    with pytest.raises(ValueError, match="keep_requests must be a whole number from 0"):
        ScriptedModel(["ok"], keep_requests=bad)


def test_memory_stays_flat_over_thousands_of_prompts() -> None:
    """5,000 prompts, the history reset every 100: what the model keeps must not grow with the
    number of prompts (it kept every request, each with its history, +14 MB here)."""
    model = ScriptedModel(["ok"] * 5000, stream=False)
    tracemalloc.start()
    try:
        with YiemAgent(llm_call=model) as agent:
            for n in range(1, 5001):
                agent.prompt(f"question {n}", timeout=30)
                if n % 100 == 0:
                    agent.reset()
                if n == 1000:
                    gc.collect()
                    at_1000 = tracemalloc.get_traced_memory()[0]
            gc.collect()
            at_5000 = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert model.calls == 5000 and len(model.requests) == 100
    assert at_5000 - at_1000 < 2 * 1024 * 1024, f"grew by {(at_5000 - at_1000) / 2**20:.1f} MiB"


# -- hostile script files and replies -----------------------------------------------------------


def read_in_thread(path: Path) -> BaseException | ScriptedModel | None:
    """``ScriptedModel.from_file(path)`` on a thread, waited for with a bound: what it returned
    or raised, or ``None`` if it was still reading (it hung)."""
    outcome: list[BaseException | ScriptedModel] = []

    def read() -> None:
        try:
            outcome.append(ScriptedModel.from_file(path))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(WAIT)
    return outcome[0] if outcome else None


def test_a_script_file_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:  # sparse: 17 MiB of nothing
        handle.truncate(MAX_SCRIPT_BYTES + 1)
    with pytest.raises(ScriptError) as info:
        ScriptedModel.from_file(huge)
    assert str(huge) in str(info.value)
    assert "larger than the limit of 16,777,216 bytes (16 MiB)" in str(info.value)


@pytest.mark.skipif(os.name != "posix", reason="FIFOs and /dev/zero: POSIX")
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_refused_without_hanging(kind: str, tmp_path: Path) -> None:
    path = Path(kind)
    if kind == "fifo":
        path = tmp_path / "script.json"
        os.mkfifo(path)  # no writer: a plain open would block for ever
    outcome = read_in_thread(path)
    assert outcome is not None, f"reading {path} did not end within {WAIT} s"
    assert isinstance(outcome, ScriptError), outcome
    assert str(path) in str(outcome) and "not a regular file" in str(outcome)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


BLOCK = {"type": "text", "text": "hi"}


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ({"content": [BLOCK], "timestamp": math.inf}, '"timestamp" must be milliseconds'),
        ({"content": [BLOCK], "timestamp": 10**400}, '"timestamp" must be milliseconds'),
        ({"content": [BLOCK], "timestamp": "noon"}, '"timestamp" must be milliseconds'),
        ({"content": [BLOCK], "timestamp": True}, '"timestamp" must be milliseconds'),
        ({"content": "hi"}, '"content" must be a list of blocks'),
        ({"content": [5]}, '"content"[0] must be an object with a "type"'),
        ({"content": [{"text": "hi"}]}, '"content"[0] must have a "type" string'),
        ({"content": [{"type": "text", "text": 5}]}, '"content"[0]."text" must be a string'),
        ({"content": [{"type": "toolCall", "id": 1, "name": "t"}]}, '"content"[0]."id" must be a string'),
        ({"content": [], "usage": {"input": "many"}}, '"usage"."input" must be a number'),
        ({"content": [], "usage": 7}, '"usage" must be an object'),
        ({"content": [], "model": ["x"]}, '"model" must be a string'),
        (
            {"content": [{"type": "toolCall", "id": "c", "name": "t", "arguments": nested(5000)}]},
            "not a message dict: RecursionError",
        ),
        ({"text": 5}, '"text" must be a string'),
        ({"stop_reason": 3}, '"stop_reason" must be a string'),
        ({"tool_calls": [{"name": "t", "id": 7}]}, 'a tool call\'s "id" must be a string'),
    ],
)
def test_bad_reply_fields_are_script_errors_naming_the_reply_and_field(reply: Any, says: str) -> None:
    with pytest.raises(ScriptError) as info:
        ScriptedModel(["first", reply])
    assert str(info.value).startswith("reply 2: ") and says in str(info.value), str(info.value)


def test_an_out_of_range_timestamp_in_a_file_names_the_file_reply_and_field(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(
        '["a", {"content": [{"type": "text", "text": "b"}], "timestamp": 1e400}]', encoding="utf-8"
    )
    with pytest.raises(ScriptError) as info:
        ScriptedModel.from_file(path)
    assert f'the script {path}: reply 2: "timestamp" must be milliseconds' in str(info.value)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'["caf\xe9"]', "is not UTF-8 text (byte 5 is 0xe9)"),
        (b"[" * 100_000 + b"]" * 100_000, "is nested too deeply to read"),
        (b"[" + b"9" * 5000 + b"]", "an integer of 5000 digits is too long (at most 4300)"),
    ],
)
def test_unreadable_script_files_say_why(content: bytes, says: str, tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_bytes(content)
    with pytest.raises(ScriptError) as info:
        ScriptedModel.from_file(path)
    assert str(path) in str(info.value) and says in str(info.value), str(info.value)


def test_the_cli_refuses_a_bad_script_with_exit_status_2(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:
        handle.truncate(MAX_SCRIPT_BYTES + 1)
    stamp = tmp_path / "stamp.json"
    stamp.write_text('[{"content": [], "timestamp": 1e400}]', encoding="utf-8")
    for script, says in ((huge, "16 MiB"), (stamp, 'reply 1: "timestamp"')):
        done = subprocess.run(
            [sys.executable, "-m", "yiemagent", "run", "--model", f"scripted:{script}", "hi"],
            capture_output=True,
            text=True,
            timeout=WAIT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert str(script) in done.stderr and says in done.stderr, done.stderr


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
BLOCKS = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "thinking", "toolCall", "image", "other"]) | VALUES},
    optional={
        key: VALUES
        for key in (
            "text",
            "thinking",
            "signature",
            "id",
            "name",
            "arguments",
            "call_type",
            "data",
            "mime_type",
        )
    },
)
MESSAGE_DICTS = st.fixed_dictionaries(
    {"content": st.lists(BLOCKS, max_size=3) | VALUES},
    optional={
        "timestamp": st.sampled_from([math.inf, -math.inf, 1e300, -1, 0, 1.5]) | VALUES,
        "usage": st.dictionaries(st.sampled_from(["input", "output", "cost"]), VALUES) | VALUES,
        **{key: VALUES for key in ("role", "api", "provider", "model", "stop_reason", "error_message")},
    },
)
SHORTHANDS = st.fixed_dictionaries(
    {},
    optional={
        "text": VALUES,
        "thinking": VALUES,
        "stop_reason": VALUES,
        "error_message": VALUES,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {}, optional={"name": st.text(max_size=4) | VALUES, "arguments": VALUES, "id": VALUES}
            ),
            max_size=2,
        )
        | VALUES,
    },
)
REPLIES = st.one_of(st.text(max_size=8), VALUES, MESSAGE_DICTS, SHORTHANDS)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.one_of(st.lists(REPLIES, max_size=4), st.dictionaries(st.just("replies"), REPLIES)))
def test_only_script_errors_escape_a_script_file(script: Any, tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script).replace("Infinity", "1e400"), encoding="utf-8")
    try:
        model = ScriptedModel.from_file(path)
    except ScriptError:
        return
    for _ in model.replies:
        assert isinstance(model({"messages": []}), AssistantMessage)


def test_a_script_name_with_a_nul_character_is_a_script_error() -> None:
    with pytest.raises(ScriptError, match="its name holds a NUL character"):
        ScriptedModel.from_file("script\0.json")

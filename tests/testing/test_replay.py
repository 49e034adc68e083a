"""``record`` and ``replay``: a run written to a cassette and answered from it offline, through a
real ``YiemAgent`` (worker thread, channels, pipeline) and real files; strict replays name the
first field that differs, cassettes are the same file on every recording, and no key is written."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yiemagent import (
    AgentContext,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    LlmUsage,
    MessageUpdateEvent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
)
from yiemagent.core._request import LlmRequest
from yiemagent.core._spec_format import SpecViews
from yiemagent.errors import CassetteError, LlmError, ReplayMismatchError
from yiemagent.testing import ScriptedModel, read_cassette, record, replay
from yiemagent.testing._cassette import dump_cassette
from yiemagent.testing._cassette_form import CassetteForm
from yiemagent.testing.parity import validation_problems
from yiemagent.testing.parity._normalise import Normaliser

WAIT = 20.0


def city_tool(name: str = "getTime", text: str = "It is 12:00 in {city}.") -> AgentTool:
    """A tool whose result depends on its arguments only."""

    def execute(_id: str, args: dict[str, Any], _signal: Any, _partial: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(text.format(city=args.get("city", "?")))])

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return AgentTool(name, name, f"The {name} tool.", schema, execute)


def tokyo_replies() -> list[Any]:
    return [
        {"tool_calls": [{"name": "getTime", "arguments": {"city": "Tokyo"}}]},
        "It is noon in Tokyo.",
    ]


@attrs.frozen
class Run:
    """A finished agent's responses and history."""

    responses: list[AssistantMessage]
    history: list[Any]


def run(llm_call: Any, prompts: tuple[str, ...] = ("What time is it in Tokyo?",), **options: Any) -> Run:
    """Answer ``prompts`` with a fresh agent on ``llm_call``; its responses and history."""
    options.setdefault("tools", [city_tool(), city_tool("getWeather", "Sunny in {city}.")])
    options.setdefault("system_prompt", "You tell the time.")
    with YiemAgent(llm_call=llm_call, **options) as agent:
        responses = [agent.prompt(p, timeout=WAIT) for p in prompts]
        return Run(responses, list(agent.messages))


def normalised(done: Run) -> list[dict[str, Any]]:
    """The responses and history in the conformance trace's form (ids numbered, no timestamps):
    what a replay must give exactly."""
    normaliser = Normaliser(())
    return [normaliser.message(m.to_dict()) for m in [*done.history, *done.responses]]


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "tokyo.json"
    run(record(ScriptedModel(tokyo_replies()), path))
    return path


def first_call(request: Any) -> bool:
    """Whether ``request`` (the spec's view) holds no tool result yet."""
    return not any(m["role"] == "tool" for m in request["messages"])


def last_response(done: Run) -> AssistantMessage:
    return done.responses[-1]


# -- what a cassette holds -----------------------------------------------------------------------


def test_a_cassette_holds_each_request_and_reply_in_the_schemas_form(cassette: Path) -> None:
    data = json.loads(cassette.read_text(encoding="utf-8"))
    assert validation_problems(data, "cassette") == []
    first, second = data["interactions"]
    assert data["version"] == 2
    assert first["request"] == {
        "system_prompt": "You tell the time.",
        "kept": 0,
        "messages": [{"role": "user", "text": "What time is it in Tokyo?"}],
        "tools": [
            {"name": "getTime", "description": "The getTime tool.", "input_schema": city_tool().input_schema},
            {
                "name": "getWeather",
                "description": "The getWeather tool.",
                "input_schema": city_tool().input_schema,
            },
        ],
        "session_id": "session_1",
    }
    assert first["reply"]["content"] == [
        {"type": "toolCall", "id": "call_1", "name": "getTime", "arguments": {"city": "Tokyo"}}
    ]
    # The second request is stored as what it adds: it keeps the first's one message and tools.
    assert second["request"]["kept"] == 1 and "tools" not in second["request"]
    whole = read_cassette(cassette).interactions[1].request
    assert whole["messages"][0] == first["request"]["messages"][0]
    assert whole["tools"] == first["request"]["tools"]
    assert (
        second["request"]["messages"]
        == whole["messages"][1:]
        == [
            {
                "role": "assistant",
                "text": "",
                "tool_calls": [{"id": "call_1", "name": "getTime", "arguments": {"city": "Tokyo"}}],
            },
            {
                "role": "toolResult",
                "tool_call_id": "call_1",
                "text": "It is 12:00 in Tokyo.",
                "is_error": False,
                "error_kind": None,
            },
        ]
    )
    # The scripted model streams its text word by word; the pieces are kept in order.
    assert [d["delta"] for d in second["deltas"]] == ["It ", "is ", "noon ", "in ", "Tokyo."]
    assert "timestamp" not in cassette.read_text(encoding="utf-8")


def test_two_recordings_of_a_run_are_the_same_file_whatever_ids_and_clocks_say(tmp_path: Path) -> None:
    """The ids a server makes up and the session id change on every run; the cassette does not."""

    def model_with_fresh_ids(request: Any) -> AssistantMessage:
        if first_call(request):
            call = AgentToolCall(f"srv_{uuid.uuid4().hex}", "getTime", {"city": "Tokyo"})
            return AssistantMessage([call], stop_reason="toolUse", usage=LlmUsage(input=12, output=3))
        return AssistantMessage([TextContent("Noon.")], usage=LlmUsage(input=30, output=2))

    texts = []
    for n in range(2):
        path = tmp_path / f"run{n}.json"
        run(record(model_with_fresh_ids, path))
        texts.append(path.read_text(encoding="utf-8"))
    assert texts[0] == texts[1]
    # The recorder's pieces make the same text as the whole cassette written at once.
    assert dump_cassette(read_cassette(tmp_path / "run0.json")) == texts[0]
    assert "srv_" not in texts[0] and '"call_1"' in texts[0]
    assert '"usage": {"input": 12, "output": 3' in texts[0]


def test_the_cassette_is_written_after_every_call(tmp_path: Path) -> None:
    path = tmp_path / "live.json"
    seen: list[int] = []

    def model(request: Any) -> AssistantMessage:
        seen.append(len(json.loads(path.read_text(encoding="utf-8"))["interactions"]))
        return (
            ScriptedModel(tokyo_replies())(request) if not seen[1:] else AssistantMessage([TextContent("ok")])
        )

    run(record(model, path))
    assert seen == [0, 1]
    assert len(read_cassette(path).interactions) == 2


def test_record_passes_only_the_keywords_the_call_declares(tmp_path: Path) -> None:
    received: list[dict[str, Any]] = []

    def plain(request: Any) -> AssistantMessage:
        return AssistantMessage([TextContent("plain")])

    def keyed(request: Any, *, signal: Any = None, session_id: str | None = None) -> AssistantMessage:
        received.append({"signal": signal is not None, "session_id": session_id})
        return AssistantMessage([TextContent("keyed")])

    assert last_response(run(record(plain, tmp_path / "a.json"), ("hi",))).content == [TextContent("plain")]
    done = run(record(keyed, tmp_path / "b.json"), ("hi",), session_id="s-1")
    assert received == [{"signal": True, "session_id": "s-1"}]
    assert last_response(done).content == [TextContent("keyed")]


def test_no_key_reaches_the_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-" + "k3y" * 12
    monkeypatch.setenv("OPENAI_API_KEY", key)
    other = "my-own-secret-token-1234"

    def echoing(request: Any) -> AssistantMessage:
        return AssistantMessage([TextContent(f"your key is {key} and {other}")])

    path = tmp_path / "keys.json"
    run(record(echoing, path, secrets=[other]), (f"use {key}",))
    text = path.read_text(encoding="utf-8")
    assert key not in text and other not in text
    assert "your key is *** and ***" in text and "use ***" in text


def test_a_reply_that_is_not_json_still_makes_a_readable_cassette(tmp_path: Path) -> None:
    """A model may send NaN or a value JSON cannot hold; the cassette must stay readable, and
    its replay refuses those arguments as the run did."""

    def odd(request: Any) -> AssistantMessage:
        if first_call(request):
            calls = [
                AgentToolCall("a", "getTime", {"city": float("nan")}),
                AgentToolCall("b", "getTime", {"city": object()}),
            ]
            return AssistantMessage([*calls, {"type": "note", "value": float("inf")}], stop_reason="toolUse")
        return AssistantMessage([TextContent("Done.")])

    path = tmp_path / "odd.json"
    done = run(record(odd, path))
    assert [m.is_error for m in done.history if isinstance(m, ToolResultMessage)] == [True, True]
    blocks = read_cassette(path).interactions[0].reply["content"]  # type: ignore[index]
    assert [b.get("arguments") for b in blocks] == ["<unusable>", "<unusable>", None]
    assert blocks[2] == {"type": "note", "value": "inf"}
    replayed = run(replay(path, "sequence"))
    assert [m.is_error for m in replayed.history if isinstance(m, ToolResultMessage)] == [True, True]
    assert last_response(replayed).content == [TextContent("Done.")]


def test_an_unwritable_path_is_an_error_before_any_call(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match=r"cannot write the cassette .*missing.*folder that exists"):
        record(ScriptedModel(["x"]), tmp_path / "missing" / "c.json")


# -- replay --------------------------------------------------------------------------------------


def test_a_replay_gives_the_recorded_run_with_no_model(cassette: Path) -> None:
    recorded = normalised(run(ScriptedModel(tokyo_replies())))
    assert len(recorded) == 5
    for _ in range(3):
        assert normalised(run(replay(cassette))) == recorded
        assert normalised(run(replay(cassette, match="sequence"))) == recorded


def test_a_replay_needs_no_network(cassette: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the replay opened a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert last_response(run(replay(cassette))).content == [TextContent("It is noon in Tokyo.")]


def test_a_replay_streams_the_recorded_pieces(cassette: Path) -> None:
    pieces: list[MessageUpdateEvent] = []
    player = replay(cassette, "sequence")
    player({}, None)
    reply = player({}, pieces.append)
    assert [p.delta for p in pieces] == ["It ", "is ", "noon ", "in ", "Tokyo."]
    assert {(p.kind, p.content_index) for p in pieces} == {("text", 0)}
    assert reply.content == [TextContent("It is noon in Tokyo.")]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"system_prompt": "You tell the weather."}, 'request.system_prompt: expected "You tell the time."'),
        ({"tools": [city_tool()]}, 'request.tools[1]: expected {"name":"getWeather"'),
        (
            {"tools": [city_tool(), city_tool("getWeather"), city_tool("getNews")]},
            'request.tools[0].name: expected "getTime", actual "getNews"',  # tools are sorted by name
        ),
    ],
)
def test_a_strict_replay_names_the_first_field_that_differs(
    cassette: Path, change: dict[str, Any], field: str
) -> None:
    response = last_response(run(replay(cassette), **change))
    assert response.stop_reason == "error"
    assert "ReplayMismatchError: call 1 does not match the cassette" in (response.error_message or "")
    assert field in (response.error_message or "")
    assert "match='sequence'" in (response.error_message or "")


def test_a_changed_tool_result_is_named_at_the_call_it_reaches(cassette: Path) -> None:
    done = run(replay(cassette), tools=[city_tool(text="It is 13:00 in {city}."), city_tool("getWeather")])
    message = last_response(done).error_message or ""
    assert "call 2 does not match" in message
    assert (
        'request.messages[2].text: expected "It is 12:00 in Tokyo.", actual "It is 13:00 in Tokyo."'
        in message
    )


def test_a_changed_prompt_is_named(cassette: Path) -> None:
    message = last_response(run(replay(cassette), ("What time is it in Oslo?",))).error_message or ""
    assert 'request.messages[0].text: expected "What time is it in Tokyo?"' in message


def test_a_change_early_in_the_history_is_found_at_a_later_call(cassette: Path) -> None:
    """Only the messages a request shares with the one before (the same objects) are taken as
    checked; a context hook that rewrites an earlier message is caught."""
    calls = []

    def rewrite_later(state: Any) -> Any:
        calls.append(1)
        messages = list(state.messages)
        if len(calls) == 2:
            messages[0] = UserMessage("What time is it in Lima?")
        return AgentContext(state.system_prompt, messages, state.tools)

    message = last_response(run(replay(cassette), prepare_context=rewrite_later)).error_message or ""
    assert "call 2 does not match" in message
    assert (
        'request.messages[0].text: expected "What time is it in Tokyo?", actual "What time is it in Lima?"'
        in message
    )


def test_a_sequence_replay_answers_whatever_is_asked(cassette: Path) -> None:
    done = run(replay(cassette, match="sequence"), system_prompt="Something else.", tools=[city_tool()])
    assert last_response(done).content == [TextContent("It is noon in Tokyo.")]


def test_a_run_longer_than_the_recording_ends_with_an_error_and_the_agent_goes_on(cassette: Path) -> None:
    player = replay(cassette)
    with YiemAgent(
        llm_call=player, tools=[city_tool(), city_tool("getWeather")], system_prompt="You tell the time."
    ) as agent:
        assert agent.prompt("What time is it in Tokyo?", timeout=WAIT).stop_reason == "stop"
        extra = agent.prompt("And in Oslo?", timeout=WAIT)
        assert extra.stop_reason == "error"
        assert "holds 2 calls and this is call 3" in (extra.error_message or "")
    assert player.calls == 3 and player.remaining == 0


def test_calls_without_ids_replay_strictly(tmp_path: Path) -> None:
    """The agent names a call that came without an id with a fresh random id on every run; the
    cassette numbers it all the same, so the replay still matches."""
    replies = [
        AssistantMessage([AgentToolCall("", "getTime", {"city": "Tokyo"})], stop_reason="toolUse"),
        "Noon.",
    ]
    path = tmp_path / "no-ids.json"
    run(record(ScriptedModel(replies), path))
    assert '"call_1"' in path.read_text(encoding="utf-8")
    for _ in range(2):
        assert last_response(run(replay(path))).content == [TextContent("Noon.")]


def test_a_recorded_error_is_raised_again(tmp_path: Path) -> None:
    def failing(request: Any) -> AssistantMessage:
        raise LlmError("OpenAI refused the request (HTTP 429): slow down", status=429)

    path = tmp_path / "error.json"
    first = last_response(run(record(failing, path), ("hi",)))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["interactions"][0]["error"] == {
        "type": "LlmError",
        "message": "OpenAI refused the request (HTTP 429): slow down",
        "status": 429,
    }
    with pytest.raises(LlmError) as raised:
        replay(path, "sequence")({})
    assert raised.value.status == 429 and not isinstance(raised.value, ReplayMismatchError)
    again = last_response(run(replay(path), ("hi",)))
    assert again.stop_reason == first.stop_reason == "error"
    assert again.error_message == first.error_message


def test_concurrent_replays_take_distinct_calls(tmp_path: Path) -> None:
    path = tmp_path / "many.json"
    recorder = record(ScriptedModel([f"answer {i}" for i in range(40)]), path)
    for _ in range(40):
        recorder({})
    player = replay(path, "sequence")
    start = threading.Barrier(4)
    answers: list[str] = []
    lock = threading.Lock()

    def take() -> None:
        start.wait(WAIT)
        for _ in range(10):
            text = player({}).content[0]
            assert isinstance(text, TextContent)
            with lock:
                answers.append(text.text)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert sorted(answers) == sorted(f"answer {i}" for i in range(40))


# -- bad cassettes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("{not json", "$: not JSON"),
        ('{"format": "yiemagent-cassette", "version": 9, "interactions": []}', "$.version: version 9"),
        ('{"format": "yiemagent-cassette", "version": 1}', "'interactions' is a required property"),
        (
            '{"format": "yiemagent-cassette", "version": 1, "interactions": [{"request": '
            '{"system_prompt": "", "messages": [], "tools": [], "session_id": null}}]}',
            "$.interactions[0]",
        ),
        (
            '{"format": "yiemagent-cassette", "version": 1, "interactions": [{"request": '
            '{"system_prompt": "", "messages": [], "tools": [], "session_id": null}, '
            '"reply": {"content": [{"type": "toolCall", "id": 3}], "stop_reason": "stop"}}]}',
            "$.interactions[0].reply",
        ),
    ],
)
def test_a_bad_cassette_names_the_file_and_the_field(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CassetteError) as raised:
        replay(path)
    message = str(raised.value)
    assert str(path) in message and where in message and "record it again" in message


def test_a_missing_cassette_and_a_bad_match_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="cannot read the file"):
        replay(tmp_path / "nowhere.json")
    with pytest.raises(ValueError, match="match must be 'strict' or 'sequence'"):
        replay(tmp_path / "nowhere.json", match="fuzzy")  # type: ignore[arg-type]


def test_ids_are_numbered_in_order_of_first_appearance(tmp_path: Path) -> None:
    counter = itertools.count(1)

    def two_calls(request: Any) -> AssistantMessage:
        if first_call(request):
            calls = [AgentToolCall(f"z{next(counter)}", "getTime", {"city": c}) for c in ("Oslo", "Lima")]
            return AssistantMessage(calls, stop_reason="toolUse")
        return AssistantMessage([TextContent("Done.")])

    path = tmp_path / "two.json"
    run(record(two_calls, path))
    second = read_cassette(path).interactions[1].request["messages"]
    assert [c["id"] for c in second[1]["tool_calls"]] == ["call_1", "call_2"]
    assert [m["tool_call_id"] for m in second[2:]] == ["call_1", "call_2"]


# -- hostile cassettes ----------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
interaction_parts = st.fixed_dictionaries(
    {"request": json_values},
    optional={"reply": json_values, "error": json_values, "deltas": json_values},
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {
                "format": st.just("yiemagent-cassette"),
                "version": st.just(1),
                "interactions": st.lists(interaction_parts, max_size=3),
            }
        ),
    )
)
def test_any_json_is_a_cassette_or_a_cassette_error(tmp_path: Path, data: Any) -> None:
    """Whatever a cassette file holds, replay either reads it or raises ``CassetteError``; one
    it reads answers every call with a reply or an ``LlmError``, never another exception."""
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    try:
        player = replay(path, "sequence")
    except CassetteError as exc:
        assert str(path) in str(exc)
        return
    for _ in range(len(player.cassette.interactions) + 1):
        with contextlib.suppress(LlmError):
            assert isinstance(player({}), AssistantMessage)


# -- the direct reading of a typed request is its spec view's --------------------------------------


class SpecOnly(CassetteForm):
    """The cassette form read through the spec view only."""

    def _direct(self, request: Any) -> None:
        return None


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
arguments = st.one_of(
    st.dictionaries(
        texts, st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts, max_size=3
    ),
    st.sampled_from(['{"a": 1}', "{not json", "[1, 2]", "", "null"]),
)
text_blocks = st.lists(texts.map(TextContent), max_size=3)
image = st.just(ImageContent("aGk=", "image/png"))


@st.composite
def histories(draw: st.DrawFn) -> list[Any]:
    """Typed histories of every kind a request holds: user texts (and images), assistant texts,
    thinking and tool calls with arguments good and bad, tool results of text, none, images
    and errors, and results of the built-in tools."""
    messages: list[Any] = []
    ids = itertools.count(1)
    for _ in range(draw(st.integers(1, 5))):
        extra = [draw(image)] if draw(st.integers(0, 9)) == 0 else []
        messages.append(UserMessage([*draw(text_blocks), *extra]))
        calls = [
            AgentToolCall(
                f"id-{next(ids)}",
                draw(st.sampled_from(["getTime", "listTools", "writeTool"])),
                draw(arguments),
            )
            for _ in range(draw(st.integers(0, 2)))
        ]
        thinking = [ThinkingContent("hmm")] if draw(st.integers(0, 9)) == 0 else []
        messages.append(AssistantMessage([*thinking, *draw(text_blocks), *calls], stop_reason="toolUse"))
        for c in calls:
            content: list[Any] = [
                *draw(text_blocks),
                *([draw(image)] if draw(st.integers(0, 9)) == 0 else []),
            ]
            error = draw(st.booleans())
            details = {"error_kind": "tool_raised"} if error and draw(st.booleans()) else {}
            messages.append(ToolResultMessage(c.id, c.name, content, details, is_error=error))
    return messages


@settings(max_examples=1500, deadline=None)
@given(history=histories(), cuts=st.lists(st.integers(0, 30), max_size=4), system=texts)
def test_a_typed_request_reads_as_its_spec_view(history: list[Any], cuts: list[int], system: str) -> None:
    tools = {t.name: t for t in (city_tool(), city_tool("listTools"))}
    views = SpecViews()  # shared across the requests, as an agent's formatter does
    direct, spec = CassetteForm(), SpecOnly()
    for cut in [*sorted(cuts), len(history)]:
        request = LlmRequest(system, history[:cut], tools, session_id="s", views=views)
        form = direct.request(request)
        assert form == spec.request(request)
        assert direct.reused <= len(form["messages"])


# -- a cassette grows with what a run adds ---------------------------------------------------------


def chatty_run(turns: int, path: Path) -> Run:
    """``turns`` prompts of one conversation, each answered with a call of getTime and a text
    (two model calls a turn), recorded to ``path``."""
    replies: list[Any] = []
    for n in range(turns):
        replies += [{"tool_calls": [{"name": "getTime", "arguments": {"city": f"City {n}"}}]}, f"Answer {n}."]
    prompts = tuple(f"Question {n}?" for n in range(turns))
    return run(record(ScriptedModel(replies), path), prompts, max_repeated_calls=None)


@pytest.mark.timeout(600)
def test_a_500_turn_cassette_grows_linearly_and_replays(tmp_path: Path) -> None:
    """Each request used to be stored whole, so a cassette grew with the square of the run's
    length (a 500-turn run: hundreds of MiB, past the 16 MiB a cassette may be). Stored as what
    each request adds, 500 turns take about ten times what 50 do."""
    short, long = tmp_path / "50.json", tmp_path / "500.json"
    chatty_run(50, short)
    done = chatty_run(500, long)
    per_turn_short = short.stat().st_size / 50
    per_turn_long = long.stat().st_size / 500
    assert per_turn_long < 1.5 * per_turn_short, (per_turn_short, per_turn_long)
    assert long.stat().st_size < 2 * 1024 * 1024
    again = run(replay(long), tuple(f"Question {n}?" for n in range(500)), max_repeated_calls=None)
    assert normalised(again) == normalised(done)  # the strict replay matched every request


def whole_requests_file(cassette: Path, target: Path) -> Path:
    """``cassette`` written as version 1 wrote it: every request whole."""
    interactions = [i.to_dict() for i in read_cassette(cassette).interactions]
    data = {"format": "yiemagent-cassette", "version": 1, "interactions": interactions}
    target.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return target


def test_a_version_1_cassette_still_replays(tmp_path: Path, cassette: Path) -> None:
    old = whole_requests_file(cassette, tmp_path / "old.json")
    assert "kept" not in old.read_text(encoding="utf-8")
    assert [i.request for i in read_cassette(old).interactions] == [
        i.request for i in read_cassette(cassette).interactions
    ]
    assert normalised(run(replay(old))) == normalised(run(replay(cassette)))


@pytest.mark.parametrize(
    ("change", "where", "says"),
    [
        (lambda d: d["interactions"][1]["request"].update(kept=5), "$.interactions[1].request.kept", "had 1"),
        (lambda d: d["interactions"][0]["request"].update(kept=1), "$.interactions[0].request.kept", "had 0"),
        (
            lambda d: d["interactions"][1]["request"].update(kept=-1),
            "$.interactions[1].request.kept",
            "minimum",
        ),
        (lambda d: d["interactions"][0]["request"].pop("tools"), "$.interactions[0].request.tools", "first"),
        (lambda d: d.update(version=1), "$.interactions[0].request.kept", "not part of a version 1"),
    ],
    ids=["past-the-previous", "first-keeps", "negative", "first-without-tools", "kept-in-version-1"],
)
def test_a_stored_request_that_cannot_be_expanded_is_named(
    tmp_path: Path, cassette: Path, change: Any, where: str, says: str
) -> None:
    data = json.loads(cassette.read_text(encoding="utf-8"))
    change(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(CassetteError) as raised:
        read_cassette(bad)
    message = str(raised.value)
    assert str(bad) in message and where in message and says in message, message


def test_a_small_cassette_that_would_expand_past_the_memory_is_refused(
    tmp_path: Path, cassette: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each request keeping the whole history before it: 2,000 small interactions would put
    two million messages back together. Reading counts them first and refuses."""
    monkeypatch.setattr("yiemagent.testing._cassette.MAX_EXPANDED_MESSAGES", 100_000)
    data = json.loads(cassette.read_text(encoding="utf-8"))
    first, second = data["interactions"]
    message = {"role": "user", "text": "x"}
    data["interactions"] = [first] + [
        {**second, "request": {**second["request"], "kept": n, "messages": [message]}} for n in range(1, 2000)
    ]
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(data), encoding="utf-8")
    assert hostile.stat().st_size < 16 * 1024 * 1024
    with pytest.raises(
        CassetteError, match=r"\$\.interactions: its requests hold more than 100,000 messages"
    ):
        read_cassette(hostile)


def test_calls_that_end_out_of_order_leave_a_cassette_that_reads_at_every_save(tmp_path: Path) -> None:
    """A call in flight is not in the file yet: the call after it is stored against the last
    call written, so the file reads while the first call is still running, and whole after."""
    release = threading.Event()
    started = threading.Event()

    def slow_then_fast(request: Any) -> AssistantMessage:
        if not started.is_set():
            started.set()
            assert release.wait(WAIT)
            return AssistantMessage([TextContent("slow")])
        return AssistantMessage([TextContent("fast")])

    path = tmp_path / "c.json"
    llm = record(slow_then_fast, path)
    slow_request = {"messages": [{"role": "user", "content": "one"}], "tools": []}
    fast_request = {
        "messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
        "tools": [],
    }
    slow = threading.Thread(target=llm, args=(slow_request,))
    slow.start()
    assert started.wait(WAIT)
    llm(fast_request)  # ends while the first call is still in flight
    [only] = read_cassette(path).interactions
    assert [m["text"] for m in only.request["messages"]] == ["one", "two"]
    release.set()
    slow.join(WAIT)
    both = read_cassette(path).interactions
    assert [len(i.request["messages"]) for i in both] == [1, 2]
    assert [i.reply["content"][0]["text"] for i in both if i.reply] == ["slow", "fast"]

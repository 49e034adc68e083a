"""A server that echoes the api key back inside a successful reply: the key is masked in the reply
before it reaches the history, the events and the saved session, and the text says it was."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import WAIT
from llm_helpers import (
    KEY,
    anthropic_client,
    anthropic_message,
    assert_no_key,
    openai_chunk,
    openai_client,
    openai_completion,
    openai_tool_call,
)
from llm_server import Recorded, ScriptedServer, split_every, sse_bytes

from yiemagent import AgentTool, AgentToolResult, YiemAgent
from yiemagent.core._content import AgentToolCall, TextContent, ThinkingContent
from yiemagent.core._events import AgentEvent, MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage
from yiemagent.integrations._session_store import DirectoryStore
from yiemagent.llm.http._redact import Secret
from yiemagent.llm.http._reply_scrub import REPLY_MASK, scrub_reply

ECHO_TOOL = AgentTool(
    "note",
    "Note",
    "Write a note",
    {"type": "object"},
    lambda _id, args, _s, _p: AgentToolResult(f"noted {len(json.dumps(args))} bytes"),
)


def sent_key(request: Recorded) -> str:
    """The api key the client sent, read back from the request's headers."""
    key = request.headers.get("x-api-key") or request.headers["authorization"].removeprefix("Bearer ")
    assert key == KEY  # the server really echoes what it was sent
    return key


def openai_echo(request: Recorded) -> dict[str, Any]:
    """The key in the reply's text and deep in a tool call's arguments (a dict key too)."""
    key = sent_key(request)
    return openai_completion(
        f"Your key is {key}.",
        finish="tool_calls",
        tool_calls=[
            openai_tool_call("call_1", "note", json.dumps({"text": f"key={key}", "deep": [[{key: key}]]}))
        ],
    )


def anthropic_echo(request: Recorded) -> dict[str, Any]:
    """The key in the reply's thinking and text and deep in a tool call's arguments."""
    key = sent_key(request)
    return anthropic_message(
        [
            {"type": "thinking", "thinking": f"they sent {key}", "signature": "sig"},
            {"type": "text", "text": f"Your key is {key}."},
            {
                "type": "tool_use",
                "id": "call_1",
                "name": "note",
                "input": {"text": f"key={key}", "deep": [[{key: key}]]},
            },
        ],
        stop_reason="tool_use",
    )


def answer(request: Recorded) -> dict[str, Any]:
    return openai_completion(f"Done, {sent_key(request)}")


def anthropic_answer(request: Recorded) -> dict[str, Any]:
    return anthropic_message([{"type": "text", "text": f"Done, {sent_key(request)}"}])


@pytest.mark.parametrize(
    ("make", "echo", "last"),
    [
        (openai_client, openai_echo, answer),
        (anthropic_client, anthropic_echo, anthropic_answer),
    ],
    ids=["openai", "anthropic"],
)
def test_a_key_echoed_in_a_reply_never_reaches_the_history_or_the_saved_session(
    server: ScriptedServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, make: Any, echo: Any, last: Any
) -> None:
    server.echo(echo)
    server.echo(last)
    events: list[AgentEvent] = []
    caplog.set_level(logging.WARNING, logger="yiemagent.llm")
    with make(server) as llm, YiemAgent(llm_call=llm, tools=[ECHO_TOOL]) as agent:
        agent.subscribe(events.append)
        response = agent.prompt("what is my key?", WAIT)
        agent.save(tmp_path / "s.json")
        DirectoryStore(tmp_path / "store").save(agent.session_data())
        history = agent.history_snapshot()
    saved = [
        (tmp_path / "s.json").read_text(encoding="utf-8"),
        *(p.read_text(encoding="utf-8") for p in (tmp_path / "store").iterdir()),
    ]
    assert_no_key(
        [repr(history), *saved, repr(events), repr(response), *(r.getMessage() for r in caplog.records)]
    )
    # The user reads that the key was masked, where it stood.
    first = history[1]
    assert isinstance(first, AssistantMessage)
    assert f"Your key is {REPLY_MASK}." in [getattr(b, "text", None) for b in first.content]
    call = next(b for b in first.content if isinstance(b, AgentToolCall))
    assert call.arguments == {"text": f"key={REPLY_MASK}", "deep": [[{REPLY_MASK: REPLY_MASK}]]}
    assert response.content == [TextContent(f"Done, {REPLY_MASK}")]
    assert sum("echoed" in r.getMessage() for r in caplog.records) == 2  # once per reply
    assert len(server.requests) == 2


def _pieces(text: str, *cuts: int) -> list[str]:
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


KEY_AT = len("key ")  # where the key begins in the streamed text


@pytest.mark.parametrize(
    ("cuts", "shown"),
    [
        ((), f"key {REPLY_MASK} ok"),  # the key whole in one delta
        ((KEY_AT + len(KEY) // 2,), f"key {REPLY_MASK} ok"),  # split in two
        ((KEY_AT + 5,), f"key {KEY[:5]}{REPLY_MASK} ok"),  # 5 characters are too few to hold back
        # Pieces of 3: the first 4 characters pass (shorter than 6), the 7th holds the rest back.
        (tuple(range(KEY_AT + 1, KEY_AT + len(KEY), 3)), f"key {KEY[:4]}{REPLY_MASK} ok"),
    ],
    ids=["whole", "halves", "five-then-rest", "threes"],
)
def test_a_streamed_reply_is_masked_in_its_deltas_and_once_assembled(
    server: ScriptedServer, tmp_path: Path, cuts: tuple[int, ...], shown: str
) -> None:
    deltas = _pieces(f"key {KEY} ok", *cuts)
    server.sse(
        split_every(
            sse_bytes([openai_chunk({"content": d}) for d in deltas] + [openai_chunk({}, "stop")], done=True),
            7,
        )
    )
    events: list[AgentEvent] = []
    with openai_client(server, stream=True) as llm, YiemAgent(llm_call=llm) as agent:
        agent.subscribe(events.append)
        response = agent.prompt("go", WAIT)
        agent.save(tmp_path / "s.json")
        history = agent.history_snapshot()
    assert response.content == [TextContent(f"key {REPLY_MASK} ok")]
    streamed = [e.delta for e in events if isinstance(e, MessageUpdateEvent)]
    assert "".join(streamed) == shown  # what the user watched arrive
    assert len(streamed) >= len(deltas)  # every delta passed on, even one held back whole
    assert_no_key([repr(history), (tmp_path / "s.json").read_text(encoding="utf-8"), repr(events), *streamed])


@pytest.mark.parametrize(
    ("deltas", "shown"),
    [
        (["see ", KEY[:10]], f"see {REPLY_MASK}"),  # a text ending in the key's start: a cut piece
        (["see ", KEY[:10], " and more"], f"see {KEY[:10]} and more"),  # held back, then let go
    ],
    ids=["ends-in-a-piece", "piece-then-text"],
)
def test_the_start_of_the_key_is_held_back_until_the_stream_tells(
    server: ScriptedServer, deltas: list[str], shown: str
) -> None:
    server.sse(
        [sse_bytes([openai_chunk({"content": d}) for d in deltas] + [openai_chunk({}, "stop")], done=True)]
    )
    events: list[AgentEvent] = []
    with openai_client(server, stream=True) as llm, YiemAgent(llm_call=llm) as agent:
        agent.subscribe(events.append)
        response = agent.prompt("go", WAIT)
    streamed = "".join(e.delta for e in events if isinstance(e, MessageUpdateEvent))
    assert streamed == shown
    assert response.content == [TextContent(shown)]  # the deltas say what the reply says


def test_a_piece_held_back_in_one_stream_comes_before_the_next_stream(server: ScriptedServer) -> None:
    server.sse(
        [
            sse_bytes(
                [
                    openai_chunk({"reasoning_content": f"they sent {KEY[:9]}"}),
                    openai_chunk({"content": "Hello"}),
                    openai_chunk({}, "stop"),
                ],
                done=True,
            )
        ]
    )
    events: list[AgentEvent] = []
    with openai_client(server, stream=True) as llm, YiemAgent(llm_call=llm) as agent:
        agent.subscribe(events.append)
        response = agent.prompt("go", WAIT)
    streamed = [(e.kind, e.delta) for e in events if isinstance(e, MessageUpdateEvent)]
    assert streamed == [("thinking", "they sent "), ("thinking", REPLY_MASK), ("text", "Hello")]
    assert response.content == [ThinkingContent(f"they sent {REPLY_MASK}"), TextContent("Hello")]


def test_a_reply_without_the_key_is_returned_as_it_is() -> None:
    reply = AssistantMessage(
        [ThinkingContent("hmm"), TextContent("hello"), AgentToolCall("c1", "t", {"a": [1, {"b": "c"}]})],
        model="m",
    )
    assert scrub_reply(reply, Secret(KEY)) is reply
    leaky = AssistantMessage([TextContent(KEY)])
    assert scrub_reply(leaky, Secret(None)) is leaky  # no key set: nothing to mask


def test_arguments_nested_past_the_recursion_limit_are_scrubbed() -> None:
    deep: Any = [KEY]
    for _ in range(5000):  # deeper than Python's default recursion limit of 1000
        deep = [deep]
    reply = AssistantMessage([AgentToolCall("c1", "t", {"x": deep})])
    arguments = scrub_reply(reply, Secret(KEY)).content[0].arguments  # type: ignore[union-attr]
    node = arguments["x"]
    while isinstance(node[0], list):
        node = node[0]
    assert node == [REPLY_MASK]


def test_every_text_field_of_a_reply_is_scrubbed() -> None:
    reply = AssistantMessage(
        [
            ThinkingContent(f"t {KEY}", signature=KEY),
            {"type": "x", KEY: [KEY]},
            AgentToolCall(f"id-{KEY}", f"n-{KEY}", f"not json {KEY}"),
        ],
        model=f"m-{KEY}",
        stop_reason="error",
        error_message=f"refused: {KEY}",
    )
    clean = scrub_reply(reply, Secret(KEY))
    assert_no_key([repr(clean), json.dumps(clean.to_dict())])
    assert clean.content == [
        ThinkingContent(f"t {REPLY_MASK}", signature=REPLY_MASK),
        {"type": "x", REPLY_MASK: [REPLY_MASK]},
        AgentToolCall(f"id-{REPLY_MASK}", f"n-{REPLY_MASK}", f"not json {REPLY_MASK}"),
    ]
    assert (clean.model, clean.error_message) == (f"m-{REPLY_MASK}", f"refused: {REPLY_MASK}")
    assert (clean.stop_reason, clean.timestamp) == ("error", reply.timestamp)

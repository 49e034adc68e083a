"""Issue 18, item 5: a streamed chunk or event of the wrong shape is a clear ``LlmStreamError``.

A server (or a proxy) may put any JSON value in any field of a delta: an ``index`` that is a list,
an ``id`` that is an object, a ``delta`` that is a number. The stream assemblers must then raise
``LlmStreamError`` naming the field, what it should hold and what it holds; never a
``TypeError``, and never a reply quietly built from garbage. The fuzz tests put random JSON
values in the fields of the chunks and events of both clients, in every field at once and in one
field of a well-formed stream at a time, and check that the only exception is an ``LlmError``
whose message names a field that really is wrong (the one replaced, or one inside it) and shows
what it holds; other tests check that every well-formed stream, nulls included, is still read.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llm_helpers import Collector, anthropic_client, openai_client, simple_request
from llm_server import ScriptedServer, sse_bytes

from yiemagent.core._content import AgentToolCall, TextContent, ThinkingContent
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage
from yiemagent.llm import LlmError, LlmStreamError
from yiemagent.llm.anthropic._parse import AnthropicStreamAssembler
from yiemagent.llm.http._redact import excerpt
from yiemagent.llm.openai._parse import OpenAIStreamAssembler

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MUTATE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MISSING: Any = object()

# --- what an error must say -----------------------------------------------------------------------

ACCEPTS = {
    "a string": lambda v: isinstance(v, str),
    "an object": lambda v: isinstance(v, dict),
    "a list": lambda v: isinstance(v, list),
    "a whole number from 0 up": lambda v: type(v) is int and v >= 0,
    "a string or a list of parts": lambda v: isinstance(v, (str, list)),
    "a string or an object": lambda v: isinstance(v, (str, dict)),
}
FIELD_PROBLEM = re.compile(
    r"^(?P<label>\w+) stream sent a malformed (?P<what>chunk|event): (?P<path>the \w+|\S+) must be "
    rf"(?P<expected>{'|'.join(sorted(ACCEPTS, key=len, reverse=True))}), but is "
)
OTHER_PROBLEM = re.compile(
    r"^Anthropic stream sent a malformed event: (content block (?P<again>\d+) started a second "
    r"time|a (?P<delta>\w+) for content block (?P<block>\d+), which is a (?P<kind>\w+) block) "
)


def resolve(whole: Any, path: str) -> Any:
    """The value at ``path`` (``choices[0].delta.tool_calls[1].index``) in ``whole``; ``MISSING``
    where a key is absent."""
    if path.startswith("the "):
        return whole
    value = whole
    for name, number in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        value = value.get(name, MISSING) if name else value[int(number)]
    return value


def assert_names_what_was_wrong(error: LlmError, whole: Any, what: str) -> str | None:
    """``error``, raised for ``whole``, is the provider's own error (an error object or event) or
    a final ``LlmStreamError`` whose message names a field of ``whole`` that holds what it must
    not, shows that value, and shows ``whole``. Return the path of the field it names (``None``
    for the provider's error and for a problem of the stream's order)."""
    text = str(error)
    if isinstance(whole, dict) and (whole.get("error") if what == "chunk" else whole.get("type") == "error"):
        assert " reported an error" in text, text
        return None
    assert isinstance(error, LlmStreamError), text
    assert not error.retryable
    assert text.endswith(f"({what}: {excerpt(json.dumps(whole, ensure_ascii=False), 300)})"), text
    field = FIELD_PROBLEM.match(text)
    if field is None:
        other = OTHER_PROBLEM.match(text)
        assert other is not None, f"the error does not say what was wrong: {text}"
        # The block the event names, or (no index) the one it falls to: the next, or block 0.
        assert whole.get("index") in (int(other["again"] or other["block"]), None), text
        return None
    assert field["what"] == what
    value = resolve(whole, field["path"])
    held = "missing" if value is MISSING else excerpt(json.dumps(value, ensure_ascii=False), 100)
    assert f"{field['path']} must be {field['expected']}, but is {held} ({what}: " in text, text
    assert value is MISSING or not ACCEPTS[field["expected"]](value), f"{value!r} was refused: {text}"
    return field["path"]


def within(path: str, broken: str) -> bool:
    """Whether the field at ``path`` is the one at ``broken`` or inside it."""
    return broken.startswith("the ") or path == broken or path.startswith((broken + ".", broken + "["))


def assert_well_typed(reply: AssistantMessage, events: list[MessageUpdateEvent]) -> None:
    """Every block of ``reply`` and every reported delta holds values of the kinds it declares."""
    for block in reply.content:
        if isinstance(block, TextContent):
            assert isinstance(block.text, str)
        elif isinstance(block, ThinkingContent):
            assert isinstance(block.thinking, str)
            assert block.signature is None or isinstance(block.signature, str)
        elif isinstance(block, AgentToolCall):
            assert isinstance(block.id, str) and isinstance(block.name, str)
        else:
            assert isinstance(block, dict) and block["type"] == "redacted_thinking"
    for event in events:
        assert isinstance(event.delta, str) and type(event.content_index) is int
        assert event.tool_call_id is None or isinstance(event.tool_call_id, str)
        assert event.tool_name is None or isinstance(event.tool_name, str)
    assert reply.stop_reason in {"stop", "length", "toolUse", "error"}


# --- strategies -----------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=5,
)
TEXT = st.sampled_from(["", "Hé", "llo", "日本"])
ARGUMENTS = st.sampled_from(['{"city": ', '"Zürich"}', "", "not json"])
USAGE_COUNT = st.integers(0, 100)


class Shapes:
    """Strategies for the chunks and events of both clients, in one of three modes: ``fuzz``, every
    field is there and may hold any JSON value instead of its own kind; ``well-formed``, optional
    fields may also be null or absent, as servers send them; ``full``, every field is there with
    a value of its kind, so that replacing one of them (``mutated``) can reach every field."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def field(self, valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        """An optional field's value."""
        if self.mode == "fuzz":
            return st.one_of(valid, JSON_VALUES)
        return st.one_of(valid, st.none()) if self.mode == "well-formed" else valid

    def required(self, valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        """The value of a field a well-formed chunk always has right."""
        return st.one_of(valid, JSON_VALUES) if self.mode == "fuzz" else valid

    def fields(
        self, required: dict[str, Any] | None = None, **optional: st.SearchStrategy[Any]
    ) -> st.SearchStrategy[dict[str, Any]]:
        """An object with the ``required`` fields and any of the ``optional`` ones (all of them,
        unless ``well-formed``: absent fields hide those inside them from the fuzzing)."""
        present = {k: self.required(v) for k, v in (required or {}).items()}
        maybe = {k: self.field(v) for k, v in optional.items()}
        if self.mode != "well-formed":
            return st.fixed_dictionaries({**present, **maybe})
        return st.fixed_dictionaries(present, optional=maybe)

    def many(self, item: st.SearchStrategy[Any], most: int) -> st.SearchStrategy[list[Any]]:
        """A list of up to ``most`` items (at least one, unless ``well-formed``)."""
        return st.lists(self.required(item), min_size=int(self.mode != "well-formed"), max_size=most)

    # OpenAI chat.completion.chunk ---------------------------------------------------------------

    def openai_chunk(self) -> st.SearchStrategy[Any]:
        function = self.fields(
            name=st.sampled_from(["getWeather", ""]), arguments=ARGUMENTS | st.just({"city": "Rome"})
        )
        entry = self.fields(
            index=st.integers(0, 2),
            id=st.sampled_from(["call_a", "call_b", ""]),
            type=st.just("function"),
            function=function,
        )
        part = self.fields({"type": st.just("text")}, text=TEXT)
        delta = self.fields(
            role=st.just("assistant"),
            content=TEXT | self.many(part, 2),
            reasoning_content=TEXT,
            reasoning=TEXT,
            refusal=TEXT,
            tool_calls=self.many(entry, 2),
        )
        choice = self.fields(
            index=st.integers(0, 1),
            delta=delta,
            finish_reason=st.sampled_from(["stop", "tool_calls", "length"]),
            logprobs=st.none(),
        )
        details = self.fields(cached_tokens=USAGE_COUNT)
        usage = self.fields(
            prompt_tokens=USAGE_COUNT,
            completion_tokens=USAGE_COUNT,
            total_tokens=USAGE_COUNT,
            prompt_tokens_details=details,
        )
        chunk = self.fields(
            {"object": st.just("chat.completion.chunk")}, choices=self.many(choice, 2), usage=usage
        )
        if self.mode != "fuzz":
            return chunk
        return st.one_of(chunk, JSON_VALUES, st.builds(lambda c, e: {**c, "error": e}, chunk, JSON_VALUES))

    # Anthropic Messages API events ---------------------------------------------------------------

    def anthropic_usage(self) -> st.SearchStrategy[Any]:
        return self.fields(
            input_tokens=USAGE_COUNT, output_tokens=USAGE_COUNT, cache_read_input_tokens=USAGE_COUNT
        )

    def content_block(self, kind: str) -> st.SearchStrategy[Any]:
        kinds = {
            "text": {"text": TEXT},
            "thinking": {"thinking": TEXT, "signature": st.sampled_from(["", "sig"])},
            "tool_use": {
                "id": st.just("toolu_1"),
                "name": st.just("getWeather"),
                "input": st.just({}) | st.just({"city": "Rome"}),
            },
            "redacted_thinking": {"data": st.just("opaque")},
        }
        return self.fields({"type": st.just(kind)}, **kinds[kind])

    def block_delta(self, kind: str) -> st.SearchStrategy[Any]:
        deltas = {
            "text": [("text_delta", "text", TEXT)],
            "thinking": [
                ("thinking_delta", "thinking", TEXT),
                ("signature_delta", "signature", st.just("sig")),
            ],
            "tool_use": [("input_json_delta", "partial_json", ARGUMENTS)],
            "redacted_thinking": [],
        }
        choices = [self.fields({"type": st.just(t)}, **{key: value}) for t, key, value in deltas[kind]]
        choices.append(self.fields({"type": st.just("citations_delta")}, citation=JSON_VALUES))
        return st.one_of(choices)

    def anthropic_event(self) -> st.SearchStrategy[Any]:
        """Any one event, fields fuzzed (for the fuzz test: the order of events is random too)."""
        kinds = ["text", "thinking", "tool_use", "redacted_thinking"]
        index = st.integers(0, 2)
        blocks = st.one_of(
            [self.content_block(k) for k in kinds] + [self.fields({"type": st.text(max_size=4)})]
        )
        events = [
            self.fields(
                {"type": st.just("message_start")}, message=self.fields(usage=self.anthropic_usage())
            ),
            self.fields({"type": st.just("content_block_start"), "content_block": blocks}, index=index),
            self.fields(
                {
                    "type": st.just("content_block_delta"),
                    "delta": st.one_of([self.block_delta(k) for k in kinds]),
                },
                index=index,
            ),
            self.fields({"type": st.just("content_block_stop")}, index=index),
            self.fields(
                {"type": st.just("message_delta")},
                delta=self.fields(stop_reason=st.sampled_from(["end_turn", "tool_use"])),
                usage=self.anthropic_usage(),
            ),
            st.just({"type": "ping"}),
            st.just({"type": "message_stop"}),
            self.fields({"type": st.just("error")}, error=JSON_VALUES),
        ]
        return st.one_of(*events, JSON_VALUES, self.fields({"type": JSON_VALUES}))

    def anthropic_stream(self) -> st.SearchStrategy[list[Any]]:
        """A whole well-formed stream: blocks of random kinds, each started, extended by deltas
        of its own kind and stopped, in order, then the message's end."""
        kinds = ["text", "thinking", "tool_use", "redacted_thinking"]
        starts = {k: self.content_block(k) for k in kinds}  # built once: drawing is the cost
        deltas = {k: self.many(self.block_delta(k), 3) for k in kinds}

        @st.composite
        def block(draw: st.DrawFn, number: int) -> list[Any]:
            kind = draw(st.sampled_from(kinds))
            start = {"type": "content_block_start", "content_block": draw(starts[kind])}
            if draw(st.booleans()):  # an absent or null index means the next block
                start["index"] = draw(st.sampled_from([number, None]))
            return [
                start,
                *({"type": "content_block_delta", "index": number, "delta": d} for d in draw(deltas[kind])),
                {"type": "content_block_stop", "index": number},
            ]

        opening = self.fields(
            {"type": st.just("message_start")}, message=self.fields(usage=self.anthropic_usage())
        )
        closing = self.fields(
            {"type": st.just("message_delta")},
            delta=self.fields(stop_reason=st.just("end_turn")),
            usage=self.anthropic_usage(),
        )

        @st.composite
        def stream(draw: st.DrawFn) -> list[Any]:
            events = [draw(opening)]
            for number in range(draw(st.integers(0, 3))):
                events += draw(block(number))
            return [*events, draw(closing), {"type": "message_stop"}]

        return stream()


FUZZED, WELL_FORMED, FULL = Shapes("fuzz"), Shapes("well-formed"), Shapes("full")


def slots(value: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every field and list item inside ``value``, as ``(path, container, key)``."""
    found: list[tuple[str, Any, Any]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        where = f"{path}[{key}]" if isinstance(value, list) else f"{path}.{key}" if path else key
        found += [(where, value, key), *slots(inner, where)]
    return found


def mutated(data: st.DataObject, stream: list[Any], what: str) -> tuple[list[Any], int, str]:
    """``stream`` with one field or list item of one of its chunks, or a whole chunk, holding a
    random JSON value instead; also the chunk's place and the path of what was replaced."""
    stream = copy.deepcopy(stream)
    at = data.draw(st.integers(0, len(stream) - 1), label="chunk")
    places = slots(stream[at])
    choice = data.draw(st.integers(0, len(places)), label="field")
    value = data.draw(JSON_VALUES, label="value")
    if choice == len(places):
        stream[at] = value
        return stream, at, f"the {what}"
    path, container, key = places[choice]
    container[key] = value
    return stream, at, path


def openai_assembler(events: list[MessageUpdateEvent]) -> OpenAIStreamAssembler:
    return OpenAIStreamAssembler(events.append, label="OpenAI", provider="openai", model="m")


def anthropic_assembler(events: list[MessageUpdateEvent]) -> AnthropicStreamAssembler:
    return AnthropicStreamAssembler(events.append, label="Anthropic", provider="anthropic", model="m")


# --- fuzzing --------------------------------------------------------------------------------------


@FUZZ
@given(st.lists(FUZZED.openai_chunk(), max_size=5))
def test_a_malformed_openai_chunk_is_an_llm_error_naming_the_field(chunks: list[Any]) -> None:
    events: list[MessageUpdateEvent] = []
    assembler = openai_assembler(events)
    for chunk in chunks:
        try:
            assembler.add_chunk(chunk)
        except LlmError as error:
            assert_names_what_was_wrong(error, chunk, "chunk")
            return
    assert_well_typed(assembler.finish(), events)


@FUZZ
@given(st.lists(FUZZED.anthropic_event(), max_size=8))
def test_a_malformed_anthropic_event_is_an_llm_error_naming_the_field(events: list[Any]) -> None:
    reported: list[MessageUpdateEvent] = []
    assembler = anthropic_assembler(reported)
    for event in events:
        try:
            if assembler.handle(event):
                break
        except LlmError as error:
            assert_names_what_was_wrong(error, event, "event")
            return
    assert_well_typed(assembler.finish(), reported)


@MUTATE
@given(st.lists(FULL.openai_chunk(), min_size=1, max_size=3), st.data())
def test_any_value_in_any_field_of_an_openai_chunk_is_read_or_named(
    chunks: list[Any], data: st.DataObject
) -> None:
    # One field of a well-formed stream holds a random value: the stream is read, or refused at
    # that chunk by an error naming that field (or a field inside the value put there).
    chunks, at, broken = mutated(data, chunks, "chunk")
    events: list[MessageUpdateEvent] = []
    assembler = openai_assembler(events)
    for number, chunk in enumerate(chunks):
        try:
            assembler.add_chunk(chunk)
        except LlmError as error:
            assert number == at, f"the well-formed chunk {number} was refused: {error}"
            named = assert_names_what_was_wrong(error, chunk, "chunk")
            assert named is not None and within(named, broken), f"{broken} broken: {error}"
            return
    assert_well_typed(assembler.finish(), events)


@MUTATE
@given(FULL.anthropic_stream(), st.data())
def test_any_value_in_any_field_of_an_anthropic_event_is_read_or_named(
    stream: list[Any], data: st.DataObject
) -> None:
    # As for OpenAI; a broken index or type may also put a later event out of order (a block
    # started twice, a delta for a block of another kind), which must then say so.
    stream, at, broken = mutated(data, stream, "event")
    events: list[MessageUpdateEvent] = []
    assembler = anthropic_assembler(events)
    for number, event in enumerate(stream):
        try:
            if assembler.handle(event):
                break
        except LlmError as error:
            assert number >= at, f"the well-formed event {number} was refused: {error}"
            named = assert_names_what_was_wrong(error, event, "event")
            if named is not None:
                assert number == at and within(named, broken), f"{broken} broken: {error}"
            return
    assert_well_typed(assembler.finish(), events)


# --- well-formed streams are still read ------------------------------------------------------------


@FUZZ
@given(st.lists(WELL_FORMED.openai_chunk(), max_size=5))
def test_every_well_formed_openai_chunk_is_read(chunks: list[Any]) -> None:
    events: list[MessageUpdateEvent] = []
    assembler = openai_assembler(events)
    for chunk in chunks:
        assembler.add_chunk(chunk)
    reply = assembler.finish()
    assert_well_typed(reply, events)
    texts = [b.text for b in reply.content if isinstance(b, TextContent)]
    assert "".join(texts) == "".join(e.delta for e in events if e.kind == "text")


@FUZZ
@given(WELL_FORMED.anthropic_stream())
def test_every_well_formed_anthropic_stream_is_read(stream: list[Any]) -> None:
    events: list[MessageUpdateEvent] = []
    assembler = anthropic_assembler(events)
    assert [assembler.handle(event) for event in stream][-1]  # message_stop ends it
    reply = assembler.finish()
    assert_well_typed(reply, events)
    starts = [e["content_block"] for e in stream if e["type"] == "content_block_start"]
    assert [_kind(b) for b in reply.content] == [b["type"] for b in starts]


def _kind(block: Any) -> str:
    """The Messages API type a block of the library came from."""
    if isinstance(block, Mapping):
        return str(block["type"])
    return {TextContent: "text", ThinkingContent: "thinking", AgentToolCall: "tool_use"}[type(block)]


# --- named cases, including garbage the old code let through --------------------------------------


def openai_delta(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta}]}


@pytest.mark.parametrize(
    ("chunk", "says"),
    [
        (
            openai_delta(tool_calls=[{"index": [1]}]),
            "choices[0].delta.tool_calls[0].index must be a whole number from 0 up, but is [1]",
        ),
        (
            openai_delta(tool_calls=[{"index": True, "id": "call_1"}]),
            "choices[0].delta.tool_calls[0].index must be a whole number from 0 up, but is true",
        ),
        (
            openai_delta(tool_calls=[{"index": 0, "id": {"a": 1}}]),
            'choices[0].delta.tool_calls[0].id must be a string, but is {"a": 1}',
        ),
        (
            openai_delta(tool_calls=[{"index": 0, "function": {"arguments": [1, 2]}}]),
            "choices[0].delta.tool_calls[0].function.arguments must be a string or an object, but is [1, 2]",
        ),
        (openai_delta(tool_calls=7), "choices[0].delta.tool_calls must be a list, but is 7"),
        (openai_delta(content=5), "choices[0].delta.content must be a string or a list of parts, but is 5"),
        (
            {"choices": [{"index": "0", "delta": {"content": "lost"}}]},
            'choices[0].index must be a whole number from 0 up, but is "0"',
        ),
        ({"choices": {"0": {}}}, 'choices must be a list, but is {"0": {}}'),
        ([1, 2], "the chunk must be an object, but is [1, 2]"),
    ],
)
def test_named_openai_chunks(chunk: Any, says: str) -> None:
    with pytest.raises(LlmStreamError) as info:
        openai_assembler([]).add_chunk(chunk)
    assert str(info.value).startswith(f"OpenAI stream sent a malformed chunk: {says} (chunk: ")
    assert not info.value.retryable


TEXT_START = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}


@pytest.mark.parametrize(
    ("events", "says"),
    [
        (
            [{"type": "content_block_delta", "index": [1], "delta": {"type": "text_delta", "text": "x"}}],
            "index must be a whole number from 0 up, but is [1]",
        ),
        (
            [{"type": "content_block_start", "index": "1", "content_block": {"type": "text"}}],
            'index must be a whole number from 0 up, but is "1"',
        ),
        (
            [
                TEXT_START,
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": {"a": 1}},
                },
            ],
            'delta.text must be a string, but is {"a": 1}',
        ),
        (
            [
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": 5, "name": "getWeather", "input": {}},
                }
            ],
            "content_block.id must be a string, but is 5",
        ),
        ([{"type": "content_block_start", "index": 0}], "content_block must be an object, but is missing"),
        ([{"type": "content_block_delta", "index": 0, "delta": 3}], "delta must be an object, but is 3"),
        (
            [{"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}}],
            'delta.stop_reason must be a string, but is ["end_turn"]',
        ),
        ([{"type": 5}], "type must be a string, but is 5"),
        ([TEXT_START, TEXT_START], "content block 0 started a second time"),
        (
            [
                TEXT_START,
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "{}"},
                },
            ],
            "a input_json_delta for content block 0, which is a text block",
        ),
    ],
)
def test_named_anthropic_events(events: list[Any], says: str) -> None:
    assembler = anthropic_assembler([])
    with pytest.raises(LlmStreamError) as info:
        for event in events:
            assembler.handle(event)
    assert str(info.value).startswith(f"Anthropic stream sent a malformed event: {says} (event: ")
    assert not info.value.retryable


# --- through the clients, over HTTP -----------------------------------------------------------------


def test_the_openai_client_reports_the_issue_s_malformed_delta(server: ScriptedServer) -> None:
    first = openai_delta(content="Hi")
    bad = openai_delta(
        tool_calls=[{"index": [1], "id": "call_1", "function": {"name": "getWeather", "arguments": "{}"}}]
    )
    server.sse([sse_bytes([first, bad], done=True)])
    events = Collector()
    with pytest.raises(LlmStreamError) as info:
        openai_client(server, stream=True)(simple_request(), on_update=events)
    assert str(info.value) == (
        "OpenAI stream sent a malformed chunk: choices[0].delta.tool_calls[0].index must be a "
        "whole number from 0 up, but is [1] (chunk: " + json.dumps(bad) + ")"
    )
    assert events.text() == "Hi"
    assert len(server.requests) == 1  # not retried: the server would send it again


def test_the_anthropic_client_reports_a_malformed_delta(server: ScriptedServer) -> None:
    bad = {"type": "content_block_delta", "index": [1], "delta": {"type": "text_delta", "text": "x"}}
    server.sse([sse_bytes([TEXT_START, bad, {"type": "message_stop"}], named=True)])
    with pytest.raises(LlmStreamError) as info:
        anthropic_client(server, stream=True)(simple_request())
    assert str(info.value) == (
        "Anthropic stream sent a malformed event: index must be a whole number from 0 up, but is "
        "[1] (event: " + json.dumps(bad) + ")"
    )
    assert len(server.requests) == 1


DEEP = "[" * 100_000 + "]" * 100_000  # deeper than json.loads can go: RecursionError


def test_a_chunk_nested_too_deep_to_parse_is_a_stream_error(server: ScriptedServer) -> None:
    server.sse([sse_bytes([DEEP], done=True)])
    with pytest.raises(LlmStreamError, match="OpenAI stream sent a chunk that is not JSON"):
        openai_client(server, stream=True)(simple_request())
    server.sse([sse_bytes([TEXT_START, DEEP], named=False)])
    with pytest.raises(LlmStreamError, match="Anthropic stream sent an event that is not JSON"):
        anthropic_client(server, stream=True)(simple_request())

"""``WireForm``, the OpenAI client's cache of each message's wire form: a message sent on every turn
stays converted (least recently sent goes first), a conversation nobody holds is freed with its
images, an entry is only used for the object it was made from, and tool results of any subclass
keep the batch's images after the batch."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import attrs
import pytest

from yiemagent import (
    AgentToolCall,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from yiemagent.llm.openai import _wire
from yiemagent.llm.openai._wire import WireForm


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every message ``WireForm`` converts, in order."""
    seen: list[Any] = []
    convert = _wire._convert

    def counting(msg: Any) -> Any:
        seen.append(msg)
        return convert(msg)

    monkeypatch.setattr(_wire, "_convert", counting)
    return seen


def test_a_message_sent_on_every_turn_is_converted_once(conversions: list[Any]) -> None:
    form = WireForm(limit=3)
    first = UserMessage("the question, sent every turn")
    for turn in range(10):
        form.messages("", [first, UserMessage(f"turn {turn}")])
    assert conversions.count(first) == 1 and len(conversions) == 11


def test_a_history_that_fits_the_cache_converts_only_what_was_added(conversions: list[Any]) -> None:
    form = WireForm(limit=101)
    history: list[Any] = [UserMessage(f"m{i}") for i in range(100)]
    form.messages("", history)
    history.append(UserMessage("new"))
    form.messages("", history)
    assert len(conversions) == 101


def test_a_conversation_nobody_holds_is_freed_with_its_image() -> None:
    form = WireForm()
    message = UserMessage([TextContent("look"), ImageContent("A" * 1_000_000, "image/png")])
    form.messages("", [message])
    gone = weakref.ref(message)
    del message
    gc.collect()
    assert gone() is None and len(form._cache) == 0


def test_an_entry_serves_only_the_object_it_was_made_from(conversions: list[Any]) -> None:
    form = WireForm()
    for text in ("one", "two", "three"):  # each message dies before the next, so ids may repeat
        [wire] = form.messages("", [UserMessage(text)])
        assert wire["content"] == text
    assert len(conversions) == 3


def test_tool_results_of_a_subclass_keep_images_after_the_batch() -> None:
    @attrs.define(frozen=True, slots=True)
    class MyResult(ToolResultMessage):
        pass

    calls = [AgentToolCall("a", "snap", {}), AgentToolCall("b", "snap", {})]
    picture = ImageContent("QUJD", "image/png")
    history: list[Any] = [
        UserMessage("two pictures"),
        AssistantMessage(content=list(calls)),
        MyResult(tool_call_id="a", tool_name="snap", content=[TextContent("one"), picture]),
        MyResult(tool_call_id="b", tool_name="snap", content=[TextContent("two")]),
    ]
    roles = [m["role"] for m in WireForm().messages("", history)]
    assert roles == ["user", "assistant", "tool", "tool", "user"]

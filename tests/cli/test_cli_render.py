"""The terminal rendering of ``yiemagent chat``/``run`` (``cli_render.Renderer``), fed events by
hand: replies that did not stream are printed whole, tool lines are complete and marked, and a
terminal that cannot show arrows gets ASCII."""

from __future__ import annotations

import io

from yiemagent import (
    AgentToolResult,
    AssistantMessage,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    TextContent,
    ThinkingContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
)
from yiemagent.cli._render import Renderer, duration, one_line


class Stream(io.StringIO):
    """A text stream with a chosen encoding, like a terminal's."""

    def __init__(self, encoding: str = "utf-8") -> None:
        super().__init__()
        self._encoding = encoding

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


def test_streamed_text_then_tools_each_on_their_own_lines() -> None:
    out = Stream()
    render = Renderer(out, color=False)
    render(MessageStartEvent(None))
    for piece in ("Let ", "me ", "check."):
        render(MessageUpdateEvent("text", piece))
    render(MessageEndEvent(AssistantMessage(content=[TextContent("Let me check.")])))
    render(ToolExecStartEvent("c1", "echo", {"text": "hi"}))
    render(ToolExecUpdateEvent("c1", "echo", {"text": "hi"}, AgentToolResult("halfway")))
    render(ToolExecEndEvent("c1", "echo", AgentToolResult("HI")))
    render(ToolExecStartEvent("c2", "echo", {}))
    render(ToolExecEndEvent("c2", "echo", AgentToolResult("text is required"), is_error=True))
    lines = out.getvalue().splitlines()
    assert lines[0] == "Let me check."
    assert lines[1] == '  → echo {"text": "hi"}'
    assert lines[2] == "  … echo: halfway"
    assert lines[3].startswith("  ✓ echo (") and lines[3].endswith(" ms): HI")
    assert lines[5].startswith("  ✗ echo (") and lines[5].endswith("error: text is required")


def test_a_reply_that_did_not_stream_is_printed_whole_with_its_thinking() -> None:
    out = Stream()
    render = Renderer(out, color=False)
    render(MessageStartEvent(None))
    render(MessageEndEvent(AssistantMessage(content=[ThinkingContent("Hmm."), TextContent("Yes.")])))
    assert out.getvalue() == "Hmm.\nYes.\n"


def test_run_mode_shows_tools_but_no_text() -> None:
    out = Stream()
    render = Renderer(out, show_text=False, color=False)
    render(MessageUpdateEvent("text", "secret answer"))
    render(MessageEndEvent(AssistantMessage(content=[TextContent("secret answer")])))
    render(ToolExecStartEvent("c1", "t", {}))
    assert out.getvalue() == "  → t {}\n"


def test_ascii_terminals_get_ascii_marks_and_colour_is_optional() -> None:
    out = Stream("ascii")
    render = Renderer(out, color=True)
    render(ToolExecStartEvent("c1", "t", {"city": "Zürich"}))
    text = out.getvalue()
    assert "\033[2m  -> t" in text and text.endswith("\033[0m\n")


def test_helpers() -> None:
    assert one_line("a\n  b\tc", 10) == "a b c"
    assert one_line("abcdefghij", 5) == "abcd…"
    assert duration(0.0123) == "12 ms" and duration(2.51) == "2.5 s"

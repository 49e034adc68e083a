"""What the ``yiemagent`` command writes to a terminal holds no escape sequence or control
character that came from a tool, a server or a model (``cli_text.printable``, used by
``cli_render.Renderer``), whatever event carries it."""

from __future__ import annotations

import io
import unicodedata

import pytest

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
from yiemagent.cli._render import Renderer, one_line
from yiemagent.cli._text import printable

ESC = "\x1b"


def controls(text: str) -> list[str]:
    """The control characters in ``text`` other than line feeds."""
    return sorted({c for c in text if unicodedata.category(c) == "Cc" and c != "\n"})


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain text", "plain text"),
        (f"{ESC}[1;31mred{ESC}[0m", "red"),  # CSI: colours
        (f"{ESC}[2J{ESC}[H{ESC}[?1049h", ""),  # erase, cursor home, the alternate screen
        (f"{ESC}]0;owned\x07title", "title"),  # OSC: the window title, ended by BEL
        (f"{ESC}]8;;https://evil.example{ESC}\\link{ESC}]8;;{ESC}\\", "link"),  # OSC 8, ended by ST
        (f"{ESC}]52;c;cGFzdGU=\x07copied", "copied"),  # OSC 52: writing the clipboard
        (f"{ESC}P1$qm{ESC}\\after", "after"),  # DCS: a request the terminal would answer
        (f"{ESC}c{ESC}(B{ESC}7reset", "reset"),  # full reset, charset, save cursor
        ("\x9b31m8-bit\x9dtitle\x9c", "8-bit"),  # 8-bit CSI and OSC
        ("bell\x07nul\x00del\x7f", "bellnuldel"),
        ("overwrite\rme", "overwriteme"),  # a lone CR would let text overwrite its line
        ("two\r\nlines\tand a tab", "two\nlines\tand a tab"),
        (f"cut {ESC}", "cut "),  # a sequence cut at the end of a piece: its ESC goes all the same
        ("wetter in münchen ☀", "wetter in münchen ☀"),
    ],
)
def test_printable_leaves_text_only(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert set(controls(printable(raw))) <= {"\t"}  # tabs stay; nothing else of the kind


def test_every_line_the_renderer_writes_is_text_only() -> None:
    out = io.StringIO()  # no encoding: the renderer marks lines in ASCII
    render = Renderer(out, color=False)
    bad = f"{ESC}[2J{ESC}]0;owned\x07\x9b1m\r"
    render(MessageStartEvent(None))
    render(MessageUpdateEvent("thinking", f"pondering{bad}"))
    render(MessageUpdateEvent("text", f"streamed{bad} text"))
    render(MessageEndEvent(AssistantMessage(content=[TextContent("streamed text")])))
    render(ToolExecStartEvent("c1", f"tool{bad}", {"arg": f"value{bad}"}))
    render(ToolExecUpdateEvent("c1", f"tool{bad}", {}, AgentToolResult(f"halfway{bad}")))
    render(ToolExecEndEvent("c1", f"tool{bad}", AgentToolResult(f"result{bad}")))
    render(ToolExecEndEvent("c2", f"tool{bad}", AgentToolResult(f"failed{bad}"), is_error=True))
    render(MessageStartEvent(None))
    render(
        MessageEndEvent(
            AssistantMessage(
                content=[ThinkingContent(f"whole{bad} thought"), TextContent(f"whole{bad} reply")]
            )
        )
    )
    shown = out.getvalue()
    assert controls(shown) == []
    assert "pondering" in shown and "streamed text" in shown
    assert '  -> tool {"arg": "value\\u001b[2J' in shown  # JSON text: C0 controls as \u escapes
    assert "  .. tool: halfway\n" in shown and ": result\n" in shown and "error: failed\n" in shown
    assert "whole thought\n" in shown and "whole reply\n" in shown


def test_one_line_flattens_and_cleans() -> None:
    assert one_line(f"a\n{ESC}[31mb\tc", 10) == "a b c"

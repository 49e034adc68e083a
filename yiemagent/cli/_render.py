"""How the ``yiemagent`` command shows a run in a terminal: streamed text as it arrives, and each
tool call live (its name and arguments, progress, then the result with its duration).

``Renderer`` is an event sink. The agent's emitter calls it from the worker thread (one event at
a time, even with parallel tools); the command's own lines (prompts, notes) go through the same
``Renderer`` so that the two never write half lines into each other. What comes from outside
(the model's text, tool names, arguments, results and progress) is written through
``cli_text.printable``: no escape sequence of a tool, a server or a model reaches the terminal.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from typing import Any, TextIO

from yiemagent.cli._status import StatusLine, wants_status
from yiemagent.cli._text import printable
from yiemagent.core._content import TextContent, ThinkingContent
from yiemagent.core._events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    ApprovalRequestedEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    TurnStartEvent,
)
from yiemagent.core._json_safety import json_ready
from yiemagent.core._messages import AssistantMessage
from yiemagent.core._tools import AgentToolResult

__all__ = ["Renderer", "Style", "duration", "one_line", "result_text"]


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs become one space), without escape sequences or
    control characters (``printable``), cut to ``limit`` characters with an ellipsis when longer."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)] + "…"


def result_text(result: Any) -> str:
    """The text of a tool result or progress report: its text blocks, else its JSON form."""
    if isinstance(result, AgentToolResult):
        texts = [b.text for b in result.content if isinstance(b, TextContent)]
        if texts:
            return " ".join(texts)
        result = result.details
    if isinstance(result, str):
        return result
    return json.dumps(json_ready(result), ensure_ascii=False)


def duration(seconds: float) -> str:
    """A duration for people: ``"340 ms"`` under a second, ``"2.5 s"`` above."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


class Style:
    """Terminal decorations: ANSI colours when ``color``, and arrows and ticks when the stream's
    encoding can write them (ASCII stand-ins otherwise, so no output ever fails to encode)."""

    def __init__(self, stream: TextIO, color: bool) -> None:
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "→✓✗…·".encode(encoding)
            fancy = True
        except (UnicodeEncodeError, LookupError):
            fancy = False
        self.color = color
        self.call, self.ok, self.fail, self.progress = (
            ("→", "✓", "✗", "…") if fancy else ("->", "ok", "x", "..")
        )
        self.dot = "·" if fancy else "-"

    def paint(self, text: str, code: str) -> str:
        """``text`` in the ANSI style ``code`` ("2" dim, "31" red, "32" green, "1" bold)."""
        return f"\033[{code}m{text}\033[0m" if self.color else text


def wants_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set or ``TERM`` is ``dumb``."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


class Renderer:
    """An event sink that prints a run for a person: the assistant's text as it streams (when
    ``show_text``; a reply that did not stream is printed whole when it ends) and one line per
    tool call start, progress report and end (with its duration, errors marked).

    ``show_text=False`` (``yiemagent run``, whose answer goes to stdout on its own) prints the
    tool activity only. Thread-safe; every write is flushed at once.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        show_text: bool = True,
        color: bool | None = None,
        status: TextIO | None = None,
    ) -> None:
        self.stream = stream
        self.show_text = show_text
        self.style = Style(stream, wants_color(stream) if color is None else color)
        self._lock = threading.RLock()
        self._at_line_start = True
        self._streamed = False  # whether text of the current reply arrived as updates
        self._in_thinking = False
        self._started: dict[str, float] = {}
        self._running: dict[str, str] = {}  # tool call id -> tool name, for the status line
        # The status line (what the agent is doing while nothing else shows) goes to ``status``
        # (the command's stderr) when that is a terminal.
        self.status = StatusLine(status, self._lock) if status is not None and wants_status(status) else None

    # -- output --------------------------------------------------------------------------

    def write(self, text: str) -> None:
        """Write ``text`` as it is and flush, remembering whether a line was left open."""
        if not text:
            return
        with self._lock:
            status = self.status
            if status is not None:
                status.hide()
            self.stream.write(text)
            self.stream.flush()
            self._at_line_start = text.endswith("\n")
            if status is not None:
                status.may_show = self._at_line_start
                status.draw()

    def line(self, text: str) -> None:
        """Write ``text`` as a line of its own (ending an open line first)."""
        with self._lock:
            self.end_line()
            self.write(text + "\n")

    def end_line(self) -> None:
        """End the open line, if any, so that the next output starts on a fresh one."""
        with self._lock:
            if not self._at_line_start:
                self.write("\n")

    def line_typed(self) -> None:
        """Note that the person ended the open line (the Enter of a typed answer)."""
        with self._lock:
            self._at_line_start = True

    def width(self) -> int:
        """How many characters a line of tool activity may use: the terminal's width (100
        when it cannot be told) less the indent, and at least 40."""
        return max(shutil.get_terminal_size((100, 24)).columns - 4, 40)

    # -- events --------------------------------------------------------------------------

    def __call__(self, event: AgentEvent) -> None:
        """Show one event (events this renderer has nothing to show for are skipped)."""
        with self._lock:
            self._follow(event)
            if isinstance(event, MessageUpdateEvent):
                self._update(event)
            elif isinstance(event, MessageStartEvent):
                if isinstance(event.message, AssistantMessage) or event.message is None:
                    self._streamed = False
            elif isinstance(event, MessageEndEvent):
                if isinstance(event.message, AssistantMessage):
                    self._reply_end(event.message)
            elif isinstance(event, ToolExecStartEvent):
                self._started[event.tool_call_id] = time.monotonic()
                args = json.dumps(json_ready(event.arguments), ensure_ascii=False)
                self.line(
                    self.style.paint(
                        f"  {self.style.call} {printable(event.tool_name)} {one_line(args, self.width())}",
                        "2",
                    )
                )
            elif isinstance(event, ToolExecUpdateEvent):
                text = one_line(result_text(event.partial_result), self.width())
                self.line(
                    self.style.paint(f"  {self.style.progress} {printable(event.tool_name)}: {text}", "2")
                )
            elif isinstance(event, ToolExecEndEvent):
                self._tool_end(event)
            elif isinstance(event, ApprovalRequestedEvent):
                # Waiting for a person is no part of a call's duration: its end shows none.
                for call in event.pending:
                    self._started.pop(call.tool_call_id, None)

    def _follow(self, event: AgentEvent) -> None:
        """Keep the status line saying what the agent does: thinking (waiting for the model),
        answering (``run``: the answer streams but is printed at the end), running a tool;
        nothing once the answer shows or the run has ended."""
        status = self.status
        if status is None:
            return
        if isinstance(event, (AgentStartEvent, TurnStartEvent)) or (
            isinstance(event, MessageStartEvent) and event.message is None
        ):
            status.set("thinking")
        elif isinstance(event, MessageUpdateEvent) and event.kind != "tool_call":
            status.set(None if self.show_text else "answering")
        elif isinstance(event, ToolExecStartEvent):
            self._running[event.tool_call_id] = event.tool_name
            status.set("running " + ", ".join(printable(n) for n in self._running.values()))
        elif isinstance(event, ApprovalRequestedEvent):
            for call in event.pending:
                self._running.pop(call.tool_call_id, None)
        elif isinstance(event, ToolExecEndEvent):
            self._running.pop(event.tool_call_id, None)
            status.set(
                "running " + ", ".join(printable(n) for n in self._running.values())
                if self._running
                else "thinking"
            )
        elif isinstance(event, AgentEndEvent):
            self._running.clear()
            status.set(None)

    def _update(self, event: MessageUpdateEvent) -> None:
        """Write a streamed piece: text as it is, thinking dimmed on lines of its own;
        tool-call argument pieces are not shown (the tool's start line shows them whole)."""
        if not self.show_text or event.kind == "tool_call":
            return
        if event.kind == "thinking":
            if not self._in_thinking:
                self.end_line()
                self._in_thinking = True
            self.write(self.style.paint(printable(event.delta), "2"))
            return
        if self._in_thinking:
            self.end_line()
            self._in_thinking = False
        self._streamed = True
        self.write(printable(event.delta))

    def _reply_end(self, message: AssistantMessage) -> None:
        """Finish a reply: print its text (and thinking) when none of it streamed, end the line."""
        self._in_thinking = False
        if self.show_text and not self._streamed:
            text = printable("".join(b.text for b in message.content if isinstance(b, TextContent)))
            thinking = printable(
                "".join(b.thinking for b in message.content if isinstance(b, ThinkingContent))
            )
            if thinking.strip():
                self.line(self.style.paint(thinking.strip(), "2"))
            if text:
                self.end_line()
                self.write(text)
        self._streamed = False
        self.end_line()

    def _tool_end(self, event: ToolExecEndEvent) -> None:
        """Write a tool call's end: its duration since its start and its result, or its error
        in red."""
        started = self._started.pop(event.tool_call_id, None)
        took = f" ({duration(time.monotonic() - started)})" if started is not None else ""
        text = one_line(result_text(event.result), self.width())
        style, name = self.style, printable(event.tool_name)
        if event.is_error:
            self.line(style.paint(f"  {style.fail} {name}{took} error: {text}", "31"))
        else:
            self.line(style.paint(f"  {style.ok} {name}{took}: {text}", "2"))

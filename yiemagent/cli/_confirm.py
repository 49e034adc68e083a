"""Asking the person at the terminal before a tool that writes and runs code is called.

``writeTool`` lets the model write a Python file into the tool folder and run it as a tool on
its next turn. The CLI offers it only when asked to (``--allow-write-tool``, or a ``--tools``
folder that holds it), and then ``Confirmation``, a ``before_tool_call`` hook, asks before every
call: the tool, its arguments as JSON, and ``[y/N]``. With ``--yes`` every call is allowed
without asking; with no terminal to ask on (stdin is a pipe, a file, or was read for the prompt)
the call is blocked, with a reason that tells the model and the user what happened.
"""

from __future__ import annotations

import json
import os
import select
import sys
from collections.abc import Callable, Collection
from typing import Any, TextIO

from yiemagent.cli._text import printable
from yiemagent.core._json_safety import json_ready
from yiemagent.core._tools import AbortSignal, BeforeToolCallContext, BeforeToolCallResult

__all__ = ["ASK_TOOLS", "Confirmation"]

ASK_TOOLS = frozenset({"writeTool"})  # tools that write and run code: asked about every time
_POLL_S = 0.2  # how often a pending question looks at the run's abort signal
_MAX_SHOWN_LINES = 60


def _shown_arguments(args: Any) -> str:
    """The arguments as indented JSON, without control characters, cut to a screenful."""
    text = printable(json.dumps(json_ready(args), indent=2, ensure_ascii=False))
    lines = text.splitlines()
    if len(lines) > _MAX_SHOWN_LINES:
        lines = [*lines[:_MAX_SHOWN_LINES], f"... ({len(lines) - _MAX_SHOWN_LINES} more lines)"]
    return "\n".join("    " + line for line in lines)


class Confirmation:
    """A ``before_tool_call`` hook: calls of the tools in ``ask`` run only when the person says
    yes (or ``yes`` was given); other calls run as usual. ``write(text)`` shows the question
    (through the command's renderer, so it never cuts into other output); the answer is read
    from ``stdin`` when it is a terminal."""

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        yes: bool = False,
        ask: Collection[str] = ASK_TOOLS,
        stdin: TextIO | None = None,
    ) -> None:
        self.write = write
        self.yes = yes
        self.ask = frozenset(ask)
        self.stdin = stdin if stdin is not None else sys.stdin

    def __call__(
        self, ctx: BeforeToolCallContext, signal: AbortSignal | None = None
    ) -> BeforeToolCallResult | None:
        """Let the call through, or block it with the reason the model and the user see."""
        name = ctx.tool_call.name
        if name not in self.ask or self.yes:
            return None
        if not self._can_ask():
            return BeforeToolCallResult(
                True,
                (
                    f'Tool "{name}" was not run: it writes and runs code, so it needs the user\'s yes, '
                    "and there is no terminal to ask on (run yiemagent with --yes to allow it)."
                ),
            )
        self.write(
            f"\nThe model wants to call {printable(name)} with:\n"
            f"{_shown_arguments(ctx.args)}\nAllow it? [y/N] "
        )
        answer = self._read_answer(signal)
        if answer is not None and answer.strip().lower() in ("y", "yes"):
            return None
        return BeforeToolCallResult(True, f'Tool "{name}" was not run: the user said no.')

    def _can_ask(self) -> bool:
        """Whether a person can answer: stdin is an open terminal."""
        try:
            return not self.stdin.closed and self.stdin.isatty()
        except (AttributeError, ValueError, OSError):
            return False

    def _read_answer(self, signal: AbortSignal | None) -> str | None:
        """One line from the terminal, or ``None`` when the run is aborted (Ctrl-C) first or the
        input ends. Waits in short steps so that an abort is noticed while nobody types."""
        try:
            fd = self.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            return None
        while signal is None or not signal.aborted:
            ready, _, _ = select.select([fd], [], [], _POLL_S)
            if ready:
                line = os.read(fd, 4096).decode("utf-8", "replace")
                return line if line else None
        return None

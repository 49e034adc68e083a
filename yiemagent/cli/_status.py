"""A one-line status on the terminal while the user waits: what the agent is doing, and for how
long (``⠋ thinking 3.2 s``, ``⠋ running getWeather 1.0 s``).

A small model on two cores can take many seconds before its first word; silence then looks like
a hang. ``StatusLine`` shows the status on a terminal only (never into a pipe, a file, or the
``--json`` and ``--events jsonl`` output, which go to stdout), redraws it a few times a second,
and erases it before any other output is written, so it never mixes with the answer or the tool
lines. The ``Renderer`` drives it: it sets the status from the events and calls ``hide`` before
each write.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TextIO

__all__ = ["StatusLine", "wants_status"]

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_ASCII_FRAMES = "|/-\\"
_TICK_S = 0.2
_ERASE = "\r\033[K"


def wants_status(stream: TextIO) -> bool:
    """A status line only on a terminal that can erase a line (not ``TERM=dumb``)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty()) and os.environ.get("TERM", "") not in ("", "dumb")
    except (ValueError, OSError):
        return False


class StatusLine:
    """The status line on ``stream``, guarded by ``lock`` (the renderer's, so that the two never
    write at once). ``set(text)`` shows ``text`` with the time since it was set; ``set(None)``
    erases it and stops the redrawing thread; ``hide()`` erases it until the next tick."""

    def __init__(self, stream: TextIO, lock: threading.RLock) -> None:
        self.stream = stream
        self.lock = lock
        self.text: str | None = None
        self.since = 0.0
        self.shown = False
        self.may_show = True  # the renderer is at the start of a line
        self._frame = 0
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            _FRAMES.encode(encoding)
            self._frames = _FRAMES
        except (UnicodeEncodeError, LookupError):
            self._frames = _ASCII_FRAMES

    def set(self, text: str | None) -> None:
        """Show ``text`` from now on (its clock restarts when the text changes), or nothing."""
        with self.lock:
            if text != self.text:
                self.since = time.monotonic()
            self.text = text
            if text is None:
                self.hide()
                self._stop.set()
                self._ticker = None
                return
            if self._ticker is None:
                self._stop = threading.Event()
                self._ticker = threading.Thread(
                    target=self._tick, args=(self._stop,), name="yiemagent-status", daemon=True
                )
                self._ticker.start()
            self.draw()

    def hide(self) -> None:
        """Erase the status line if it is shown (before other output is written)."""
        with self.lock:
            if self.shown:
                self._write(_ERASE)
                self.shown = False

    def draw(self) -> None:
        """Draw the status line (when there is a status and the cursor is at a line start)."""
        with self.lock:
            if self.text is None or not self.may_show:
                return
            elapsed = time.monotonic() - self.since
            frame = self._frames[self._frame % len(self._frames)]
            self._write(f"{_ERASE}{frame} {self.text} {elapsed:.1f} s")
            self.shown = True

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(_TICK_S):
            with self.lock:
                if stop.is_set():
                    return
                self._frame += 1
                self.draw()

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the status is not worth an error
            self.text = None

"""The ``yiemagent`` command's standard streams: descriptors closed at start, the prompt read from
stdin, and stdout kept for the command's results while anything else printed goes to stderr.

A command started with a standard descriptor closed (``>&-``) gets ``None`` for that stream from
Python, and the next file it opens would take the descriptor's number (so that a child process
writing to "its stdout" would write into that file). ``reopen_closed_descriptors`` puts
``/dev/null`` in the gap at once and says which were closed, for the commands to refuse to run
without the stream they need.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from yiemagent.errors import CliError

__all__ = ["MAX_PROMPT_CHARS", "read_prompt", "reopen_closed_descriptors", "stdout_to_stderr"]

MAX_PROMPT_CHARS = 16 * 2**20  # far above any model's context, far below a memory problem
_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}


def _is_open(fd: int) -> bool:
    """Whether the descriptor ``fd`` is open in this process."""
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def reopen_closed_descriptors() -> set[str]:
    """Open ``/dev/null`` on each of the descriptors 0, 1 and 2 that is closed, and return the
    names (``"stdin"``, ``"stdout"``, ``"stderr"``) of those that were. With stderr closed,
    ``sys.stderr`` becomes a stream to ``/dev/null``, so that messages fail silently instead of
    with an ``AttributeError``; the exit status still tells what happened."""
    closed = set()
    for fd, name in _NAMES.items():
        if _is_open(fd):
            continue
        closed.add(name)
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:  # the lowest free number: ``fd`` itself unless a lower one is closed too
            os.dup2(null, fd)
            os.close(null)
    if "stderr" in closed and sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)
    return closed


def read_prompt(text: str) -> str:
    """The prompt of ``yiemagent run``: ``text``, or for ``-`` what stdin holds (at most
    ``MAX_PROMPT_CHARS`` characters). ``CliError`` (exit 2) when stdin is closed, cannot be
    read, is not text in its encoding, or holds more than the limit."""
    if text != "-":
        return text
    if sys.stdin is None:
        raise CliError(
            "stdin is closed, so there is no prompt to read ('-'); give the prompt "
            "as an argument, or on stdin: echo 'PROMPT' | yiemagent run -"
        )
    try:
        prompt = sys.stdin.read(MAX_PROMPT_CHARS + 1)
    except UnicodeDecodeError as exc:
        raise CliError(
            f"the prompt on stdin is not {exc.encoding} text ({exc.reason}); give "
            "it as text, or set PYTHONIOENCODING to the encoding it is in"
        ) from None
    except OSError as exc:
        raise CliError(f"cannot read the prompt from stdin: {exc.strerror or exc}") from None
    if len(prompt) > MAX_PROMPT_CHARS:
        raise CliError(
            f"the prompt on stdin is longer than {MAX_PROMPT_CHARS} characters "
            f"({MAX_PROMPT_CHARS // 2**20} Mi), the limit of 'yiemagent run -'; is "
            "it the file you meant?"
        )
    return prompt


def _results_stream(fd: int, like: TextIO | None) -> TextIO:
    """A text stream writing to ``fd`` with the encoding of ``like`` (the original stdout),
    replacing what it cannot encode, as the command's stdout does."""
    encoding = getattr(like, "encoding", None) or "utf-8"
    return open(fd, "w", encoding=encoding, errors="replace", closefd=True)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[TextIO]:
    """Send to stderr everything written to standard output while the block runs, and yield a
    stream to the real standard output for the command's own results.

    Both levels move: ``sys.stdout`` becomes ``sys.stderr`` (``print()`` in tool code, from any
    thread) and descriptor 1 becomes a copy of descriptor 2 (C libraries, child processes). The
    swap is made once on entry, before the block starts any thread, and undone once at its
    end, so no thread ever sees it half done: ``contextlib.redirect_stdout`` per tool call
    could not be that, as ``sys.stdout`` is one for the whole process. After an interrupt (Ctrl-C, a
    termination signal) nothing is undone: the process is ending, and tools that did not stop
    must not write into the results.
    """
    previous = sys.stdout
    if previous is not None:
        previous.flush()
    saved = os.dup(1)
    try:
        results = _results_stream(saved, previous)
    except BaseException:
        os.close(saved)
        raise
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    interrupted = False
    try:
        yield results
    except BaseException as exc:
        interrupted = not isinstance(exc, Exception)
        raise
    finally:
        if not interrupted:
            with contextlib.suppress(OSError, ValueError):  # what tools printed goes out first
                sys.stdout.flush()
            os.dup2(saved, 1)
            sys.stdout = previous
        with contextlib.suppress(OSError):  # a write error was reported when it happened
            results.close()

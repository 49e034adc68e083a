"""Reading scenario and trace files without trusting them: bounded in size, regular files only,
UTF-8, and JSON that every implementation reads the same way.

Any file given to the conformance command may be hostile or simply wrong: a folder or a FIFO
named ``*.json``, a symlink loop, gigabytes of zeros, Latin-1 text, arrays nested 100,000 deep,
a 5,000-digit number. Each is reported as a ``FileProblem`` saying what is wrong, never as a
traceback, and never by hanging (``yiemagent.core._files`` refuses a FIFO without blocking).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from yiemagent.core._files import UnreadableFileError, read_regular_file
from yiemagent.errors import FileProblem

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_SAFE_INTEGER",
    "FileProblem",
    "parse_json",
    "printable",
    "read_text",
]

MAX_FILE_BYTES = 16 * 1024 * 1024  # a scenario is a few kB, a trace rarely more than 100 kB
# Levels of objects and arrays: the deepest shipped scenario has 79 (tool arguments nested past
# the library's own limit of 64, inside a port's expectations).
MAX_DEPTH = 200
# Integers every JSON implementation reads exactly (JavaScript's Number.MAX_SAFE_INTEGER): a
# larger one would compare equal here and differ in a port, or not parse at all.
MAX_SAFE_INTEGER = 2**53 - 1
_MAX_INT_DIGITS = len(str(MAX_SAFE_INTEGER))


def printable(text: str) -> str:
    """``text`` safe to print to any UTF-8 stream: bytes of a file name that are not UTF-8 (kept
    by Python as lone surrogates) and lone surrogates from JSON escapes become ``\\x..`` or
    ``\\u....`` escapes instead of making ``print`` raise."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that did not come from a file name's byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def read_text(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``, read with a bound of ``limit`` bytes and
    without blocking; raises ``FileProblem`` saying what is wrong (never ``OSError`` or
    ``UnicodeDecodeError``, and never hangs on a FIFO or a device)."""
    try:
        data = read_regular_file(path, limit)
    except UnreadableFileError as exc:
        raise FileProblem(str(exc)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(
            f"not UTF-8 text: byte {exc.start} is 0x{data[exc.start]:02x}; save the file as UTF-8"
        ) from None


def _integer(text: str) -> int:
    """``parse_int``: an integer within ``±MAX_SAFE_INTEGER`` (checked by length first, so a
    5,000-digit number is refused before Python is asked to convert it)."""
    digits = text.lstrip("-")
    if len(digits) <= _MAX_INT_DIGITS:
        value = int(text)
        if abs(value) <= MAX_SAFE_INTEGER:
            return value
    shown = text if len(text) <= 24 else f"{text[:20]}… ({len(digits)} digits)"
    raise ValueError(
        f"the integer {shown} is outside ±{MAX_SAFE_INTEGER}, the range every JSON "
        "implementation reads exactly"
    )


def _number(text: str) -> float:
    """``parse_float``: a finite double (``1e400`` would silently become infinity)."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else f"{text[:20]}…"
        raise ValueError(f"the number {shown} is out of range (larger than any double)")
    return value


def _constant(name: str) -> Any:
    """``parse_constant``: ``NaN`` and ``Infinity`` are not JSON."""
    raise ValueError(f"{name} is not a JSON number")


def _json_path(parts: tuple[Any, ...]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{printable(p)}" for p in parts)


def _is_text(value: str) -> bool:
    """Whether ``value`` is Unicode text (no lone surrogate, as a ``\\ud800`` escape makes)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_tree(value: Any) -> None:
    """Raise ``FileProblem`` naming the first value nested deeper than ``MAX_DEPTH`` or the
    first string (or key) that is not Unicode text. Iterative: any depth is reported."""
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, parts = stack.pop()
        if isinstance(item, str):
            if not _is_text(item):
                raise FileProblem(
                    "a string with a lone surrogate (a \\ud800-\\udfff escape not "
                    "in a pair), which is not text",
                    _json_path(parts),
                )
            continue
        if not isinstance(item, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise FileProblem(f"nested more than {MAX_DEPTH} levels deep", _json_path(parts))
        if isinstance(item, dict):
            for key, sub in item.items():
                if not _is_text(key):
                    raise FileProblem("a key with a lone surrogate, which is not text", _json_path(parts))
                stack.append((sub, depth + 1, (*parts, key)))
        else:
            stack.extend((sub, depth + 1, (*parts, i)) for i, sub in enumerate(item))


def parse_json(text: str, one_line: bool = False) -> Any:
    """``text`` parsed as JSON that every implementation reads alike: finite numbers, integers
    within ``±MAX_SAFE_INTEGER``, at most ``MAX_DEPTH`` levels, strings that are text. Raises
    ``FileProblem`` (with the JSON path, where there is one) for anything else; a syntax error
    names its line and column, or only its column for a ``one_line`` text (a JSON Lines line)."""
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_number, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if one_line else f"line {exc.lineno} column {exc.colno}"
        raise FileProblem(f"not JSON: {exc.msg} at {at}") from None
    except RecursionError:
        raise FileProblem(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # from the parse_* hooks above
        raise FileProblem(f"not usable JSON: {exc}") from None
    _check_tree(value)
    return value

"""JSON Schema ``pattern`` matching in time linear in the text, with RE2.

Python's ``re`` backtracks: ``^(a+)+$`` against forty ``a`` and a ``!`` takes longer than any
run, holding the GIL all the while, so no timeout, ``abort()`` or other thread can stop it. RE2
(Google's engine, the ``google-re2`` package) never backtracks: a match costs at most about the
size of the compiled pattern times the length of the text, and it releases the GIL while it
runs. ``linear_pattern`` compiles a schema pattern with RE2, or raises ``PatternRefused`` for
what RE2 cannot run in linear time (backreferences, lookaround, repetition counts above 1000,
patterns too large). A text longer than ``max_bytes`` for its pattern is not matched at all
(``search`` raises ``TextTooLong``): that cap keeps the worst case of one match near a tenth of
a second, whatever the pattern.

Patterns are ECMA-262 regular expressions in JSON Schema; RE2's syntax is Perl's, which agrees
on what tool schemas use (classes, anchors, quantifiers, groups, ``\\d``, ``\\w``, ``\\s``,
``\\b``), with ``\\d``, ``\\w`` and ``\\s`` meaning ASCII only and ``$`` the end of the text, as in
ECMA-262. ECMA's ``\\uXXXX`` escapes are rewritten for RE2.
"""

from __future__ import annotations

import functools
import re

import attrs
import re2

from yiemagent.errors import PatternRefused, TextTooLong

__all__ = ["MAX_PATTERN_WORK", "LinearPattern", "PatternRefused", "TextTooLong", "linear_pattern"]

# Bytes of text times RE2 instructions that one match may cost. RE2's slowest path (its NFA,
# when the DFA's memory runs out) took about 20 ns per unit on a busy 2-core machine, so one
# match stays within about 0.2 s; a small pattern like ``\S`` still checks 700 KB of text.
MAX_PATTERN_WORK = 10_000_000
# RE2's memory for one compiled pattern and its DFA cache (its default is 8 MiB); compiled
# patterns are cached, so this bounds what hostile patterns can make the process hold.
_MAX_MEM = 2 << 20
_CACHE_SIZE = 256

# ECMA-262's ``\uXXXX`` (a surrogate pair becomes one code point), and any other escape, which
# is kept as it is (so ``\\u0041``, an escaped backslash and ``u0041``, stays literal).
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})(?:\\u([dD][c-fC-F][0-9A-Fa-f]{2}))?|.)", re.DOTALL)


@attrs.frozen
class LinearPattern:
    """A schema pattern compiled with RE2. ``search(text)`` answers whether the pattern matches
    anywhere in ``text`` (JSON Schema's rule: patterns are not implicitly anchored)."""

    source: str
    max_bytes: int
    _regexp: re2._Regexp[str] = attrs.field(repr=False, alias="regexp")

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in ``text``; raises ``TextTooLong`` when the text
        has more than ``max_bytes`` bytes of UTF-8. Lone surrogates (valid in JSON text) are
        encoded as they are rather than refused."""
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > self.max_bytes:
            raise TextTooLong(f"more than the {self.max_bytes} bytes of UTF-8 it can check")
        return self._regexp.search(data) is not None

    def accepts(self, text: str) -> bool:
        """Whether ``text`` is short enough to check and matches (``False`` when too long)."""
        try:
            return self.search(text)
        except TextTooLong:
            return False


def linear_pattern(source: str) -> LinearPattern:
    """``source`` compiled with RE2 (cached); raises ``PatternRefused`` when RE2 cannot compile
    it, saying why."""
    compiled = _compile(source)
    if isinstance(compiled, str):
        raise PatternRefused(compiled)
    return compiled


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile(source: str) -> LinearPattern | str:
    """The compiled pattern, or why RE2 refused it (cached both ways: a refused pattern is asked
    about on every call of its tool)."""
    options = re2.Options()
    options.never_capture = True  # only "does it match" is asked: no submatch bookkeeping
    options.log_errors = False  # RE2 would print every refusal to stderr
    options.max_mem = _MAX_MEM
    try:
        regexp = re2.compile(_re2_syntax(source), options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "refused"
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    except UnicodeEncodeError:  # a lone surrogate in the pattern itself
        return "the pattern is not valid Unicode (it has a lone surrogate)"
    size = max(regexp.programsize, regexp.reverseprogramsize, 1)
    return LinearPattern(source, max(MAX_PATTERN_WORK // size, 1), regexp)


def _re2_syntax(source: str) -> str:
    """``source`` with ECMA-262's ``\\uXXXX`` escapes written as RE2's ``\\x{...}``."""
    if "\\u" not in source:
        return source
    return _ESCAPE.sub(_rewrite_escape, source)


def _rewrite_escape(match: re.Match[str]) -> str:
    high, low = match.groups()
    if high is None:
        return match.group(0)
    first = int(high, 16)
    if low is not None and 0xD800 <= first <= 0xDBFF:
        second = int(low, 16)
        return f"\\x{{{0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00):X}}}"
    return f"\\x{{{high}}}" + ("" if low is None else f"\\x{{{low}}}")

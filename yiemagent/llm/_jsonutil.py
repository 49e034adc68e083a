"""Reading loosely typed JSON from providers without ``isinstance`` noise at every step, and
writing tool-call arguments as JSON text cheaply (``to_json``, the core's own encoder)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from yiemagent.core._json_text import to_json

__all__ = ["UNUSABLE", "as_count", "as_mapping", "parts_text", "to_json"]

_EMPTY: Mapping[str, Any] = {}


def as_mapping(value: Any) -> Mapping[str, Any]:
    """Return ``value`` when it is a JSON object, else an empty read-only mapping."""
    return value if isinstance(value, Mapping) else _EMPTY


# More tokens than any model reads: a larger "count" (a 400-digit number, 1e300) is no count, and
# would overflow the float arithmetic of the context meter and the prices.
MAX_COUNT = 2**53


class _Unusable:
    """The marker ``as_count`` gives for a value that is there but is not a count."""

    def __repr__(self) -> str:
        return "UNUSABLE"


UNUSABLE = _Unusable()


def as_count(value: Any) -> int | _Unusable | None:
    """A provider's token count: an int of 0 or more (a whole float such as ``12.0`` too),
    ``None`` when there is none (missing or ``null``), and ``UNUSABLE`` for anything else (a
    negative number, text, an object, ``NaN``, ``1e400``, a fraction, more than ``MAX_COUNT``),
    so that a reply whose usage cannot be read is counted as unpriced instead of as 0 tokens
    costing 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return UNUSABLE
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return UNUSABLE
    return int(value) if 0 <= value <= MAX_COUNT else UNUSABLE


def parts_text(content: Any, sep: str) -> str:
    """Return the text of an OpenAI ``content`` field: a string as it is, or the ``text`` of each
    part of a list of parts joined by ``sep``; anything else (``None``) gives ``""``.

    The parts of a reply are pieces of one text (``sep=""``); those of a request were written
    apart, so they keep a line between them (``sep="\n"``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return sep.join(
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return ""

"""Reading loosely typed JSON from providers without ``isinstance`` noise at every step, and
writing tool-call arguments as JSON text cheaply (``to_json``, the core's own encoder)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from yiemagent.core._json_text import to_json

__all__ = ["as_int", "as_mapping", "parts_text", "to_json"]

_EMPTY: Mapping[str, Any] = {}


def as_mapping(value: Any) -> Mapping[str, Any]:
    """Return ``value`` when it is a JSON object, else an empty read-only mapping."""
    return value if isinstance(value, Mapping) else _EMPTY


def as_int(value: Any) -> int:
    """Return ``value`` as a count: a JSON number (not a bool) as an int of 0 or more, anything
    else (``NaN`` and infinities, which Python's JSON reader accepts, included) as 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, int(value))


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

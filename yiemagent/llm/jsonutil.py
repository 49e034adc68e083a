"""Reading loosely typed JSON from providers without ``isinstance`` noise at every step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["as_int", "as_mapping"]

_EMPTY: Mapping[str, Any] = {}


def as_mapping(value: Any) -> Mapping[str, Any]:
    """Return ``value`` when it is a JSON object, else an empty read-only mapping."""
    return value if isinstance(value, Mapping) else _EMPTY


def as_int(value: Any) -> int:
    """Return ``value`` as an int when it is a JSON number (not a bool), else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value)

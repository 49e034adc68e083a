"""Stopping a model that loops: the same tool called with the same arguments again and again.

A small model that does not read a tool's result calls the tool once more, with the same
arguments, until its context overflows. ``RepeatedCalls`` counts, for one run, how often each
tool was called with each set of (prepared) arguments; past the limit a call is refused with an
error result that tells the model it already has that result, so it answers instead.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["RepeatedCalls", "check_max_repeated_calls"]

_SCALARS = (str, int, float, bool, type(None))


def _key(name: str, args: dict[str, Any]) -> Any:
    """A hashable key equal for equal arguments: the sorted items of a flat dict (most
    arguments), canonical JSON otherwise."""
    if all(type(v) in _SCALARS for v in args.values()):
        # The type is part of the key: 1 and True (and 1 and 1.0) are equal in Python.
        return name, tuple(sorted((k, type(v).__name__, v) for k, v in args.items()))
    try:
        return name, json.dumps(args, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return name, repr(args)


def check_max_repeated_calls(value: Any) -> int | None:
    """Return ``value`` if it is ``None`` (no limit) or a positive int; raise ``ValueError``
    saying what is accepted otherwise."""
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"max_repeated_calls must be a positive int or None (no limit), got {value!r}")
    return value


class RepeatedCalls:
    """Per-run counts of (tool, arguments) pairs; ``limit`` calls of one pair are allowed.

    Only the run's loop thread uses it (calls are prepared in order, also in parallel mode), so
    it needs no lock.
    """

    __slots__ = ("_counts", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._counts: dict[Any, int] = {}

    def refusal(self, name: str, args: dict[str, Any]) -> str | None:
        """The error text for a call of ``name`` with ``args`` made ``limit`` times already in
        this run, or ``None`` when it may run."""
        if self._counts.get(_key(name, args), 0) < self.limit:
            return None
        times = "once" if self.limit == 1 else f"{self.limit} times"
        return (
            f'Tool "{name}" was not run: it was already called {times} in this run with these '
            "same arguments, and its result is above. Answer from that result, or call the "
            "tool with different arguments."
        )

    def record(self, name: str, args: dict[str, Any]) -> None:
        """Count a call of ``name`` with ``args`` that is about to run."""
        key = _key(name, args)
        self._counts[key] = self._counts.get(key, 0) + 1

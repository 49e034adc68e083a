"""Stopping a model that loops: the same tool called with the same arguments again and again.

A small model that does not read a tool's result calls the tool once more, with the same
arguments, until its context overflows. ``RepeatedCalls`` counts, for one run, in how many
batches each tool was called with each set of (prepared) arguments; past the limit a call is
refused with an error result that tells the model it already has that result, so it answers
instead. Identical calls within one batch count as one: the model sent them together, before
seeing any result, so they are not a loop but the same request made several times on purpose
(four dice rolled, a counter bumped twice, a status polled by several workers).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["RepeatedCalls", "call_key", "check_max_repeated_calls"]

_SCALARS = (str, int, float, bool, type(None))


def call_key(name: str, args: dict[str, Any]) -> Any:
    """A hashable key equal for equal arguments: the set of (name, type, value) of a flat dict
    (most arguments), canonical JSON otherwise."""
    try:
        # The type is part of the key: 1 and True (and 1 and 1.0) are equal in Python. A list
        # or dict value is unhashable (TypeError): such arguments take the JSON form.
        flat = frozenset([(k, v.__class__, v) for k, v in args.items()])
    except TypeError:
        pass
    else:
        if all(t in _SCALARS for _k, t, _v in flat):
            return name, flat
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
    """Per-run counts of (tool, arguments) pairs, one per batch that made the call; ``limit``
    batches of one pair are allowed.

    A batch is known by its assistant message (the reply that made its calls). Only the run's
    loop thread uses it (calls are prepared in order, also in parallel mode), so it needs no
    lock.
    """

    __slots__ = ("_batch", "_counts", "_in_batch", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._counts: dict[Any, int] = {}
        self._batch: object | None = None  # the reply whose calls are being prepared
        self._in_batch: set[Any] = set()  # the pairs that batch has counted already

    def _enter(self, batch: object) -> None:
        """Start counting for ``batch`` when it is not the batch counted so far."""
        if batch is not self._batch:
            self._batch = batch
            self._in_batch = set()

    def refusal(self, name: str, args: dict[str, Any], batch: object, key: Any = None) -> str | None:
        """The error text for a call of ``name`` with ``args`` when that pair ran in ``limit``
        earlier batches of this run, or ``None`` when it may run (always, for a pair this
        ``batch`` already counted: identical calls in one batch are one). ``key`` is
        ``call_key(name, args)`` when the caller made it already."""
        if key is None:
            key = call_key(name, args)
        self._enter(batch)
        if key in self._in_batch or self._counts.get(key, 0) < self.limit:
            return None
        times = "once" if self.limit == 1 else f"{self.limit} times"
        return (
            f'Tool "{name}" was not run: it was already called {times} in this run with these '
            "same arguments, and its result is above. Answer from that result, or call the "
            "tool with different arguments."
        )

    def record(self, name: str, args: dict[str, Any], batch: object, key: Any = None) -> None:
        """Count a call of ``name`` with ``args`` of ``batch`` that is about to run (once per
        batch); ``key`` as for ``refusal``."""
        if key is None:
            key = call_key(name, args)
        self._enter(batch)
        if key not in self._in_batch:
            self._in_batch.add(key)
            self._counts[key] = self._counts.get(key, 0) + 1

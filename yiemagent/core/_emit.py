"""Event listeners behind one serialised, failure-proof sink (docs/design.md, decision 7).

``SafeEmitter`` is the sink the loop and the tool pipeline call. It hands each event to every
listener in subscription order under one lock, so listeners are never entered by two threads at
once, even from parallel tools; a listener that raises is logged and skipped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from yiemagent.errors import reraise_interrupt

__all__ = ["Emit", "SafeEmitter", "safe_emitter"]

Emit = Callable[[Any], Any]
logger = logging.getLogger("yiemagent")


class SafeEmitter:
    """Calls its listeners, in subscription order, under a lock.

    An exception raised by a listener is logged and swallowed, and the next listener still gets
    the event: a broken UI or logger must not turn into a failed tool call. With no listener,
    ``active`` is false and callers skip building events at all. ``subscribe`` and the function
    it returns may be called from any thread, during a run too: the change applies from the next
    event.
    """

    __slots__ = ("_acquire", "_listeners", "_lock", "_release", "active")

    def __init__(self, sink: Emit | None = None) -> None:
        self._lock = threading.RLock()
        # Bound once: the lock is taken for every event, and a bound acquire/release pair costs
        # less than a ``with`` block.
        self._acquire = self._lock.acquire
        self._release = self._lock.release
        self._listeners: tuple[Emit, ...] = () if sink is None else (sink,)
        self.active = sink is not None

    def subscribe(self, listener: Emit) -> Callable[[], None]:
        """Add ``listener`` after the others; return a function that removes it (calling that
        twice is harmless). Raises ``TypeError`` for a listener that is not callable."""
        if not callable(listener):
            raise TypeError(f"a listener must be callable, got {type(listener).__name__}")
        token = _Subscription(listener)
        with self._lock:
            self._listeners = (*self._listeners, token)
            self.active = True
        return lambda: self._remove(token)

    def _remove(self, token: Emit) -> None:
        with self._lock:
            self._listeners = tuple(fn for fn in self._listeners if fn is not token)
            self.active = bool(self._listeners)

    def send(self, event: Any) -> None:
        """Hand ``event`` to every listener, in order, under the lock (``emitter(event)`` is
        the same; the loop calls ``send``, a plain method call, on every event)."""
        if not self._listeners:  # a quick look; the list is read again under the lock
            return
        self._acquire()
        try:
            # Read under the lock: a listener removed before this point gets nothing more.
            for listener in self._listeners:
                try:
                    listener(event)
                except BaseException as exc:
                    reraise_interrupt(exc)
                    logger.exception(
                        "event listener %r raised on %s; it was skipped", listener, type(event).__name__
                    )
        finally:
            self._release()

    __call__ = send


class _Subscription:
    """A listener added by ``subscribe``: its own object, so the same function subscribed twice
    is removed once per unsubscribe."""

    __slots__ = ("fn",)

    def __init__(self, fn: Emit) -> None:
        self.fn = fn

    def __call__(self, event: Any) -> Any:
        return self.fn(event)

    def __repr__(self) -> str:
        return repr(self.fn)


def safe_emitter(emit: Emit | None) -> SafeEmitter:
    """Return ``emit`` if it is already a ``SafeEmitter``, else wrap it in one."""
    return emit if isinstance(emit, SafeEmitter) else SafeEmitter(emit)

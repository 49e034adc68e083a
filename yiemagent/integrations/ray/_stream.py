"""Events on their way from an actor to the caller's listeners, in the order the agent emitted
them (the way to a shared sink is ``forwarder``).

``EventBuffer`` (actor side) numbers the agent's events as dicts and keeps them until the caller
has taken them. ``EventPump`` (caller side) is one thread per remote agent that long-polls the
buffer and hands the rebuilt events to the caller's listeners, one at a time, in order, like a
local agent's listeners.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

from yiemagent.core._emit import Emit, SafeEmitter
from yiemagent.core._events import AgentEvent
from yiemagent.integrations._event_wire import event_from_dict, event_to_dict

__all__ = ["BUFFER_LIMIT", "POLL_S", "EventBuffer", "EventPump", "Numbered"]

logger = logging.getLogger("yiemagent.integrations.ray")

# How long one poll waits on the actor for new events; also how soon a stopped pump notices.
POLL_S = 1.0
# Events kept for a caller that does not take them; past this the oldest are dropped (and the
# caller's pump logs how many), so a caller that went away cannot fill the actor's memory.
BUFFER_LIMIT = 100_000

Numbered = tuple[int, dict[str, Any]]


class EventBuffer:
    """The agent's events as ``(number, dict)`` pairs, numbered from 1 in emission order and kept
    until a poll acknowledges them. It is an event listener: subscribe it to the agent."""

    def __init__(self, limit: int = BUFFER_LIMIT) -> None:
        self._cond = threading.Condition()
        self._items: collections.deque[Numbered] = collections.deque()
        self._last = 0
        self._dropped = 0
        self._closed = False
        self._limit = limit

    def __call__(self, event: AgentEvent) -> None:
        data = event_to_dict(event)  # outside the lock: the agent's thread pays, not the poller
        with self._cond:
            self._last += 1
            self._items.append((self._last, data))
            if len(self._items) > self._limit:
                self._items.popleft()
                self._dropped += 1
            self._cond.notify_all()

    @property
    def last(self) -> int:
        """The number of the latest event (0 before the first)."""
        with self._cond:
            return self._last

    def poll(self, after: int, timeout: float) -> tuple[list[Numbered], int, bool]:
        """Forget the events up to ``after`` (the caller has them), wait up to ``timeout`` seconds
        for a later one, and return ``(events after it, events dropped so far, closed)``."""
        with self._cond:
            while self._items and self._items[0][0] <= after:
                self._items.popleft()
            self._cond.wait_for(
                lambda: self._closed or (bool(self._items) and self._items[-1][0] > after), timeout
            )
            return list(self._items), self._dropped, self._closed

    def close(self) -> None:
        """No more events will come: wake every poll."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class EventPump:
    """Caller side: a thread that long-polls an actor's ``EventBuffer`` (through ``poll``, a
    function of ``(after, timeout)`` returning what ``EventBuffer.poll`` returns) and hands
    each event to the listeners, in order, never two at once; a listener that raises is logged
    and skipped. It ends when the buffer is closed and every event has been handed over, when a
    poll fails (the actor died), or on ``stop``, after which no listener call starts."""

    def __init__(self, poll: Callable[[int, float], tuple[list[Numbered], int, bool]], name: str) -> None:
        self.listeners = SafeEmitter()
        self._poll: Callable[[int, float], tuple[list[Numbered], int, bool]] | None = poll
        self._cond = threading.Condition()
        self._delivered = 0
        self._finished = False
        self._stopping = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"yiemagent-events-{name}", daemon=True)
        self._thread.start()

    def subscribe(self, listener: Emit) -> Callable[[], None]:
        """Add a listener after the others; return the function that removes it."""
        return self.listeners.subscribe(listener)

    @property
    def delivered(self) -> int:
        """The number of the latest event handed to the listeners."""
        with self._cond:
            return self._delivered

    def on_own_thread(self) -> bool:
        """Whether the caller runs on the pump's thread (in one of its listeners)."""
        return threading.current_thread() is self._thread

    def _fetch(self) -> tuple[list[Numbered], int, bool] | None:
        """One poll, or ``None`` once stopped. The poll function (which holds the actor's
        handle) is only referenced from this frame while the poll runs, so a stopped pump whose
        thread is still in a listener does not keep the actor alive."""
        poll = self._poll
        if poll is None or self._stopping.is_set():
            return None
        return poll(self._delivered, POLL_S)

    def _run(self) -> None:
        dropped_seen = 0
        try:
            while (polled := self._fetch()) is not None:
                batch, dropped, closed = polled
                if dropped > dropped_seen:
                    logger.warning(
                        "%d events were dropped before this caller took them (the actor keeps at most %d)",
                        dropped - dropped_seen,
                        BUFFER_LIMIT,
                    )
                    dropped_seen = dropped
                if not self._hand_over(batch) or (closed and not batch):
                    break
        except Exception as exc:  # the actor is gone: nothing more will come
            if not self._stopping.is_set():
                logger.info("event stream ended: %s", exc)
            self.error = exc
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def _hand_over(self, batch: list[Numbered]) -> bool:
        """Hand the events of ``batch`` not yet delivered to the listeners, in order; ``False``
        when ``stop`` came first (checked under its lock: no call starts after ``stop``)."""
        for number, data in batch:
            with self._cond:
                if self._stopping.is_set():
                    return False
            if number <= self._delivered:
                continue
            self._deliver(data)
            with self._cond:
                self._delivered = number
                self._cond.notify_all()
        return True

    def _deliver(self, data: dict[str, Any]) -> None:
        try:
            event = event_from_dict(data)
        except ValueError as exc:
            logger.warning("an event could not be read back and was skipped: %s", exc)
            return
        self.listeners(event)

    def wait_for(self, number: int, timeout: float | None) -> bool:
        """Wait until event ``number`` has reached the listeners; ``False`` when ``timeout``
        passed or the stream ended first."""
        with self._cond:
            self._cond.wait_for(lambda: self._delivered >= number or self._finished, timeout)
            return self._delivered >= number

    def finish(self, timeout: float | None) -> bool:
        """Wait (up to ``timeout``) until the thread has ended: the buffer was closed and every
        event handed over, or the stream ended otherwise; whether it has."""
        if self.on_own_thread():
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: float | None = None) -> None:
        """Stop: no listener call starts after this, and the poll function is let go; wait (up
        to ``timeout``, not at all with 0) for a listener call in progress to return."""
        with self._cond:
            self._stopping.set()
        self._poll = None
        if timeout != 0 and not self.on_own_thread():
            self._thread.join(timeout)

"""Events on their way out of an actor: buffered for a caller that long-polls them, or forwarded
to a shared sink, always in the order the agent emitted them.

``EventBuffer`` (actor side) numbers the agent's events as dicts and keeps them until the caller
has taken them. ``EventPump`` (caller side) is one thread per remote agent that long-polls the
buffer and hands the rebuilt events to the caller's listeners, one at a time, in order, like a
local agent's listeners. ``SinkForwarder`` (actor side) sends records to a shared sink from a
thread of its own, so a slow sink never slows a run.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from yiemagent.emit import Emit, SafeEmitter
from yiemagent.event_wire import event_from_dict, event_to_dict
from yiemagent.events import AgentEvent

__all__ = ["EventBuffer", "EventPump", "SinkForwarder"]

logger = logging.getLogger("yiemagent.ray_cluster")

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
            self._cond.wait_for(lambda: self._closed or (bool(self._items) and self._items[-1][0] > after),
                                timeout)
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
    and skipped. It ends on ``stop``, when the buffer is closed, or when a poll fails (the
    actor died)."""

    def __init__(self, poll: Callable[[int, float], tuple[list[Numbered], int, bool]], name: str) -> None:
        self.listeners = SafeEmitter()
        self._poll = poll
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

    def _run(self) -> None:
        dropped_seen = 0
        try:
            while not self._stopping.is_set():
                batch, dropped, closed = self._poll(self._delivered, POLL_S)
                if dropped > dropped_seen:
                    logger.warning("%d events were dropped before this caller took them (the "
                                   "actor keeps at most %d)", dropped - dropped_seen, BUFFER_LIMIT)
                    dropped_seen = dropped
                for number, data in batch:
                    if number <= self._delivered:
                        continue
                    self._deliver(data)
                    with self._cond:
                        self._delivered = number
                        self._cond.notify_all()
                if closed and not batch:
                    break
        except Exception as exc:  # the actor is gone: nothing more will come
            if not self._stopping.is_set():
                logger.info("event stream ended: %s", exc)
            self.error = exc
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

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

    def stop(self, timeout: float | None = None) -> None:
        """Stop polling and wait (up to ``timeout``) for the thread to end."""
        self._stopping.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


class SinkForwarder:
    """Actor side: sends event records (``{"source", "time", "event"}``) to ``deliver`` in
    batches, in the order they were put, from a thread of its own. A failing ``deliver`` is
    logged (once per run of failures) and its batch dropped: a broken sink must not stop agents."""

    def __init__(self, deliver: Callable[[list[dict[str, Any]]], None], name: str = "sink") -> None:
        self._deliver = deliver
        self._cond = threading.Condition()
        self._records: collections.deque[dict[str, Any]] = collections.deque()
        self._put = 0
        self._sent = 0
        self._closed = False
        self._failing = False
        self._thread = threading.Thread(target=self._run, name=f"yiemagent-{name}", daemon=True)
        self._thread.start()

    def listener(self, source: str) -> Emit:
        """An event listener that forwards each event as a record from ``source``."""

        def forward(event: AgentEvent) -> None:
            self.put({"source": source, "time": time.time(), "event": event_to_dict(event)})

        return forward

    def put(self, record: dict[str, Any]) -> None:
        """Queue ``record`` for the sink."""
        with self._cond:
            if self._closed:
                return
            self._records.append(record)
            self._put += 1
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or bool(self._records))
                if not self._records:
                    return
                batch = list(self._records)
                self._records.clear()
            try:
                self._deliver(batch)
                self._failing = False
            except Exception as exc:
                if not self._failing:
                    logger.error("the event sink failed; its events are dropped until it works "
                                 "again: %s", exc)
                self._failing = True
            with self._cond:
                self._sent += len(batch)
                self._cond.notify_all()

    def flush(self, timeout: float | None) -> bool:
        """Wait until every record put so far has been handed to the sink; ``False`` on timeout."""
        with self._cond:
            target = self._put
            return self._cond.wait_for(lambda: self._sent >= target, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued, then end the thread (waiting up to ``timeout``)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

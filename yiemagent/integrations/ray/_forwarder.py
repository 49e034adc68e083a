"""Actor side: the queue between an actor's agents and a shared event sink, with a cap.

``SinkForwarder`` sends event records to the sink from a thread of its own, so a slow sink never
slows a run. While the sink is slow or stalled, records wait in a queue of at most ``limit``;
past that the oldest are dropped and counted, and the next batch starts with one marker record
per source that lost some, ``{"source", "time", "dropped": n}``, where the gap is. Dropping
rather than blocking is deliberate: the sink is for watching agents (many of them share one), and
a stalled watcher must neither stop the agents nor grow their memory without bound.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from yiemagent.core._emit import Emit
from yiemagent.core._events import AgentEvent
from yiemagent.integrations._event_wire import event_to_dict

__all__ = ["SINK_QUEUE_LIMIT", "SinkForwarder"]

logger = logging.getLogger("yiemagent.integrations.ray")

# Records an actor keeps for a sink that is behind; at about 1 kB a record, some 10 MB.
SINK_QUEUE_LIMIT = 10_000


class SinkForwarder:
    """Sends event records (``{"source", "time", "event"}``) to ``deliver`` in batches, in the
    order they were put, from a thread of its own, keeping at most ``limit`` waiting (the oldest
    are dropped past that, and a marker says how many, see the module docstring). A failing
    ``deliver`` is logged (once per run of failures) and its batch dropped: a broken sink must
    not stop agents."""

    def __init__(
        self,
        deliver: Callable[[list[dict[str, Any]]], None],
        name: str = "sink",
        limit: int = SINK_QUEUE_LIMIT,
    ) -> None:
        if limit < 1:
            raise ValueError(f"the sink queue limit must be at least 1, got {limit}")
        self._deliver = deliver
        self._limit = limit
        self._cond = threading.Condition()
        self._records: collections.deque[dict[str, Any]] = collections.deque()
        self._dropped: collections.Counter[str] = collections.Counter()  # since the last batch
        self._put = 0
        self._done = 0  # records handed to the sink or dropped
        self._closed = False
        self._failing = False
        self._behind = False  # dropping since the sink last caught up (warned once per spell)
        self._thread = threading.Thread(target=self._run, name=f"yiemagent-{name}", daemon=True)
        self._thread.start()

    def listener(self, source: str) -> Emit:
        """An event listener that forwards each event as a record from ``source``."""

        def forward(event: AgentEvent) -> None:
            self.put({"source": source, "time": time.time(), "event": event_to_dict(event)})

        return forward

    def put(self, record: dict[str, Any]) -> None:
        """Queue ``record`` for the sink, dropping the oldest waiting record when full."""
        with self._cond:
            if self._closed:
                return
            self._records.append(record)
            self._put += 1
            if len(self._records) > self._limit:
                oldest = self._records.popleft()
                if not self._behind:
                    self._behind = True
                    logger.warning(
                        "the event sink is behind; events beyond the %d waiting are "
                        "dropped, oldest first, and a marker record counts them",
                        self._limit,
                    )
                self._dropped[oldest.get("source", "")] += 1
                self._done += 1
            self._cond.notify_all()

    @property
    def dropped(self) -> int:
        """Records dropped since the last batch was taken (0 while the sink keeps up)."""
        with self._cond:
            return sum(self._dropped.values())

    def _take_batch(self) -> tuple[list[dict[str, Any]], int] | None:
        """Wait for records; return them, after a marker per source that lost some, with how
        many records (markers aside) the batch holds; ``None`` once closed with nothing left."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or bool(self._records))
            if not self._records:
                return None
            now = time.time()
            markers = [
                {"source": source, "time": now, "dropped": count} for source, count in self._dropped.items()
            ]
            self._behind = bool(markers)
            self._dropped.clear()
            records = list(self._records)
            self._records.clear()
            return markers + records, len(records)

    def _run(self) -> None:
        while (taken := self._take_batch()) is not None:
            batch, count = taken
            try:
                self._deliver(batch)
                self._failing = False
            except Exception as exc:
                if not self._failing:
                    logger.error(
                        "the event sink failed; its events are dropped until it works again: %s", exc
                    )
                self._failing = True
            with self._cond:
                self._done += count
                self._cond.notify_all()

    def flush(self, timeout: float | None) -> bool:
        """Wait until every record put so far has been handed to the sink (or dropped as the
        queue overflowed); ``False`` on timeout."""
        with self._cond:
            target = self._put
            return self._cond.wait_for(lambda: self._done >= target, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued, then end the thread (waiting up to ``timeout``)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

"""A shared event sink: one actor that many agents' actors write their events to, in order.

``EventSink.start()`` creates it (optionally named, so any process of the cluster can
``EventSink.connect(name)``); give the handle to ``RemoteAgent.start(event_sink=...)`` or
``AgentPool(event_sink=...)``. Every record is ``{"seq", "source", "time", "event"}``: ``seq``
numbers the records across all sources, ``source`` is the session id, ``event`` the event as a
dict (``yiemagent.integrations``). Records from one agent keep their order: each agent's actor
sends them from one thread and waits for each batch, and the sink actor runs one call at a time.
While the sink is behind, each agent's actor keeps at most 10,000 records waiting (``forwarder``)
and drops the oldest beyond that; the next batch then starts with a marker record
``{"seq", "source", "time", "dropped": n}`` (no ``event``) per source that lost ``n`` records.
To send events elsewhere (a log pipeline, a queue), give ``event_sink`` the importable name of a
function instead; it is called with each batch of records on the agent's node.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import ray

from yiemagent.core._events import AgentEvent
from yiemagent.integrations._event_wire import event_from_dict
from yiemagent.integrations.ray._calls import get
from yiemagent.integrations.ray._settings import resolve_name

__all__ = ["EventSink", "EventSinkActor", "sink_deliverer"]


class EventSinkActor:
    """The sink itself: keeps the latest ``max_records`` records, numbered as they arrive."""

    def __init__(self, max_records: int = 1_000_000) -> None:
        self._records: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_records)
        self._seq = 0

    def append(self, records: list[dict[str, Any]]) -> int:
        """Number and keep ``records``; return the number of the last one."""
        for record in records:
            self._seq += 1
            self._records.append({**record, "seq": self._seq})
        return self._seq

    def records(self, after: int = 0, source: str | None = None) -> list[dict[str, Any]]:
        """The records numbered after ``after`` (from ``source`` only, when given), in order."""
        return [r for r in self._records if r["seq"] > after and (source is None or r["source"] == source)]

    def count(self) -> int:
        """How many records have arrived so far."""
        return self._seq


_SinkActor: Any = ray.remote(EventSinkActor)


class EventSink:
    """A handle to a shared ``EventSinkActor``; picklable, so it can be given to actors."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    @classmethod
    def start(
        cls,
        name: str | None = None,
        *,
        namespace: str | None = None,
        detached: bool = False,
        max_records: int = 1_000_000,
        actor_options: dict[str, Any] | None = None,
    ) -> EventSink:
        """Create the sink actor. With ``name``, ``connect`` finds it from any process of the
        cluster; with ``detached`` it outlives the process that started it (until ``shutdown``
        or the cluster stops), otherwise it ends with that process."""
        options: dict[str, Any] = {"num_cpus": 0, **(actor_options or {})}
        if name is not None:
            options.update(name=name, namespace=namespace)
        if detached:
            options["lifetime"] = "detached"
        actor = _SinkActor.options(**options).remote(max_records)
        get(actor.count.remote(), what="starting the event sink")
        return cls(actor)

    @classmethod
    def connect(cls, name: str, *, namespace: str | None = None) -> EventSink:
        """The named sink ``name`` (``ValueError`` when there is none)."""
        return cls(ray.get_actor(name, namespace=namespace))

    def records(self, after: int = 0, source: str | None = None) -> list[dict[str, Any]]:
        """The records numbered after ``after`` (from ``source`` only, when given). A record
        reaches the sink shortly after its event; ``RemoteAgent.flush_events`` and
        ``AgentPool.flush_events`` wait until it has."""
        result: list[dict[str, Any]] = get(self.actor.records.remote(after, source), what="reading the sink")
        return result

    def events(self, source: str | None = None) -> list[AgentEvent]:
        """The events of every record (from ``source`` only, when given), rebuilt, in order;
        the markers of dropped records are left out (``records`` has them)."""
        return [event_from_dict(r["event"]) for r in self.records(0, source) if "event" in r]

    def shutdown(self) -> None:
        """Stop the sink actor; its records are gone."""
        ray.kill(self.actor)


def sink_deliverer(sink: EventSink | str) -> Callable[[list[dict[str, Any]]], None]:
    """The function a ``SinkForwarder`` hands batches to: a call to the sink actor, waited for
    (so batches arrive in order and a slow sink holds back the forwarder, not the agent), or
    the function that an importable name names."""
    if isinstance(sink, EventSink):
        actor = sink.actor

        def deliver(records: list[dict[str, Any]]) -> None:
            ray.get(actor.append.remote(records))

        return deliver
    if isinstance(sink, str):
        target = resolve_name(sink)
        if not callable(target):
            raise TypeError(f"event_sink {sink!r} names a {type(target).__name__}, not a function")
        return target  # type: ignore[no-any-return]
    raise TypeError(
        f"event_sink must be an EventSink or an importable function name, got {type(sink).__name__}"
    )

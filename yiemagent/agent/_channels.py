"""The agent's channels: real ``queue.Queue``s that share one lock with the agent's worker.

``agent.input_channel.put(msg)`` is ``run_agent(msg)``, ``agent.follow_up_channel.put(msg)`` is
``follow_up(msg)`` and ``agent.output_channel.get(timeout=...)`` is ``take_response(timeout)``:
same message forms, same blocking, same errors. Every channel of one agent uses the same lock
and the same condition as its worker, so "a message is queued", "a run is active" and "a
response is out" change together and nobody misses a wake-up. Each queued message carries its
arrival number, so the worker starts runs in arrival order whichever channel a message came
through.
"""

from __future__ import annotations

import collections
import contextvars
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from yiemagent.core._messages import AssistantMessage, UserMessage
from yiemagent.core._user_input import openai_to_user_message
from yiemagent.errors import AgentClosedError, ResponseTimeout

__all__ = ["ChannelHub", "MessageChannel", "OutputChannel", "Queued"]

Queued = tuple[int, UserMessage]  # (arrival number, message)
T = TypeVar("T")


# The hub of the agent whose worker (or one of its tool threads) is running this code: a
# blocking call into that same agent from here would wait for itself.
_RUNNING_FOR: contextvars.ContextVar[ChannelHub | None] = contextvars.ContextVar(
    "yiemagent_running_for", default=None
)


class ChannelHub:
    """What an agent's channels and worker share: the lock, the one condition everybody waits on
    (always notified with ``notify_all``), the arrival counter, and the agent's lifecycle flags.
    ``worker`` is the worker thread's ident: a blocking call from that thread would wait for
    itself, so it raises ``RuntimeError`` instead."""

    __slots__ = ("abandoned", "arrivals", "changed", "closed", "dropped", "finished", "lock", "worker")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.arrivals = itertools.count()
        self.closed = False  # no new messages (shutdown began)
        self.finished = False  # the worker has ended
        self.worker: int | None = None
        self.dropped: set[int] = set()  # arrivals removed unprocessed (clear_queues, reset)
        self.abandoned: set[int] = set()  # arrivals of prompts that timed out

    def enter_worker(self) -> None:
        """Mark the calling thread's context as this agent's worker; tool threads started from
        it inherit the mark (the pipeline copies the context into them)."""
        _RUNNING_FOR.set(self)

    def on_own_thread(self) -> bool:
        """Whether the caller is this agent's worker, or a tool or listener running for it."""
        return _RUNNING_FOR.get() is self or (
            self.worker is not None and threading.get_ident() == self.worker
        )

    def check_not_worker(self, what: str) -> None:
        """Raise ``RuntimeError`` if called from the agent's own worker or one of its tool
        threads, where ``what`` would wait for the worker itself to move on: a deadlock."""
        if self.on_own_thread():
            raise RuntimeError(
                f"{what} would block the agent's own worker (called from an event "
                "listener or a tool of that agent) and never return; call it "
                "from another thread"
            )


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


class _Channel(queue.Queue[T], Generic[T]):
    """A ``queue.Queue`` whose lock and conditions are the hub's (all waits use the hub's one
    condition and every change notifies all waiters)."""

    def __init__(self, maxsize: int, hub: ChannelHub) -> None:
        super().__init__(maxsize)
        self.hub = hub
        self.mutex = hub.lock
        self.not_empty = self.not_full = self.all_tasks_done = hub.changed

    def task_done(self) -> None:
        with self.hub.changed:
            if self.unfinished_tasks <= 0:
                raise ValueError("task_done() called too many times")
            self.unfinished_tasks -= 1
            self.hub.changed.notify_all()


class MessageChannel(_Channel[UserMessage]):
    """The input or follow-up channel: ``put`` takes any message form an agent accepts.

    ``put`` converts the message first, in the caller's thread (a bad one raises
    ``TypeError``/``ValueError`` there and nothing is queued), blocks while the channel is full
    (``queue.Full`` when ``block`` is false or the timeout passes) and raises
    ``AgentClosedError`` once the agent is shut down. ``get`` returns the ``UserMessage``s
    queued and not yet taken by the worker. The worker marks each message it takes as done, so
    ``join()`` waits until every queued message was taken.
    """

    queue: collections.deque[Queued]

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        self.send(item, block, timeout)

    def send(
        self,
        item: Any,
        block: bool = True,
        timeout: float | None = None,
        on_arrival: Callable[[int], None] | None = None,
    ) -> int:
        """``put`` that returns the message's arrival number; ``on_arrival(number)`` runs under
        the agent's lock before the worker can see the message (it files what the message's run
        needs)."""
        message = openai_to_user_message(item)
        deadline = None if timeout is None else time.monotonic() + timeout
        hub = self.hub
        with hub.changed:
            while True:
                if hub.closed:
                    raise AgentClosedError("the agent was shut down; it takes no new messages")
                if len(self.queue) < self.maxsize:
                    break
                remaining = _remaining(deadline)
                if not block or (remaining is not None and remaining <= 0):
                    raise queue.Full(f"the channel holds {self.maxsize} messages already")
                hub.check_not_worker("sending to a full channel")
                hub.changed.wait(remaining)
            number = next(hub.arrivals)
            if on_arrival is not None:
                on_arrival(number)
            self.queue.append((number, message))
            self.unfinished_tasks += 1
            hub.changed.notify_all()
            return number

    def get(self, block: bool = True, timeout: float | None = None) -> UserMessage:
        deadline = None if timeout is None else time.monotonic() + timeout
        hub = self.hub
        with hub.changed:
            while not self.queue:
                remaining = _remaining(deadline)
                if not block or (remaining is not None and remaining <= 0) or hub.finished:
                    raise queue.Empty("no message is queued")
                hub.changed.wait(remaining)
            _, message = self.queue.popleft()
            hub.changed.notify_all()
            return message

    # The worker's side: called with the hub's lock held.

    def head_arrival(self) -> int | None:
        """The arrival number of the oldest queued message, or ``None`` when empty."""
        return self.queue[0][0] if self.queue else None

    def take(self) -> Queued:
        """Remove and return the oldest message with its arrival number, marked as done."""
        item = self.queue.popleft()
        self.unfinished_tasks = max(0, self.unfinished_tasks - 1)
        self.hub.changed.notify_all()
        return item

    def remove(self, arrival: int) -> bool:
        """Remove the queued message with arrival number ``arrival`` (marked as done); return
        whether it was queued."""
        for item in self.queue:
            if item[0] == arrival:
                self.queue.remove(item)
                self.unfinished_tasks = max(0, self.unfinished_tasks - 1)
                self.hub.changed.notify_all()
                return True
        return False

    def drain(self) -> list[Queued]:
        """Remove and return every queued message with its arrival number, marked as done."""
        items = list(self.queue)
        self.queue.clear()
        self.unfinished_tasks = 0
        self.hub.changed.notify_all()
        return items


Delivered = tuple[frozenset[int], AssistantMessage]  # (arrival numbers it answers, response)


class OutputChannel(_Channel[AssistantMessage]):
    """The output channel: one ``AssistantMessage`` per run, in the order the runs ended.

    ``get`` is ``take_response``: it raises ``ResponseTimeout`` (a ``queue.Empty`` and a
    ``TimeoutError``) when nothing arrives in time, and ``AgentClosedError`` once the agent is
    shut down and every delivered response was taken. The worker waits for room while the
    channel is full, except during shutdown, when it keeps responses beyond ``maxsize`` (so
    shutdown never waits for a taker; ``qsize`` then counts them all). Each response remembers
    the arrival numbers of the messages its run answered, so ``prompt`` takes its own.
    """

    queue: collections.deque[Delivered]

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        raise TypeError(
            "the output channel is written by the agent only; send messages with "
            "input_channel.put or run_agent"
        )

    def get(self, block: bool = True, timeout: float | None = None) -> AssistantMessage:
        return self._take(None, block, timeout)

    def take_for(self, arrival: int, timeout: float | None) -> AssistantMessage:
        """The response of the run that answered message ``arrival``, wherever it is in the
        channel; the other responses stay in order. When the timeout passes, ``arrival`` is
        marked abandoned in the same step (under the lock), so a response delivered a moment
        later is never put out for somebody else."""
        return self._take(arrival, True, timeout)

    def _take(self, arrival: int | None, block: bool, timeout: float | None) -> AssistantMessage:
        deadline = None if timeout is None else time.monotonic() + timeout
        hub = self.hub
        with hub.changed:
            while (index := self._find(arrival)) is None:
                if arrival is not None and arrival in hub.dropped:
                    hub.dropped.discard(arrival)
                    raise RuntimeError(
                        "the message was dropped from the queue (clear_queues, "
                        "reset or shutdown) before it ran; it has no response"
                    )
                if hub.finished:
                    raise AgentClosedError("the agent was shut down and has no responses left")
                remaining = _remaining(deadline)
                if not block or (remaining is not None and remaining <= 0):
                    if arrival is not None:
                        hub.abandoned.add(arrival)
                    raise ResponseTimeout(
                        "no response is ready" if not block else f"no response within {timeout} s"
                    )
                hub.check_not_worker("waiting for a response")
                hub.changed.wait(remaining)
            _, response = self.queue[index]
            del self.queue[index]
            hub.changed.notify_all()  # the worker may be waiting for room
            return response

    def _find(self, arrival: int | None) -> int | None:
        if arrival is None:
            return 0 if self.queue else None
        for index, (arrivals, _) in enumerate(self.queue):
            if arrival in arrivals:
                return index
        return None

    def deliver(self, response: AssistantMessage, arrivals: frozenset[int]) -> None:
        """The worker's put, with the hub's lock held: wait for room unless shutting down."""
        hub = self.hub
        while len(self.queue) >= self.maxsize and not hub.closed:
            hub.changed.wait()
        self.queue.append((arrivals, response))
        self.unfinished_tasks += 1
        hub.changed.notify_all()

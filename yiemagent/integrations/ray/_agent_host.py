"""The actor behind a ``RemoteAgent``: one ``YiemAgent`` in a Ray worker process.

Its methods are the agent's own, called from the caller's handle. It is a threaded actor: calls
that wait (``take_response``, ``prompt``, a send to a full channel) each hold a thread of the
default group, while ``abort``, event polls, saves and ``shutdown`` run in the ``control`` group,
so they are never stuck behind waiting calls. ``shutdown`` collects the responses nobody took
only once those waiting calls have returned, so it never takes the answer a ``prompt`` in flight
is waiting for.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import ray

from yiemagent.agent._session import SessionData, load_session
from yiemagent.core._approval import Decision, PendingApproval
from yiemagent.core._messages import AgentMessage, AssistantMessage, UserMessage
from yiemagent.errors import AgentClosedError, ClusterError, ResponseTimeout, SessionError, describe_error
from yiemagent.integrations._session_store import SessionStore
from yiemagent.integrations.ray._calls import remaining
from yiemagent.integrations.ray._forwarder import SinkForwarder
from yiemagent.integrations.ray._settings import AgentFactory, AgentSettings
from yiemagent.integrations.ray._sink import EventSink, sink_deliverer
from yiemagent.integrations.ray._stream import EventBuffer, Numbered

__all__ = ["CONTROL_THREADS", "AgentHost"]

CONTROL_THREADS = 8  # abort, event polls, flushes, saves and shutdown; a poll holds one for ~1 s
# Once the agent has finished, a waiting call returns at once (with its response, or the
# agent's AgentClosedError); this only bounds shutdown's wait for them should one not.
CALLS_END_S = 30.0


def read_session(source: str | os.PathLike[str] | SessionStore, session_id: str | None) -> SessionData:
    """The session in ``source``: a session file (on this node) or a store (``session_id``
    required); ``SessionError`` when there is none or it cannot be read."""
    if isinstance(source, SessionStore):
        if session_id is None:
            raise TypeError("loading from a session store needs the session_id")
        data = source.load(session_id)
        if data is None:
            raise SessionError(f"{source!r} has no session {session_id!r}")
        return data
    return load_session(source)


class AgentHost:
    """Hosts one agent built from ``AgentSettings``, with a new session (``session_id``, or a
    fresh id) or one read from ``source`` (a session file on this node or a store). A failure
    to build it is kept and raised by ``ready`` and every later call, as a ``ClusterError``
    (or the ``SessionError`` of a session that could not be read)."""

    def __init__(
        self,
        settings: AgentSettings,
        session_id: str | None = None,
        source: str | os.PathLike[str] | SessionStore | None = None,
        event_sink: EventSink | str | None = None,
    ) -> None:
        self._failure: Exception | None = None
        self._buffer = EventBuffer()
        self._streaming: Any = None
        self._forwarder: SinkForwarder | None = None
        self._calls = threading.Condition()
        self._waiting = 0  # calls of the default group in progress (they may hold a response)
        try:
            session = None if source is None else read_session(source, session_id)
            factory = AgentFactory(settings)
            self._agent = factory.agent(session=session, session_id=session_id)
            if event_sink is not None:
                self._forwarder = SinkForwarder(sink_deliverer(event_sink))
                self._agent.subscribe(self._forwarder.listener(self._agent.session_id))
        except SessionError as exc:
            self._failure = exc
        except Exception as exc:  # whatever the settings did: the caller is told, not the log
            self._failure = ClusterError(
                f"the agent's actor could not build its agent: {describe_error(exc)}"
            )

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    def ready(self) -> dict[str, Any]:
        """Where the agent runs: its session id, process id and Ray node id."""
        self._check()
        return {
            "session_id": self._agent.session_id,
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
        }

    # -- the agent's calls (default group: they may wait) ----------------------------------

    @contextlib.contextmanager
    def _waiting_call(self) -> Iterator[None]:
        """Count a call of the default group while it runs (``shutdown`` waits for them)."""
        self._check()
        with self._calls:
            self._waiting += 1
        try:
            yield
        finally:
            with self._calls:
                self._waiting -= 1
                self._calls.notify_all()

    def run_agent(self, msg: Any) -> None:
        with self._waiting_call():
            self._agent.run_agent(msg)

    def follow_up(self, msg: Any) -> None:
        with self._waiting_call():
            self._agent.follow_up(msg)

    def take_response(self, timeout: float | None) -> AssistantMessage:
        with self._waiting_call():
            return self._agent.take_response(timeout)

    def prompt(self, text: Any, timeout: float | None) -> AssistantMessage:
        with self._waiting_call():
            return self._agent.prompt(text, timeout)

    def wait_for_idle(self, timeout: float | None) -> bool:
        with self._waiting_call():
            return self._agent.wait_for_idle(timeout)

    # -- control (a group of its own: never behind a waiting call) -------------------------

    @ray.method(concurrency_group="control")
    def resume(self, approvals: Mapping[str, Decision] | None = None) -> None:
        self._check()
        self._agent.resume(approvals)

    @ray.method(concurrency_group="control")
    def pending_approvals(self) -> list[PendingApproval]:
        self._check()
        return self._agent.pending_approvals

    @ray.method(concurrency_group="control")
    def abort(self) -> None:
        self._check()
        self._agent.abort()

    @ray.method(concurrency_group="control")
    def is_running(self) -> bool:
        self._check()
        return self._agent.is_running

    @ray.method(concurrency_group="control")
    def messages(self) -> list[AgentMessage]:
        self._check()
        return self._agent.messages

    @ray.method(concurrency_group="control")
    def session_data(self) -> SessionData:
        self._check()
        return self._agent.session_data()

    @ray.method(concurrency_group="control")
    def save(self, target: str | os.PathLike[str] | SessionStore) -> None:
        """Save the session to a file on this node or to a store."""
        self._check()
        if isinstance(target, SessionStore):
            target.save(self._agent.session_data())
        else:
            self._agent.save(target)

    @ray.method(concurrency_group="control")
    def stream_events(self) -> int:
        """Start keeping events for the caller's poll (from the next event on); return the
        number of the latest event, from which the caller's pump starts."""
        self._check()
        if self._streaming is None:
            self._streaming = self._agent.subscribe(self._buffer)
        return self._buffer.last

    @ray.method(concurrency_group="control")
    def poll_events(self, after: int, timeout: float) -> tuple[list[Numbered], int, bool]:
        return self._buffer.poll(after, timeout)

    @ray.method(concurrency_group="control")
    def flush_events(self, timeout: float | None) -> int:
        """Wait (up to ``timeout``) until the shared sink has every event so far; return the
        number of the latest event kept for the caller, which its pump then waits for."""
        if self._forwarder is not None and not self._forwarder.flush(timeout):
            raise ResponseTimeout(f"the event sink did not take the events within {timeout} s")
        return self._buffer.last

    @ray.method(concurrency_group="control")
    def shutdown(
        self, wait: bool, abort: bool, timeout: float | None
    ) -> tuple[list[UserMessage], list[AssistantMessage], bool]:
        """Shut the agent down; return the messages it never processed, the responses nobody
        took (when it has finished) and whether it has finished. The responses are collected
        after the calls in progress (a ``prompt`` waiting for its run) have taken theirs."""
        if self._failure is not None:
            return [], [], True
        deadline = None if timeout is None else time.monotonic() + timeout
        queued = self._agent.shutdown(wait=wait, abort=abort, timeout=timeout)
        finished = wait and not self._agent.is_running
        if not finished:  # still running: its events keep flowing until the actor ends
            return queued, [], False
        leftovers = self._untaken(deadline)
        if self._forwarder is not None:
            self._forwarder.close(remaining(deadline))
        self._buffer.close()
        return queued, leftovers, True

    def _untaken(self, deadline: float | None) -> list[AssistantMessage]:
        """The responses still on the finished agent's output channel, taken once the waiting
        calls have returned (each with its own response, or ``AgentClosedError``)."""
        # At least a moment even past the deadline: they are returning now, and the answer one
        # of them is about to take must not be taken here instead.
        left = remaining(deadline, 1.0)
        limit = CALLS_END_S if left is None else min(CALLS_END_S, left)
        with self._calls:
            self._calls.wait_for(lambda: self._waiting == 0, limit)
        leftovers: list[AssistantMessage] = []
        while True:
            try:
                leftovers.append(self._agent.take_response(0))
            except (ResponseTimeout, AgentClosedError):
                return leftovers

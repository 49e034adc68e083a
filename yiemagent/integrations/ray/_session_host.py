"""The actor behind one slot of an ``AgentPool``: many sessions, each a ``YiemAgent`` in memory
while it is in use, loaded from the session store when it is not and saved after each run.

Runs of one session are taken one at a time (a lock per session); runs of different sessions go
on at once, each on a thread of the actor's default group. Sessions beyond ``max_sessions``, and
those idle for ``idle_timeout_s``, are evicted, least recently used first: saved (when their
last save failed) and dropped from memory. A session in use is never evicted.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import ray

from yiemagent.agent._agent import YiemAgent
from yiemagent.core._approval import Decision, PendingApproval
from yiemagent.core._messages import AssistantMessage
from yiemagent.errors import AgentClosedError, ClusterError, ResponseTimeout, describe_error
from yiemagent.integrations._session_store import SessionStore
from yiemagent.integrations.ray._forwarder import SinkForwarder
from yiemagent.integrations.ray._settings import AgentFactory, AgentSettings
from yiemagent.integrations.ray._sink import EventSink, sink_deliverer

__all__ = ["SessionHost", "error_response"]

logger = logging.getLogger("yiemagent.integrations.ray")


def error_response(message: str) -> AssistantMessage:
    """A made-up response for a run that could not happen or was lost (``stop_reason="error"``)."""
    return AssistantMessage(stop_reason="error", error_message=message)


def _drop_untaken(agent: YiemAgent) -> None:
    """Drop the responses on ``agent``'s output channel (a resume whose caller timed out left
    its response there), so the next ``take_response`` is the next run's."""
    while True:
        try:
            agent.take_response(0)
        except ResponseTimeout:
            return


def _checkpoint_to(agent: YiemAgent, store: SessionStore) -> None:
    """Save ``agent``'s session to ``store`` while a batch approved by ``resume`` runs: before
    a call starts (a call whose save fails does not start) and after it ends, as an agent with
    a session file does. So a slot whose actor dies mid-batch takes the session up with the
    calls that had started marked, and never runs one twice."""
    core = agent._worker_core

    def checkpoint() -> None:
        store.save(core.session_data())

    core.config = attrs.evolve(core.config, approval_checkpoint=checkpoint)


class _Session:
    """One session of the actor: its agent (``None`` until loaded), the lock that keeps its runs
    one at a time, how many calls are using it, and whether its last save failed."""

    __slots__ = ("agent", "dirty", "last_used", "lock", "users")

    def __init__(self) -> None:
        self.agent: YiemAgent | None = None
        self.lock = threading.Lock()
        self.users = 0
        self.dirty = False
        self.last_used = time.monotonic()


class SessionHost:
    """Hosts the sessions of one pool slot (see the module docstring). A failure to resolve the
    settings is kept and raised by every call as a ``ClusterError``."""

    def __init__(
        self,
        settings: AgentSettings,
        store: SessionStore,
        *,
        slot: int = 0,
        max_sessions: int = 1000,
        idle_timeout_s: float | None = 600.0,
        event_sink: EventSink | str | None = None,
    ) -> None:
        self._store = store
        self._slot = slot
        self._max_sessions = max_sessions
        self._idle_timeout_s = idle_timeout_s
        self._sessions: collections.OrderedDict[str, _Session] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        self._stopping = threading.Event()
        self._counts: collections.Counter[str] = collections.Counter()
        self._failure: Exception | None = None
        self._forwarder: SinkForwarder | None = None
        try:
            self._factory = AgentFactory(settings, share_llm_call=True)
            if event_sink is not None:
                self._forwarder = SinkForwarder(sink_deliverer(event_sink))
        except Exception as exc:
            self._failure = ClusterError(
                f"the pool's actor {slot} could not resolve its settings: {describe_error(exc)}"
            )
        if idle_timeout_s is not None:
            threading.Thread(target=self._reap_idle, name="yiemagent-idle-sessions", daemon=True).start()

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise AgentClosedError("this pool actor has been shut down")

    def ready(self) -> dict[str, Any]:
        """Where this slot runs: slot number, process id and Ray node id."""
        self._check()
        return {"slot": self._slot, "pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    # -- runs --------------------------------------------------------------------------------

    def prompt(self, session_id: str, text: Any, timeout: float | None) -> AssistantMessage:
        """Run ``text`` in session ``session_id`` (loaded from the store, or new when the store
        does not have it) and save the session; return the run's response. A session that
        cannot be loaded gives an error response; ``ResponseTimeout`` as from ``prompt``."""
        return self._run_in(session_id, lambda agent: agent.prompt(text, timeout))

    def resume(
        self, session_id: str, approvals: Mapping[str, Decision] | None, timeout: float | None
    ) -> AssistantMessage:
        """Resume session ``session_id`` (loaded from the store when it is not in memory): with
        ``approvals``, run its batch waiting for approval with those decisions; save the session
        and return the run's response. Unusable decisions raise ``ApprovalError`` and nothing
        runs; nothing to resume raises ``ValueError``; a session that cannot be loaded gives an
        error response; ``ResponseTimeout`` as from ``prompt``."""

        def resume(agent: YiemAgent) -> AssistantMessage:
            _drop_untaken(agent)
            agent.resume(approvals)
            return agent.take_response(timeout)

        return self._run_in(session_id, resume)

    def _run_in(self, session_id: str, run: Callable[[YiemAgent], AssistantMessage]) -> AssistantMessage:
        """``run`` the session's agent (loaded into this slot when needed, one run at a time per
        session), count the run and save the session; a session that cannot be loaded gives an
        error response instead."""
        self._check()
        entry = self._enter(session_id)
        try:
            with entry.lock:
                agent = self._load_into(session_id, entry)
                if isinstance(agent, Exception):
                    return error_response(
                        f"session {session_id!r} could not be loaded: {describe_error(agent)}"
                    )
                response = run(agent)
                self._count("runs")
                self._save(session_id, entry)
                return response
        finally:
            self._leave(session_id, entry)

    def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        """The calls of session ``session_id`` waiting for a decision: from its agent when it
        is in memory, else from its last save (empty when the store has no such session)."""
        self._check()
        with self._lock:
            entry = self._sessions.get(session_id)
            agent = None if entry is None else entry.agent
        if agent is not None:
            return agent.pending_approvals
        data = self._store.load(session_id)
        return [] if data is None or data.paused is None else data.paused.pending()

    def preload(self, session_id: str) -> bool:
        """Load session ``session_id`` into memory now (a restarted slot warms the session whose
        run was lost); ``True`` when it is in memory afterwards."""
        self._check()
        entry = self._enter(session_id)
        try:
            with entry.lock:
                agent = self._load_into(session_id, entry)
                if isinstance(agent, Exception):
                    logger.warning("session %r could not be preloaded: %s", session_id, agent)
                    return False
                return True
        finally:
            self._leave(session_id, entry)

    def _enter(self, session_id: str) -> _Session:
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is None:
                entry = self._sessions[session_id] = _Session()
            else:
                self._sessions.move_to_end(session_id)
            entry.users += 1
            return entry

    def _leave(self, session_id: str, entry: _Session) -> None:
        with self._lock:
            entry.users -= 1
            entry.last_used = time.monotonic()
            if entry.agent is None and entry.users == 0 and self._sessions.get(session_id) is entry:
                del self._sessions[session_id]  # never loaded: nothing to keep
            victims = self._candidates()
        for victim_id, victim in victims:
            self._evict(victim_id, victim, wait=False)

    def _load_into(self, session_id: str, entry: _Session) -> YiemAgent | Exception:
        """The session's agent, opened into ``entry`` unless it is open (the caller holds
        ``entry.lock``), or the exception that kept it from loading."""
        if entry.agent is None:
            try:
                entry.agent = self._open(session_id)
            except Exception as exc:
                return exc
        return entry.agent

    def _open(self, session_id: str) -> YiemAgent:
        """The agent of ``session_id``: from the store, or a new session under that id."""
        data = self._store.load(session_id)
        self._count("loads" if data is not None else "creates")
        forwarder = self._forwarder
        agent = self._factory.agent(
            session=data,
            session_id=session_id,
            listener=None if forwarder is None else forwarder.listener(session_id),
        )
        _checkpoint_to(agent, self._store)
        return agent

    def _save(self, session_id: str, entry: _Session) -> None:
        """Save the session; a failure is logged and counted, and the session is kept dirty so
        that its eviction saves it again (and holds it in memory until that works)."""
        assert entry.agent is not None
        try:
            self._store.save(entry.agent.session_data())
        except Exception as exc:
            entry.dirty = True
            self._count("save_errors")
            logger.error("session %r could not be saved (it stays in memory): %s", session_id, exc)
        else:
            entry.dirty = False
            self._count("saves")

    def _count(self, name: str) -> None:
        with self._lock:  # Counter's += is a read and a write: two threads could lose one
            self._counts[name] += 1

    # -- control -----------------------------------------------------------------------------

    @ray.method(concurrency_group="control")
    def abort(self, session_id: str) -> bool:
        """Abort the active run of session ``session_id``; whether it is in memory here."""
        self._check()
        with self._lock:
            entry = self._sessions.get(session_id)
            agent = None if entry is None else entry.agent
        if agent is None:
            return False
        agent.abort()
        return True

    @ray.method(concurrency_group="control")
    def stats(self) -> dict[str, Any]:
        """Counts since the actor started: sessions in memory, runs, loads, creates, saves,
        save errors, evictions; and the slot, process and node."""
        with self._lock:
            in_memory = sum(1 for e in self._sessions.values() if e.agent is not None)
            counts = {
                k: self._counts[k] for k in ("runs", "loads", "creates", "saves", "save_errors", "evictions")
            }
        return {"slot": self._slot, "pid": os.getpid(), "sessions": in_memory, **counts}

    @ray.method(concurrency_group="control")
    def session_ids(self) -> list[str]:
        """The sessions in memory here, least recently used first."""
        with self._lock:
            return [sid for sid, e in self._sessions.items() if e.agent is not None]

    @ray.method(concurrency_group="control")
    def flush_events(self, timeout: float | None) -> bool:
        """Wait until the shared sink has every event so far; ``False`` on timeout."""
        return self._forwarder is None or self._forwarder.flush(timeout)

    def evict(self, session_id: str) -> bool:
        """Save session ``session_id`` (when its last save failed) and drop it from memory once
        its run, if any, is over; ``True`` when it was in memory and is now gone."""
        with self._lock:
            entry = self._sessions.get(session_id)
        return entry is not None and self._evict(session_id, entry, wait=True)

    def close(self) -> int:
        """Stop taking runs, let the runs in progress finish, and evict every session; return
        how many could not be saved (they are lost with the actor)."""
        self._closed = True
        self._stopping.set()
        with self._lock:
            entries = list(self._sessions.items())
        kept = sum(1 for sid, e in entries if not self._evict(sid, e, wait=True) and e.agent is not None)
        if self._forwarder is not None:
            self._forwarder.close(30.0)
        return kept

    # -- eviction ----------------------------------------------------------------------------

    def _candidates(self, idle_before: float | None = None) -> list[tuple[str, _Session]]:
        """Sessions to evict, least recently used first: those beyond ``max_sessions``, or with
        ``idle_before`` those last used before it; never one in use (``self._lock`` held)."""
        if idle_before is None and len(self._sessions) <= self._max_sessions:
            return []  # the common case, without a walk over the table
        free = [(sid, e) for sid, e in self._sessions.items() if e.users == 0 and e.agent is not None]
        if idle_before is not None:
            return [(sid, e) for sid, e in free if e.last_used < idle_before]
        excess = len(self._sessions) - self._max_sessions
        return free[: max(excess, 0)]

    def _evict(self, session_id: str, entry: _Session, wait: bool) -> bool:
        """Evict ``entry``: save it when its last save failed, then, unless that failed again or
        someone started using it meanwhile, drop it from the table and stop its agent. Without
        ``wait`` a session whose lock is taken is left alone (its run will use it again)."""
        if not entry.lock.acquire(blocking=wait):
            return False
        try:
            if entry.agent is not None and entry.dirty:
                self._save(session_id, entry)
            with self._lock:
                if (
                    entry.dirty
                    or entry.users
                    or entry.agent is None
                    or self._sessions.get(session_id) is not entry
                ):
                    return False
                del self._sessions[session_id]
                self._counts["evictions"] += 1
            entry.agent.shutdown(wait=False)
            entry.agent = None
            return True
        finally:
            entry.lock.release()

    def _reap_idle(self) -> None:
        """Evict the sessions idle for ``idle_timeout_s``, checking a few times per timeout."""
        assert self._idle_timeout_s is not None
        interval = min(max(self._idle_timeout_s / 4, 0.05), 30.0)
        while not self._stopping.wait(interval):
            with self._lock:
                victims = self._candidates(time.monotonic() - self._idle_timeout_s)
            for session_id, entry in victims:
                self._evict(session_id, entry, wait=False)

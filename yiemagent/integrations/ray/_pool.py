"""``AgentPool``: many conversations spread over a fixed number of actors by session id.

Each session id maps to one slot (a stable hash of the id), and each slot is one ``SessionHost``
actor, so every run of a session goes to the actor that holds it, which loads it from the
session store when it is not in memory and saves it after each run. When a slot's actor dies,
the runs it had in progress get error responses, the pool puts a new actor in the slot, and that
actor takes the sessions up from their last saves: a lost actor loses at most its runs in
progress, never an earlier message.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Mapping
from typing import Any

import ray
import ray.exceptions

from yiemagent.agent._session import check_session_id
from yiemagent.core._approval import Decision, PendingApproval
from yiemagent.core._messages import AssistantMessage
from yiemagent.errors import AgentActorDiedError, AgentClosedError, ResponseTimeout
from yiemagent.integrations._session_store import SessionStore
from yiemagent.integrations.ray._agent_host import CONTROL_THREADS
from yiemagent.integrations.ray._calls import get, short_reason
from yiemagent.integrations.ray._remote import GRACE_S, READY_TIMEOUT_S
from yiemagent.integrations.ray._session_host import SessionHost, error_response
from yiemagent.integrations.ray._settings import AgentSettings
from yiemagent.integrations.ray._sink import EventSink

__all__ = ["AgentPool"]

logger = logging.getLogger("yiemagent.integrations.ray")

# Ray's stubs do not list concurrency_groups among remote()'s keywords, though Ray takes it.
_SessionActor: Any = ray.remote(concurrency_groups={"control": CONTROL_THREADS})(SessionHost)  # type: ignore[call-overload]


class AgentPool:
    """``size`` actors serving any number of sessions, each session on the actor of its slot.

    ``settings`` builds every session's agent (one model client per actor, shared by its
    sessions); ``store`` keeps the sessions between runs and must be reachable from every node
    (a ``DirectoryStore`` on a shared file system, a ``RedisStore``). Each actor keeps at most
    ``max_sessions_per_actor`` sessions in memory and evicts those idle for ``idle_timeout_s``;
    ``max_concurrency`` bounds the runs one actor takes at once (more wait in Ray's queue).
    ``actor_options`` go to Ray (defaults: ``num_cpus=0``, ``scheduling_strategy="SPREAD"``;
    ``resources``, ``runtime_env``...); ``event_sink`` receives every session's
    events as records whose ``source`` is the session id. The constructor returns once every
    actor is ready; ``ClusterError`` when the actors cannot resolve the settings.
    """

    def __init__(
        self,
        size: int,
        settings: AgentSettings,
        store: SessionStore,
        *,
        max_sessions_per_actor: int = 1000,
        idle_timeout_s: float | None = 600.0,
        max_concurrency: int = 128,
        actor_options: dict[str, Any] | None = None,
        event_sink: EventSink | str | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive int, got {size!r}")
        if not isinstance(store, SessionStore):
            raise TypeError(f"store must be a SessionStore, got {type(store).__name__}")
        self.size = size
        self.store = store
        self._args = (settings, store)
        self._kwargs: dict[str, Any] = {
            "max_sessions": max_sessions_per_actor,
            "idle_timeout_s": idle_timeout_s,
            "event_sink": event_sink,
        }
        # num_cpus=0: an actor mostly waits for its model. Ray's default placement keeps
        # actors that reserve nothing on the caller's node, so spread them over the nodes.
        self._options: dict[str, Any] = {
            "num_cpus": 0,
            "scheduling_strategy": "SPREAD",
            **(actor_options or {}),
            "max_concurrency": max_concurrency,
        }
        self._lock = threading.Lock()
        self._closed = False
        self.restarts = 0
        self._actors = [self._make(slot) for slot in range(size)]
        try:
            get([a.ready.remote() for a in self._actors], ready_timeout_s, what="starting the pool's actors")
        except BaseException:
            for actor in self._actors:
                ray.kill(actor)
            raise

    def _make(self, slot: int) -> Any:
        return _SessionActor.options(**self._options).remote(*self._args, slot=slot, **self._kwargs)

    def __repr__(self) -> str:
        return f"AgentPool(size={self.size}, store={self.store!r}, restarts={self.restarts})"

    # -- routing -----------------------------------------------------------------------------

    def slot_of(self, session_id: str) -> int:
        """The slot that serves ``session_id``: the same for every pool of this size, in every
        process (a CRC-32 of the id, not Python's per-process ``hash``)."""
        return zlib.crc32(check_session_id(session_id).encode("utf-8")) % self.size

    def actor_for(self, session_id: str) -> Any:
        """The actor handle currently serving ``session_id``."""
        return self._actors[self.slot_of(session_id)]

    def _replace(self, slot: int, dead: Any, reason: BaseException) -> Any:
        """Put a new actor in ``slot`` unless another caller already replaced ``dead``; return
        the slot's actor. The dead one is killed for sure first: an actor that is only
        unreachable must not go on saving sessions that the new one serves."""
        with self._lock:
            current = self._actors[slot]
            if current is not dead or self._closed:
                return current
            logger.warning("the pool's actor %d died (%s); starting a new one", slot, short_reason(reason))
            try:
                ray.kill(dead)
            except Exception as exc:  # already gone
                logger.debug("killing the dead actor %d: %s", slot, exc)
            fresh = self._make(slot)
            self._actors[slot] = fresh
            self.restarts += 1
            return fresh

    def _actor(self, session_id: str) -> tuple[int, Any]:
        if self._closed:
            raise AgentClosedError("the pool was shut down")
        slot = self.slot_of(session_id)
        return slot, self._actors[slot]

    # -- the API -----------------------------------------------------------------------------

    def prompt(self, session_id: str, text: Any, timeout: float | None = None) -> AssistantMessage:
        """Run ``text`` in session ``session_id`` (a new session when the store has none) and
        return the run's response; the session is saved before this returns. When the actor
        dies during the run, the response is an error response saying so (the session goes on
        from its last save on a new actor); ``ResponseTimeout`` when ``timeout`` passes."""
        return self._run(
            session_id,
            "prompt",
            (text, timeout),
            timeout,
            "the run is lost and the session goes on from its last save on a new actor: "
            "send the message again",
        )

    def resume(
        self,
        session_id: str,
        approvals: Mapping[str, Decision] | None = None,
        timeout: float | None = None,
    ) -> AssistantMessage:
        """Resume session ``session_id`` and return the run's response; the session is saved
        before this returns. While calls of the session wait for approval
        (``pending_approvals``), ``approvals`` maps each one's id to ``Approve()``,
        ``Deny(reason)`` or ``Edit(arguments)`` and the paused batch runs with them, on
        whichever actor serves the session now (the batch is kept in its saves). Unusable
        decisions raise ``ApprovalError`` here and nothing runs; nothing to resume raises
        ``ValueError``. An actor that dies during the run gives an error response, as in
        ``prompt``: the session goes on from its last save, where each call of the batch that
        had started is marked, so none runs twice."""
        decisions = None if approvals is None else dict(approvals)
        return self._run(
            session_id,
            "resume",
            (decisions, timeout),
            timeout,
            "the session goes on from its last save on a new actor",
        )

    def _run(
        self, session_id: str, method: str, args: tuple[Any, ...], timeout: float | None, lost: str
    ) -> AssistantMessage:
        """Call the session actor's ``method`` (``prompt`` or ``resume``) and return the run's
        response; when the actor dies during the run, replace it, warm the session on the new
        one (not waited for) and return an error response saying so, then ``lost``."""
        slot, actor = self._actor(session_id)
        ref = getattr(actor, method).remote(session_id, *args)
        try:
            response: AssistantMessage = get(
                ref,
                None if timeout is None else timeout + GRACE_S,
                what=f"{method}() in session {session_id!r}",
            )
        except AgentActorDiedError as exc:
            cause = exc.__cause__ or exc
            fresh = self._replace(slot, actor, cause)
            fresh.preload.remote(session_id)
            return error_response(f"the agent's actor died during this run ({short_reason(cause)}); {lost}")
        return response

    def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        """The calls of session ``session_id`` waiting for a decision, in call order, each with
        the arguments that will execute if it is approved (empty when none waits, or the store
        has no such session)."""
        _, actor = self._actor(session_id)
        pending: list[PendingApproval] = get(
            actor.pending_approvals.remote(session_id), what="pending_approvals()"
        )
        return pending

    def abort(self, session_id: str) -> bool:
        """Abort the active run of ``session_id``; whether the session was in memory."""
        _, actor = self._actor(session_id)
        try:
            aborted: bool = get(actor.abort.remote(session_id), what="abort()")
        except AgentActorDiedError:
            return False
        return aborted

    def evict(self, session_id: str) -> bool:
        """Drop ``session_id`` from memory (after its run, if any; it is saved already);
        ``True`` when it was in memory."""
        _, actor = self._actor(session_id)
        evicted: bool = get(actor.evict.remote(session_id), what="evict()")
        return evicted

    def stats(self) -> list[dict[str, Any]]:
        """Per slot: sessions in memory, runs, loads, creates, saves, save errors and evictions
        since its actor started, with the actor's process id (``None`` for a dead actor)."""
        refs = [a.stats.remote() for a in self._actors]
        out: list[dict[str, Any]] = []
        for slot, ref in enumerate(refs):
            try:
                out.append(get(ref, what="stats()"))
            except AgentActorDiedError:
                out.append({"slot": slot, "pid": None})
        return out

    def flush_events(self, timeout: float | None = 60.0) -> None:
        """Wait until the event sink has every event emitted so far by every actor."""
        done = get(
            [a.flush_events.remote(timeout) for a in self._actors],
            None if timeout is None else timeout + GRACE_S,
            what="flush_events()",
        )
        if not all(done):
            raise ResponseTimeout(f"the event sink did not take the events within {timeout} s")

    def shutdown(self, timeout: float | None = 120.0) -> int:
        """Let the runs in progress finish, save the sessions whose last save failed, and end
        the actors; return how many sessions could not be saved (0 normally). The actors close
        at the same time, so this takes at most about ``timeout`` seconds in all: an actor that
        has not closed by then is ended anyway (a warning names its slot), losing its runs in
        progress and any session whose last save failed."""
        with self._lock:
            if self._closed:
                return 0
            self._closed = True
            actors = list(self._actors)
        refs = [a.close.remote() for a in actors]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout, fetch_local=False)
        finished = set(done)
        lost = 0
        for slot, ref in enumerate(refs):
            if ref not in finished:
                logger.warning(
                    "the pool's actor %d did not close within %s s; it is ended with its runs in progress",
                    slot,
                    timeout,
                )
                continue
            try:
                lost += get(ref, what="shutdown()")
            except Exception as exc:  # dead, or failed: it is ended below all the same
                logger.warning("the pool's actor %d did not close cleanly: %s", slot, short_reason(exc))
        for actor in actors:
            ray.kill(actor)
        return lost

    def __enter__(self) -> AgentPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

"""``RemoteAgent``: a handle, in the caller's process, to a ``YiemAgent`` hosted by a Ray actor.

It has the agent's synchronous API; each call is a call to the actor, waited for. The caller's
listeners receive the agent's events in order through an ``EventPump`` thread that long-polls
the actor; ``flush_events`` waits until they have every event so far (a run's events all come
before its response, so after ``prompt`` returns, ``flush_events`` covers that whole run).
``shutdown`` ends the actor only once the calls in flight have their answers and the listeners
have every event.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import ray

from yiemagent.agent._session import SessionData
from yiemagent.core._approval import Decision, PendingApproval
from yiemagent.core._emit import Emit
from yiemagent.core._messages import AgentMessage, AssistantMessage, UserMessage
from yiemagent.errors import AgentActorDiedError, AgentClosedError, ResponseTimeout
from yiemagent.integrations._session_store import SessionStore
from yiemagent.integrations.ray._agent_host import CALLS_END_S, CONTROL_THREADS, AgentHost
from yiemagent.integrations.ray._calls import get, remaining
from yiemagent.integrations.ray._settings import AgentSettings
from yiemagent.integrations.ray._sink import EventSink
from yiemagent.integrations.ray._stream import EventPump, Numbered

__all__ = ["RemoteAgent"]

logger = logging.getLogger("yiemagent.integrations.ray")

# Extra seconds a caller waits beyond a timeout it gave the actor: the actor enforces the
# timeout itself, this only keeps a caller from waiting forever on an actor that stopped
# answering without dying (a node cut off from the cluster before Ray declares it dead).
GRACE_S = 60.0
READY_TIMEOUT_S = 300.0  # starting a worker process on a busy node can take a while


def _grace(timeout: float | None) -> float | None:
    return None if timeout is None else timeout + GRACE_S


class RemoteAgent:
    """A ``YiemAgent`` running in a Ray actor, driven from here with the same synchronous API:
    ``run_agent``, ``follow_up``, ``resume`` (with ``approvals=`` for calls waiting for
    approval), ``take_response``, ``prompt``, ``abort``, ``wait_for_idle``, ``save``,
    ``shutdown``, ``subscribe``, and ``messages``, ``pending_approvals``, ``session_data()``,
    ``is_running`` to read it. Create it with ``start`` or ``load`` (a saved session's batch
    waiting for approval comes back with it).

    Errors are the local agent's (``ResponseTimeout``, ``AgentClosedError``, ``ValueError`` from
    a bad ``resume``, ``ApprovalError`` from unusable decisions...); when the actor dies, every
    call raises ``AgentActorDiedError``.
    """

    def __init__(self, actor: Any, info: dict[str, Any], listener: Emit | None = None) -> None:
        self.actor = actor
        self.session_id: str = info["session_id"]
        self.pid: int = info["pid"]
        self.node_id: str = info["node_id"]
        self._lock = threading.Lock()
        self._pump: EventPump | None = None
        self._leftovers: list[AssistantMessage] = []
        self._in_flight: set[Any] = set()  # refs of the calls waiting for the actor's answer
        self._in_flight_lock = threading.Lock()  # not _lock: subscribe() calls out holding that
        self._collecting = False  # a shutdown(wait=True) is collecting the untaken responses
        self._collected = threading.Event()  # ...and has kept them in _leftovers
        self._killed = False
        if listener is not None:
            self.subscribe(listener)

    @classmethod
    def start(
        cls,
        settings: AgentSettings,
        *,
        session_id: str | None = None,
        listener: Emit | None = None,
        event_sink: EventSink | str | None = None,
        max_concurrency: int = 32,
        actor_options: dict[str, Any] | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> RemoteAgent:
        """Start an actor hosting a new agent built from ``settings`` and return its handle once
        the agent is built. ``listener`` receives every event from the first run on, on a
        thread of this process; ``event_sink`` (an ``EventSink`` or an importable function
        name) receives them as records on the agent's node. ``max_concurrency`` bounds the calls
        that may wait at once (``take_response``, ``prompt``); ``actor_options`` go to Ray
        (defaults: ``num_cpus=0``, as an agent mostly waits for its model, and
        ``scheduling_strategy="SPREAD"``; ``resources``, ``runtime_env``...). Raises
        ``ClusterError`` when the actor cannot build the agent (a settings name that does not
        import there, a tools folder it cannot load)."""
        return cls._launch(
            settings, session_id, None, listener, event_sink, max_concurrency, actor_options, ready_timeout_s
        )

    @classmethod
    def load(
        cls,
        source: str | os.PathLike[str] | SessionStore,
        settings: AgentSettings,
        *,
        session_id: str | None = None,
        listener: Emit | None = None,
        event_sink: EventSink | str | None = None,
        max_concurrency: int = 32,
        actor_options: dict[str, Any] | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> RemoteAgent:
        """Start an actor hosting an agent that takes up a saved session: a session file, read
        on the actor's node (a shared file system makes that any node), or a store, with
        ``session_id``. The session's id, system prompt, model and history win over the
        settings'; the other arguments are ``start``'s. Raises ``SessionError`` when the
        session cannot be read (or the store has none by that id)."""
        if isinstance(source, SessionStore) and session_id is None:
            raise TypeError("RemoteAgent.load from a session store needs session_id=")
        return cls._launch(
            settings,
            session_id,
            source,
            listener,
            event_sink,
            max_concurrency,
            actor_options,
            ready_timeout_s,
        )

    @classmethod
    def _launch(
        cls,
        settings: AgentSettings,
        session_id: str | None,
        source: str | os.PathLike[str] | SessionStore | None,
        listener: Emit | None,
        event_sink: EventSink | str | None,
        max_concurrency: int,
        actor_options: dict[str, Any] | None,
        ready_timeout_s: float,
    ) -> RemoteAgent:
        # num_cpus=0: an agent mostly waits for its model. Ray's default placement keeps actors
        # that reserve nothing on the caller's node, so spread them over the nodes.
        options: dict[str, Any] = {"num_cpus": 0, "scheduling_strategy": "SPREAD", **(actor_options or {})}
        actor = _HostActor.options(max_concurrency=max_concurrency, **options).remote(
            settings, session_id, source, event_sink
        )
        try:
            info = get(actor.ready.remote(), ready_timeout_s, what="starting the agent's actor")
        except BaseException:
            ray.kill(actor)
            raise
        return cls(actor, info, listener)

    def __repr__(self) -> str:
        return f"RemoteAgent(session_id={self.session_id!r}, pid={self.pid}, node_id={self.node_id[:12]!r})"

    # -- calls -------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        if self._killed:
            raise AgentClosedError("the remote agent was shut down")
        return self._wait(getattr(self.actor, method).remote(*args), timeout, f"{method}()")

    def _wait(self, ref: Any, timeout: float | None, what: str) -> Any:
        """The answer of the call ``ref``, which ``shutdown`` lets arrive before it ends the actor."""
        with self._in_flight_lock:
            self._in_flight.add(ref)
        try:
            return get(ref, timeout, what=what)
        finally:
            with self._in_flight_lock:
                self._in_flight.discard(ref)

    def run_agent(self, msg: Any) -> None:
        """Send a user message (see ``YiemAgent.run_agent``); waits while the channel is full."""
        self._call("run_agent", msg)

    def follow_up(self, msg: Any) -> None:
        """Queue a follow-up message (see ``YiemAgent.follow_up``)."""
        self._call("follow_up", msg)

    def resume(self, approvals: Mapping[str, Decision] | None = None) -> None:
        """Run on from the history (see ``YiemAgent.resume``); while calls wait for approval
        (``pending_approvals``), ``approvals`` maps each one's id to ``Approve()``,
        ``Deny(reason)`` or ``Edit(arguments)`` and the paused batch runs with them (its run
        puts one response out, for ``take_response``). Decisions that cannot be used raise the
        agent's ``ApprovalError`` here, and nothing runs."""
        self._call("resume", None if approvals is None else dict(approvals))

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        """The calls waiting for a decision, in call order (empty when none waits), each with
        the arguments that will execute if it is approved (see ``YiemAgent.pending_approvals``)."""
        pending: list[PendingApproval] = self._call("pending_approvals")
        return pending

    def take_response(self, timeout: float | None = None) -> AssistantMessage:
        """The next run's response (see ``YiemAgent.take_response``); after ``shutdown``, the
        responses nobody took, then ``AgentClosedError``."""
        with self._lock:
            if self._leftovers:
                return self._leftovers.pop(0)
        if self._killed:
            raise AgentClosedError("the remote agent was shut down and its responses are all taken")
        try:
            response: AssistantMessage = self._wait(
                self.actor.take_response.remote(timeout), _grace(timeout), "take_response()"
            )
        except ResponseTimeout:
            raise ResponseTimeout(f"no response within {timeout} s") from None
        except AgentClosedError:
            # A shutdown took the responses while this call was on its way: they come back here.
            if self._collecting:
                self._collected.wait(GRACE_S)
            with self._lock:
                if self._leftovers:
                    return self._leftovers.pop(0)
            raise
        return response

    def prompt(self, text: Any, timeout: float | None = None) -> AssistantMessage:
        """Send ``text`` and return the response of the run that answered it (see
        ``YiemAgent.prompt``). A ``shutdown`` meanwhile lets that run finish (or aborts it) and
        this still returns its response; when the message was still queued, shutdown hands it
        back and this raises the local agent's ``RuntimeError`` (it never ran)."""
        response: AssistantMessage = self._call("prompt", text, timeout, timeout=_grace(timeout))
        return response

    def abort(self) -> None:
        """Abort the active run (see ``YiemAgent.abort``); never raises for a dead actor."""
        if self._killed:
            return
        try:
            self._call("abort")
        except AgentActorDiedError:
            logger.info("abort(): the agent's actor is already gone")

    def wait_for_idle(self, timeout: float | None = None) -> bool:
        """Whether the agent became idle within ``timeout`` seconds."""
        idle: bool = self._call("wait_for_idle", timeout, timeout=_grace(timeout))
        return idle

    @property
    def is_running(self) -> bool:
        """Whether a run is active."""
        running: bool = self._call("is_running")
        return running

    @property
    def messages(self) -> list[AgentMessage]:
        """A copy of the history."""
        messages: list[AgentMessage] = self._call("messages")
        return messages

    def session_data(self) -> SessionData:
        """The session as plain data (during a run, as it was before the run began)."""
        data: SessionData = self._call("session_data")
        return data

    def save(self, target: str | os.PathLike[str] | SessionStore) -> None:
        """Save the session: to a file on the actor's node (use a shared file system to read it
        from elsewhere) or to a session store."""
        self._call("save", target)

    # -- events ------------------------------------------------------------------------------

    def subscribe(self, listener: Emit) -> Callable[[], None]:
        """Add a listener that receives the agent's events (from the next one on), in order,
        on a thread of this process; return the function that removes it."""
        with self._lock:
            if self._pump is None:
                start: int = self._call("stream_events")
                actor = self.actor

                def poll(after: int, wait: float) -> tuple[list[Numbered], int, bool]:
                    result: tuple[list[Numbered], int, bool] = ray.get(
                        actor.poll_events.remote(max(after, start), wait)
                    )
                    return result

                self._pump = EventPump(poll, self.session_id[:8])
                # A handle dropped without shutdown() must not leave its pump polling forever
                # (the pump holds the actor, which would then never end), nor wait for a
                # listener that is busy: the dropping thread, or the interpreter's exit, would
                # wait with it.
                weakref.finalize(self, self._pump.stop, 0)
            return self._pump.subscribe(listener)

    def flush_events(self, timeout: float | None = 60.0) -> None:
        """Wait until the listeners here and the shared sink have every event emitted so far;
        ``ResponseTimeout`` when that takes longer than ``timeout`` seconds."""
        last: int = self._call("flush_events", timeout, timeout=_grace(timeout))
        pump = self._pump
        if pump is not None and not pump.wait_for(last, timeout):
            if pump.error is not None:
                raise AgentActorDiedError(f"the event stream ended: {pump.error}") from pump.error
            raise ResponseTimeout(f"the listeners did not get the events within {timeout} s")

    # -- the end -----------------------------------------------------------------------------

    def shutdown(
        self, wait: bool = True, abort: bool = False, timeout: float | None = None
    ) -> list[UserMessage]:
        """Stop the agent and return the messages it never processed (see
        ``YiemAgent.shutdown``; a ``prompt`` whose message is among them raises the local
        agent's ``RuntimeError``). With ``wait``, once the agent has finished, the calls in
        flight get their answers (a ``prompt`` its response), the responses nobody took are
        kept here for ``take_response``, every event reaches the listeners (no listener call
        happens after this returns), and the actor is ended. Past ``timeout`` seconds in all it
        is ended anyway, with whatever it was still running, and events not yet delivered are
        dropped (a warning says so). From a listener of this agent ``wait=True`` raises
        ``RuntimeError``, as it would wait for itself. Without ``wait`` the actor lives on
        until this handle is dropped or ``kill()`` is called, so later responses can still be
        taken."""
        if self._killed:
            return []
        pump = self._pump
        if wait and pump is not None and pump.on_own_thread():
            raise RuntimeError(
                "shutdown(wait=True) from a listener of this agent would wait for "
                "that listener to return; use shutdown(wait=False) there"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        queued, finished = self._stop_actor(wait, abort, timeout)
        if wait:
            if finished:
                self._let_calls_return(deadline)
                self._drain_events(deadline, timeout)
            self.kill()
        return list(queued)

    def _stop_actor(self, wait: bool, abort: bool, timeout: float | None) -> tuple[list[UserMessage], bool]:
        """The actor's ``shutdown``: keep the responses nobody took; return the messages never
        processed and whether the agent has finished."""
        if wait:
            self._collecting = True
        try:
            queued, leftovers, finished = self._call(
                "shutdown", wait, abort, timeout, timeout=_grace(timeout)
            )
        except AgentActorDiedError:
            queued, leftovers, finished = [], [], False
        finally:
            if wait:
                self._collected.set()
        with self._lock:
            self._leftovers.extend(leftovers)
        return queued, bool(finished)

    def _let_calls_return(self, deadline: float | None) -> None:
        """Wait until the answers of the calls in flight have arrived (the finished agent gave
        them at once, but a reply still on its way would be lost with the actor)."""
        with self._in_flight_lock:
            refs = list(self._in_flight)
        if refs:
            limit = remaining(deadline, 1.0)
            ray.wait(
                refs,
                num_returns=len(refs),
                timeout=CALLS_END_S if limit is None else limit,
                fetch_local=False,
            )

    def _drain_events(self, deadline: float | None, timeout: float | None) -> None:
        """Wait until the pump has handed the listeners every event (the finished actor closed
        its buffer, so the pump then ends); past the deadline, stop it."""
        pump = self._pump
        if pump is not None and not pump.finish(remaining(deadline)):
            pump.stop(0)
            logger.warning(
                "shutdown(timeout=%s): the listeners had events %d and later still to get; those are dropped",
                timeout,
                pump.delivered + 1,
            )

    def kill(self) -> None:
        """End the actor now, whatever it is doing (its unsaved state is lost); no listener
        call starts after this (one in progress may still finish)."""
        self._killed = True
        if self._pump is not None:
            self._pump.stop(0)
        ray.kill(self.actor)

    def __enter__(self) -> RemoteAgent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


# Ray's stubs do not list concurrency_groups among remote()'s keywords, though Ray takes it.
_HostActor: Any = ray.remote(concurrency_groups={"control": CONTROL_THREADS})(AgentHost)  # type: ignore[call-overload]

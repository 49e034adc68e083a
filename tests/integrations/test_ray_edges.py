"""The edges of ``yiemagent.integrations.ray`` at shutdown, on a real local Ray cluster: a prompt in
flight when its agent is shut down, a handle dropped while its listener is busy, a slow
listener at shutdown, a stalled event sink, and a pool whose actors hang in shutdown.

The module starts its own cluster as ``test_ray_cluster`` does. Interleavings are forced with
the latch actor and threading events; the one duration a test checks is bounded with a margin
of several times what it bounds, and the one stall a test holds for a while says why.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import TESTS
from tiers import absent

ray = pytest.importorskip("ray", reason=absent("ray"))

import ray_helpers as helpers  # noqa: E402

from yiemagent import AgentEndEvent, AgentEvent, AgentStartEvent, AssistantMessage  # noqa: E402
from yiemagent.errors import AgentClosedError  # noqa: E402
from yiemagent.integrations.ray import AgentPool, DirectoryStore, EventSink, RemoteAgent  # noqa: E402
from yiemagent.integrations.ray import _calls as calls  # noqa: E402
from yiemagent.integrations.ray._agent_host import AgentHost  # noqa: E402

pytestmark = pytest.mark.timeout(600)

TESTS = str(TESTS)
W = 120.0  # seconds any test waits for a response, a latch or a flush before failing


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    with helpers.local_cluster(TESTS):
        yield


def kinds(events: list[AgentEvent]) -> list[type]:
    return [type(e) for e in events]


# -- (a) shutdown while a prompt is in flight --------------------------------------------------


def _prompt_then_shutdown(
    prompt: Any, shutdown: Any, key: str, callers: concurrent.futures.Executor
) -> AssistantMessage:
    """Start ``prompt`` with a run that waits in the gate tool, and once the tool has started
    call ``shutdown`` (which aborts the run); return the prompt's answer. The abort ends the
    run from inside the shutdown, so the run's response is always delivered while the shutdown
    is under way: the interleaving in which the old shutdown took the answer for itself."""
    answer = callers.submit(prompt, f'call gate {{"key": "{key}"}}', W)
    assert helpers.latch_wait(f"started:{key}", W)
    shutdown()
    result: AssistantMessage = answer.result(W)
    return result


def _waiting_on_the_actor(thread: threading.Thread) -> bool:
    """Whether ``thread`` is inside ``calls.get``, where a handle waits for an actor's answer:
    its call has been sent (the call is made before ``get`` is entered)."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code is calls.get.__code__:
            return True
        frame = frame.f_back
    return False


def _host_tries(tries: int, callers: concurrent.futures.Executor) -> None:
    """The actor's own side, in this process, where a try costs little. Which thread takes the
    response first (the prompt's or shutdown's) was up to the scheduler, and the old shutdown
    won within the first few tries: so many tries catch it every time."""
    for n in range(tries):
        host = AgentHost(helpers.scripted_settings())
        kept: list[AssistantMessage] = []

        def shutdown(host: AgentHost = host, kept: list[AssistantMessage] = kept) -> None:
            queued, leftovers, finished = host.shutdown(True, True, W)
            assert queued == [] and finished
            kept.extend(leftovers)

        response = _prompt_then_shutdown(host.prompt, shutdown, f"host-{n}", callers)
        assert response.stop_reason == "aborted", n  # its own run's answer
        assert kept == [], n  # and shutdown did not keep it as a response nobody took


def _remote_tries(agents: int, callers: concurrent.futures.Executor) -> None:
    """The same through handles, end to end: the actor's answer to the prompt must also reach
    this process before the handle ends the actor."""
    handles = list(callers.map(lambda _: RemoteAgent.start(helpers.scripted_settings()), range(agents)))

    def one(n: int) -> str:
        agent = handles[n]
        response = _prompt_then_shutdown(
            agent.prompt, lambda: agent.shutdown(abort=True, timeout=W), f"remote-{n}", callers
        )
        with pytest.raises(AgentClosedError):
            agent.take_response(0)  # nothing was kept as a response nobody took
        return response.stop_reason

    assert list(callers.map(one, range(agents))) == ["aborted"] * agents


def _take_response_on_its_way() -> None:
    """A take_response sent while the actor's one thread for waiting calls is held: when it
    reaches the agent only after shutdown has collected the run's response, that response must
    come back to it rather than stay in the handle unseen."""
    agent = RemoteAgent.start(helpers.scripted_settings(), max_concurrency=1)
    agent.run_agent('call gate {"key": "on-its-way"}')
    assert helpers.latch_wait("started:on-its-way", W)
    agent.actor.wait_for_idle.remote(W)
    taken: list[Any] = []
    taker = threading.Thread(target=lambda: taken.append(agent.take_response(W)))
    taker.start()
    pause = threading.Event()  # never set: its wait is a pause between looks
    while taker.is_alive() and not _waiting_on_the_actor(taker):
        pause.wait(0.01)
    assert agent.shutdown(abort=True, timeout=W) == []
    taker.join(W)
    assert [r.stop_reason for r in taken] == ["aborted"]
    with pytest.raises(AgentClosedError):
        agent.take_response(0)


def test_shutdown_during_a_prompt_leaves_the_prompt_its_answer() -> None:
    with concurrent.futures.ThreadPoolExecutor(16) as callers:
        _host_tries(150, callers)
        _remote_tries(8, callers)
    _take_response_on_its_way()


# -- (b) a handle dropped while its listener is busy -------------------------------------------

DROP_SCRIPT = textwrap.dedent("""
    import gc, os, sys, threading
    import ray
    import ray_helpers as helpers
    from yiemagent.integrations.ray import RemoteAgent

    address, namespace, path = sys.argv[1:4]
    ray.init(address=address, namespace=namespace, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    never = threading.Event()  # the listeners block on it until the process ends

    def stuck(busy):
        def listener(event):
            busy.set()
            never.wait()
        return listener

    busy = [threading.Event(), threading.Event()]
    dropped = RemoteAgent.start(helpers.scripted_settings(), listener=stuck(busy[0]))
    kept = RemoteAgent.start(helpers.scripted_settings(), listener=stuck(busy[1]))
    for agent in (dropped, kept):
        agent.prompt("hello", 120)
    assert all(b.wait(120) for b in busy)
    pid = dropped.pid
    del dropped, agent
    gc.collect()
    print("dropped", flush=True)

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    # Its actor ends too: the stopped pump let go of the handle it polled with.
    pause = threading.Event()
    for _ in range(1200):
        if not alive(pid):
            print("ended", flush=True)
            break
        pause.wait(0.1)
    # `kept` is still referenced when the script ends: the exit must not wait for it either.
""")


def test_a_script_that_drops_a_remote_agent_with_a_busy_listener_exits(tmp_path: Path) -> None:
    script = tmp_path / "drop.py"
    script.write_text(DROP_SCRIPT, encoding="utf-8")
    context = ray.get_runtime_context()
    path = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(script), context.gcs_address, context.namespace, path],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["dropped", "ended"]


# -- (c) a slow listener at shutdown -------------------------------------------------------------

# How long the listener stays stalled while shutdown runs (unless shutdown returns first): longer
# than the old shutdown waited for the listeners before giving up (5 s) and ending the actor.
STALL_S = 25.0


def test_shutdown_gives_a_slow_listener_every_event_and_none_after_it_returns() -> None:
    source = f"slow-{uuid.uuid4().hex[:8]}"
    go, returned = threading.Event(), threading.Event()
    got: list[AgentEvent] = []
    late: list[AgentEvent] = []

    def slow(event: AgentEvent) -> None:
        go.wait(W)  # stalled until the test lets it go
        (late if returned.is_set() else got).append(event)

    sink = EventSink.start()  # the agent's events by another way, to compare with
    agent = RemoteAgent.start(helpers.scripted_settings(), session_id=source, listener=slow, event_sink=sink)
    try:
        agent.prompt("batch echo 300 {}", W)  # some 1,200 events

        def stop() -> None:
            agent.shutdown()
            returned.set()

        stopper = threading.Thread(target=stop)
        stopper.start()
        stopper.join(STALL_S)  # the stall: over early only if shutdown returns without the events
        go.set()
        stopper.join(W)
        assert returned.is_set()
        emitted = sink.events(source)
        assert len(emitted) > 1200 and kinds(emitted)[0] is AgentStartEvent
        assert kinds(got) == kinds(emitted) and isinstance(got[-1], AgentEndEvent)
        assert late == []
    finally:
        go.set()
        sink.shutdown()


# -- (d) a stalled event sink ----------------------------------------------------------------------


def test_a_stalled_sink_keeps_a_capped_queue_and_counts_what_it_dropped() -> None:
    from yiemagent.integrations.ray._forwarder import SINK_QUEUE_LIMIT

    source = f"stall-{uuid.uuid4().hex[:8]}"
    events: list[AgentEvent] = []
    agent = RemoteAgent.start(
        helpers.scripted_settings(),
        session_id=source,
        listener=events.append,
        event_sink="ray_helpers:stalling_sink",
    )
    path = Path(helpers.SINK_FOLDER) / f"{source}.jsonl"
    try:
        agent.prompt("hello", W)
        assert helpers.latch_wait(f"sink-stalled:{source}", W)
        # Some 12,000 events while the sink takes none: the run is not held up by the sink.
        answer = agent.prompt("batch echo 3000 {}", W)
        assert answer.stop_reason == "stop"
        helpers.latch_set(f"sink-go:{source}")
        agent.flush_events(W)
    finally:
        helpers.latch_set(f"sink-go:{source}")
        agent.shutdown(timeout=W)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    path.unlink()
    assert len(events) > SINK_QUEUE_LIMIT + 1000  # the agent emitted well past the cap
    markers = [n for n, r in enumerate(records) if "dropped" in r]
    assert len(markers) == 1  # one gap, right after the batch the sink stalled on
    gap = markers[0]
    marker, after = records[gap], records[gap + 1 :]
    assert marker["source"] == source and "event" not in marker
    assert len(after) <= SINK_QUEUE_LIMIT  # what waited while the sink stalled was capped
    assert gap + marker["dropped"] + len(after) == len(events)  # every event kept or counted
    # The oldest were dropped: what is left is the newest, ending with the run's end.
    assert [r["event"]["type"] for r in after] == [e.event_type for e in events[-len(after) :]]
    assert after[-1]["event"]["type"] == AgentEndEvent.event_type


# -- (e) a pool whose actors hang in shutdown -----------------------------------------------------


def test_pool_shutdown_closes_the_actors_at_once_within_its_timeout(tmp_path: Path) -> None:
    size, timeout = 4, 8.0
    pool = AgentPool(size, helpers.scripted_settings(), DirectoryStore(tmp_path), idle_timeout_s=None)
    sessions = [
        next(f"hang-{slot}-{n}" for n in range(1000) if pool.slot_of(f"hang-{slot}-{n}") == slot)
        for slot in range(size)
    ]
    with concurrent.futures.ThreadPoolExecutor(size) as callers:
        # A run per actor held in the gate tool: each actor's close waits for its run to end.
        runs = [callers.submit(pool.prompt, sid, f'call gate {{"key": "{sid}"}}', W) for sid in sessions]
        for sid in sessions:
            assert helpers.latch_wait(f"started:{sid}", W)
        began = time.monotonic()
        assert pool.shutdown(timeout=timeout) == 0
        took = time.monotonic() - began
        answers = [run.result(W) for run in runs]
    for sid in sessions:
        helpers.latch_set(f"release:{sid}")
    # One actor after another took size x timeout (32 s); at once it is about one timeout.
    assert took < 2.5 * timeout
    assert all(a.stop_reason == "error" and "actor died" in (a.error_message or "") for a in answers)

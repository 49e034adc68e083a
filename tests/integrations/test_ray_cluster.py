"""Agents, pools and tools on a real local Ray cluster (``yiemagent.integrations.ray``).

The module starts one cluster (2 CPUs, no dashboard) with this folder on the workers'
PYTHONPATH, so they import ``ray_helpers`` (the scripted model, tools and latch named in the
settings), and stops it after the last test. Every wait is on a latch, a response or a flush,
with generous timeouts: other work shares the machine, so Ray may be slow, and no test asserts
a duration.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import TESTS
from tiers import absent

ray = pytest.importorskip("ray", reason=absent("ray"))

import ray_helpers as helpers  # noqa: E402
from redis_helpers import running_redis  # noqa: E402

from yiemagent import (  # noqa: E402
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    AssistantMessage,
    MessageEndEvent,
    MessageStartEvent,
    TextContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    ToolResultMessage,
    TurnEndEvent,
    TurnStartEvent,
    YiemAgent,
)
from yiemagent.errors import AgentActorDiedError, AgentClosedError, ClusterError, SessionError  # noqa: E402
from yiemagent.integrations.ray import (  # noqa: E402
    AgentPool,
    AgentSettings,
    DirectoryStore,
    EventSink,
    RedisStore,
    RemoteAgent,
    ray_tool,
)
from yiemagent.tools._store import ToolStore, load_tools  # noqa: E402

# Ray's start-up, worker processes and a pool's actors are slow on a busy machine: a test may
# take longer than the suite's default limit without anything being wrong.
pytestmark = pytest.mark.timeout(300)

TESTS = str(TESTS)
W = 120.0  # seconds any test waits for a response, a latch or a flush before failing
RUN_EVENTS = [
    AgentStartEvent,
    MessageStartEvent,
    MessageEndEvent,  # the user message
    TurnStartEvent,
    MessageStartEvent,
    MessageEndEvent,  # the call
    ToolExecStartEvent,
    ToolExecEndEvent,
    MessageStartEvent,
    MessageEndEvent,
    TurnEndEvent,
    TurnStartEvent,
    MessageStartEvent,
    MessageEndEvent,
    TurnEndEvent,  # the answer
    AgentEndEvent,
]


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    """A local Ray cluster for this module, with the latch actor the helpers use."""
    with helpers.local_cluster(TESTS):
        yield


def settings(**changes: Any) -> AgentSettings:
    """The scripted model with the helper tools and hook; ``changes`` override."""
    result: AgentSettings = helpers.scripted_settings(**changes)
    return result


def text(message: AssistantMessage | ToolResultMessage | Any) -> str:
    """The text blocks of a message (or a tool result), joined."""
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def kinds(events: list[AgentEvent]) -> list[type]:
    return [type(e) for e in events]


def eventually(check: Any, timeout: float = W, every: float = 0.1) -> bool:
    """Whether ``check()`` became true within ``timeout`` seconds, asked every ``every``."""
    pause = threading.Event()  # never set: its wait is a pause that needs no sleep call
    for _ in range(int(timeout / every) + 1):
        if check():
            return True
        pause.wait(every)
    return False


# -- remote agents -------------------------------------------------------------------------------


def test_remote_agent_round_trip_with_tools_and_streamed_events(tmp_path: Path) -> None:
    events: list[AgentEvent] = []
    threads: set[str] = set()

    def listen(event: AgentEvent) -> None:
        threads.add(threading.current_thread().name)
        events.append(event)

    agent = RemoteAgent.start(settings(), session_id="remote-1", listener=listen)
    try:
        assert agent.session_id == "remote-1" and agent.pid != os.getpid()
        response = agent.prompt('call echo {"text": "hi"}', timeout=W)
        assert text(response) == "done: echo: hi"
        agent.flush_events(W)
        assert kinds(events) == RUN_EVENTS  # in order, as a local listener sees them
        end = next(e for e in events if isinstance(e, ToolExecEndEvent))
        assert end.tool_name == "echo" and text(end.result) == "echo: hi" and not end.is_error
        assert threads and threading.current_thread().name not in threads

        # The channels: run_agent / follow_up / take_response, and the hook from its name.
        agent.run_agent("plain")
        assert text(agent.take_response(W)) == "#2 plain"
        agent.follow_up('call echo {"forbidden": true}')
        blocked = agent.take_response(W)
        assert "forbidden by the test hook" in text(blocked)
        assert len(agent.messages) == 4 + 2 + 4 and not agent.is_running

        # Saving on the actor's node (a file) and to a store, and taking the session up again.
        store = DirectoryStore(tmp_path / "store")
        agent.save(store)
        agent.save(str(tmp_path / "remote-1.json"))
        assert agent.session_data().messages == agent.messages

        # A tool of the remote agent that runs as a Ray task of its own, started by the actor.
        assert text(agent.prompt('call echo_task {"text": "far"}', timeout=W)) == "done: echo: far"
    finally:
        assert agent.shutdown(timeout=W) == []
    with pytest.raises(AgentClosedError):
        agent.take_response(0)

    for source in (store, str(tmp_path / "remote-1.json")):
        again = RemoteAgent.load(source, settings(), session_id="remote-1")
        try:
            assert again.session_id == "remote-1"
            assert text(again.prompt("more", timeout=W)) == "#4 more"
        finally:
            again.shutdown(timeout=W)


def test_remote_agent_abort_reaches_the_tool_and_resume_runs_on() -> None:
    events: list[AgentEvent] = []
    agent = RemoteAgent.start(settings(), listener=events.append)
    try:
        agent.run_agent('call gate {"key": "abort-1"}')
        assert helpers.latch_wait("started:abort-1", W)
        agent.abort()
        response = agent.take_response(W)
        assert response.stop_reason == "aborted"
        assert helpers.latch_wait("aborted:abort-1", W)  # the tool saw its signal
        agent.flush_events(W)
        assert isinstance(events[-1], AgentEndEvent) and events[-1].response is not None
        assert events[-1].response.stop_reason == "aborted"
        assert any(isinstance(e, ToolExecEndEvent) for e in events)

        agent.resume()  # the history ends with the aborted call's result: the model answers it
        assert text(agent.take_response(W)).startswith("done: gate abort-1")
        with pytest.raises(ValueError, match="resume"):
            agent.resume()  # nothing left to resume: the local agent's error, raised here
    finally:
        agent.shutdown(timeout=W)


def test_shutdown_hands_back_queued_messages_and_untaken_responses() -> None:
    agent = RemoteAgent.start(settings())
    agent.run_agent('call gate {"key": "queue-1"}')
    assert helpers.latch_wait("started:queue-1", W)
    agent.follow_up("later")  # queued behind the gated run
    assert [text(m) for m in agent.shutdown(wait=False)] == ["later"]  # the actor lives on
    with pytest.raises(AgentClosedError):
        agent.run_agent("too late")
    helpers.latch_set("release:queue-1")
    assert agent.shutdown(timeout=W) == []  # now the run is over and the actor ended
    assert text(agent.take_response(0)) == "done: gate queue-1: released"  # kept by the handle
    with pytest.raises(AgentClosedError):
        agent.take_response(0)


def test_events_go_to_a_shared_sink_in_order() -> None:
    sink = EventSink.start()
    agents = [RemoteAgent.start(settings(), session_id=f"sink-{n}", event_sink=sink) for n in range(2)]
    try:
        for agent in agents:
            agent.prompt('call echo {"text": "x"}', timeout=W)
            agent.flush_events(W)
        records = sink.records()
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        for n in range(2):
            assert kinds(sink.events(f"sink-{n}")) == RUN_EVENTS
    finally:
        for agent in agents:
            agent.shutdown(timeout=W)
        sink.shutdown()


def test_events_go_to_a_sink_function_named_in_the_settings() -> None:
    source = f"file-sink-{uuid.uuid4().hex[:8]}"
    agent = RemoteAgent.start(settings(), session_id=source, event_sink="ray_helpers:file_sink")
    try:
        agent.prompt('call echo {"text": "x"}', timeout=W)
        agent.flush_events(W)
    finally:
        agent.shutdown(timeout=W)
    path = Path(helpers.SINK_FOLDER) / f"{source}.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    path.unlink()
    with contextlib.suppress(OSError):  # another run's file may still be there
        path.parent.rmdir()
    assert [r["event"]["type"] for r in records] == [k.event_type for k in RUN_EVENTS]
    assert all(r["source"] == source for r in records)


def test_an_actor_that_cannot_build_its_agent_says_why(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="no_such_module"):
        RemoteAgent.start(settings(llm_factory="no_such_module:make"))
    with pytest.raises(ClusterError, match="no_such_module"):
        AgentPool(1, settings(before_tool_call="no_such_module:hook"), DirectoryStore(tmp_path))
    with pytest.raises(SessionError, match="no session 'absent'"):
        RemoteAgent.load(DirectoryStore(tmp_path), settings(), session_id="absent")


def test_settings_are_checked_where_they_are_made() -> None:
    with pytest.raises(ValueError, match="model_spec"):
        AgentSettings()
    with pytest.raises(ValueError, match="importable name"):
        AgentSettings(model_spec="m", before_tool_call="not a name")
    with pytest.raises(ValueError, match="agent_options"):
        AgentSettings(model_spec="m", agent_options={"llm_call": print})
    with pytest.raises(TypeError, match="picklable"):
        AgentSettings(model_spec="m", llm_options={"lock": threading.Lock()})


def test_a_killed_remote_agent_raises_instead_of_hanging() -> None:
    agent = RemoteAgent.start(settings())
    agent.run_agent('call gate {"key": "kill-remote"}')
    assert helpers.latch_wait("started:kill-remote", W)
    ray.kill(agent.actor)
    with pytest.raises(AgentActorDiedError, match="actor died"):
        agent.take_response(W)
    agent.kill()


# -- pools -----------------------------------------------------------------------------------------


def test_a_pool_of_4_actors_serves_200_sessions_with_saves_and_reloads(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    sink = EventSink.start()
    ids = [f"user-{n:03d}" for n in range(200)]
    with (
        AgentPool(
            4, settings(), store, max_sessions_per_actor=10, idle_timeout_s=None, event_sink=sink
        ) as pool,
        concurrent.futures.ThreadPoolExecutor(16) as callers,
    ):
        first = dict(zip(ids, callers.map(lambda sid: pool.prompt(sid, f"hello {sid}", W), ids), strict=True))
        # By now each actor holds at most 10 of its ~50 sessions: most second prompts reload.
        second = dict(zip(ids, callers.map(lambda sid: pool.prompt(sid, "again", W), ids), strict=True))
        for sid in ids:
            assert text(first[sid]) == f"#1 hello {sid}"
            assert text(second[sid]) == "#2 again"  # the history came back from the store
        stats = pool.stats()
        assert len({s["pid"] for s in stats}) == 4
        assert all(s["runs"] > 0 and s["sessions"] <= 10 for s in stats)  # spread, and capped
        assert sum(s["runs"] for s in stats) == 400
        assert sum(s["creates"] for s in stats) == 200
        assert sum(s["loads"] for s in stats) >= 100 and sum(s["evictions"] for s in stats) >= 100
        assert sum(s["saves"] for s in stats) == 400 and sum(s["save_errors"] for s in stats) == 0
        pool.flush_events(W)
        assert kinds(sink.events("user-007"))[:1] == [AgentStartEvent]
        assert len(sink.events("user-007")) == 2 * 8  # two plain runs of 8 events each
    sink.shutdown()
    assert store.session_ids() == ids
    for sid in ids:
        data = store.load(sid)
        assert data is not None and data.system_prompt == "You are a test."
        assert [m.role for m in data.messages] == ["user", "assistant"] * 2


def test_a_pool_actor_killed_mid_run_is_replaced_and_the_session_goes_on(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    with AgentPool(2, settings(), store, idle_timeout_s=None) as pool:
        assert text(pool.prompt("victim", "first", W)) == "#1 first"
        neighbour = next(f"n{n}" for n in range(100) if pool.slot_of(f"n{n}") == pool.slot_of("victim"))
        assert text(pool.prompt(neighbour, "hi", W)) == "#1 hi"
        doomed = pool.actor_for("victim")
        with concurrent.futures.ThreadPoolExecutor(1) as caller:
            in_flight = caller.submit(pool.prompt, "victim", 'call gate {"key": "kill-pool"}', W)
            assert helpers.latch_wait("started:kill-pool", W)
            ray.kill(doomed)
            lost = in_flight.result(W)  # an answer, not a hang
        assert lost.stop_reason == "error" and "actor died" in (lost.error_message or "")
        assert pool.restarts == 1 and pool.actor_for("victim") is not doomed
        saved = store.load("victim")
        assert saved is not None and [text(m) for m in saved.messages] == ["first", "#1 first"]
        # The new actor takes the sessions up from their last save; the lost run is not in it.
        assert text(pool.prompt("victim", "after", W)) == "#2 after"
        assert text(pool.prompt(neighbour, "still here", W)) == "#2 still here"


def test_a_pool_on_a_redis_store() -> None:
    with running_redis() as url:
        store = RedisStore(url, prefix="pool:")
        with AgentPool(2, settings(), store, idle_timeout_s=None) as pool:
            for sid in ("a", "b", "c"):
                assert text(pool.prompt(sid, "one", W)) == "#1 one"
            assert pool.evict("a") is True and pool.evict("a") is False
            assert text(pool.prompt("a", "two", W)) == "#2 two"  # reloaded from Redis
            assert sum(s["loads"] for s in pool.stats()) == 1
        assert store.session_ids() == ["a", "b", "c"]
        data = store.load("a")
        assert data is not None and len(data.messages) == 4


def test_idle_sessions_are_evicted_to_the_store(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    with AgentPool(1, settings(), store, idle_timeout_s=0.2) as pool:
        pool.prompt("idle", "one", W)
        actor = pool.actor_for("idle")
        # The reaper runs on its own clock and tells nobody: watch for its effect.
        assert eventually(lambda: ray.get(actor.session_ids.remote()) == [])
        assert text(pool.prompt("idle", "two", W)) == "#2 two"
        assert pool.stats()[0]["loads"] == 1


# -- tools on the cluster ------------------------------------------------------------------------


def local_agent(*tools: Any, events: list[AgentEvent], **options: Any) -> YiemAgent:
    return YiemAgent(
        llm_call=helpers.make_llm(None), tools=list(tools), agent_event_sink=events.append, **options
    )


def test_a_ray_tool_batch_runs_in_parallel_and_streams_partial_results() -> None:
    events: list[AgentEvent] = []
    meet = ray_tool(helpers.meet_tool(), num_cpus=0.5)  # 4 at once fit on the 2 CPUs
    with local_agent(meet, events=events, tool_execution="parallel") as agent:
        response = agent.prompt('batch meet 4 {"key": "barrier-1", "count": 4}', W)
    # Each call waits at a barrier of 4: the batch can only finish if all 4 ran at once.
    assert text(response) == " | ".join(["met 4"] * 4).join(["done: ", ""])
    ends = [e for e in events if isinstance(e, ToolExecEndEvent)]
    assert len(ends) == 4 and not any(e.is_error for e in ends)
    pids = {e.result.details["pid"] for e in ends}
    assert os.getpid() not in pids and len(pids) == 4  # four tasks in four worker processes
    updates = [e for e in events if isinstance(e, ToolExecUpdateEvent)]
    assert sorted(text(u.partial_result) for u in updates) == [f"call {i} arrived" for i in range(4)]


def test_aborting_a_ray_tool_cancels_its_task() -> None:
    events: list[AgentEvent] = []
    with local_agent(ray_tool(helpers.gate_tool(), num_cpus=0), events=events) as agent:
        agent.run_agent('call gate {"key": "cancel-1"}')
        assert helpers.latch_wait("started:cancel-1", W)
        agent.abort()
        response = agent.take_response(W)
    assert response.stop_reason == "aborted"
    assert helpers.latch_wait("aborted:cancel-1", W)  # the task's tool saw its signal aborted
    end = next(e for e in events if isinstance(e, ToolExecEndEvent))
    assert end.is_error


def test_a_failing_or_dying_ray_tool_gives_an_error_result() -> None:
    events: list[AgentEvent] = []
    tools = [ray_tool(helpers.boom_tool(), num_cpus=0), ray_tool(helpers.crash_tool(), num_cpus=0)]
    with local_agent(*tools, events=events) as agent:
        failed = agent.prompt("call boom {}", W)
        crashed = agent.prompt("call crash {}", W)
    assert "ValueError: boom" in text(failed)
    assert "RayToolError" in text(crashed) and "did not finish" in text(crashed)
    assert [e.is_error for e in events if isinstance(e, ToolExecEndEvent)] == [True, True]


def test_a_tool_file_travels_to_the_task(tmp_path: Path) -> None:
    (tmp_path / "shout.py").write_text(
        "import os\n\n"
        "def execute_tool(tool_call_id, args, signal, on_partial_result):\n"
        "    return AgentToolResult([TextContent(args['text'].upper() + ' from ' + str(os.getpid()))])\n\n"
        "def get_tool():\n"
        "    return AgentTool(name='shout', label='Shout', description='Shouts',\n"
        "                     input_schema={'type': 'object'}, execute=execute_tool)\n",
        encoding="utf-8",
    )
    store = ToolStore("ray-files")
    load_tools(store, tmp_path)
    events: list[AgentEvent] = []
    with local_agent(ray_tool(store.tools["shout"], num_cpus=0), events=events) as agent:
        answer = text(agent.prompt('call shout {"text": "hey"}', W))
    assert answer.startswith("done: HEY from ") and answer != f"done: HEY from {os.getpid()}"


def test_a_session_that_cannot_be_loaded_gives_an_error_response_and_no_preload(tmp_path: Path) -> None:
    # The host itself, in this process: a session file that is not JSON cannot be loaded.
    from yiemagent.integrations.ray._session_host import SessionHost

    store = DirectoryStore(str(tmp_path))
    Path(store.path_of("broken")).write_text("{not json", encoding="utf-8")
    host = SessionHost(settings(), store, idle_timeout_s=None)
    try:
        assert host.preload("broken") is False
        response = host.prompt("broken", "hello", 30)
        assert response.stop_reason == "error"
        assert "session 'broken' could not be loaded" in (response.error_message or "")
        assert host.preload("fresh") is True  # a new session id is created, not an error
        assert host.prompt("fresh", "hello", 30).stop_reason == "stop"
    finally:
        host.close()

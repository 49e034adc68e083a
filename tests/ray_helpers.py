"""Helpers the Ray tests name by importable name, so Ray workers import them too (the tests
folder is on the workers' PYTHONPATH): a scripted model, tools, a hook and a latch actor.

The scripted model answers from the request alone, so one model may serve many sessions:

- ``call NAME {json}``: one call to tool ``NAME`` with those arguments;
- ``batch NAME K {json}``: ``K`` calls to ``NAME`` in one reply, each with ``"i"`` added;
- after tool results: ``done: <the results' texts, joined by " | ">``;
- anything else: ``#<number of user messages so far> <text>``, so a test can tell whether a
  session was taken up with its history.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import ray

from yiemagent import AgentTool, AgentToolCall, AgentToolResult, AssistantMessage, TextContent

LATCH_NAME = "yiemagent-test-latch"
WAIT_S = 120.0  # the longest any helper waits for a latch before giving up


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def scripted_reply(request: dict[str, Any]) -> AssistantMessage:
    """The scripted model's answer to ``request`` (see the module docstring)."""
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        results = []
        for message in reversed(messages):
            if message["role"] != "tool":
                break
            results.append(_text(message))
        return AssistantMessage([TextContent("done: " + " | ".join(reversed(results)))], model="scripted")
    text = _text(messages[-1])
    words = text.split(" ", 3)
    if words[0] == "call" and len(words) >= 2:
        args = json.loads(text.split(" ", 2)[2]) if len(words) > 2 else {}
        return AssistantMessage(
            [AgentToolCall(f"c{uuid.uuid4().hex[:12]}", words[1], args)],
            model="scripted",
            stop_reason="toolUse",
        )
    if words[0] == "batch" and len(words) >= 3:
        base = json.loads(words[3]) if len(words) > 3 else {}
        calls = [
            AgentToolCall(f"c{uuid.uuid4().hex[:12]}", words[1], {**base, "i": i})
            for i in range(int(words[2]))
        ]
        return AssistantMessage(calls, model="scripted", stop_reason="toolUse")
    users = sum(1 for m in messages if m["role"] == "user")
    return AssistantMessage([TextContent(f"#{users} {text}")], model="scripted")


def make_llm(spec: str | None, latency_s: float = 0.0) -> Any:
    """The ``llm_factory`` of the tests: the scripted model, answering after ``latency_s``."""

    def llm_call(request: dict[str, Any]) -> AssistantMessage:
        if latency_s:
            time.sleep(latency_s)  # the simulated model's latency, not a synchronisation
        return scripted_reply(request)

    return llm_call


# -- a latch actor: named events and barriers shared by the test and its actors and tasks ----


@ray.remote(num_cpus=0, max_concurrency=64)
class Latch:
    """Named events (``set``/``wait``) and barriers (``arrive``), waited for on its threads."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._set: set[str] = set()
        self._arrived: dict[str, int] = {}

    def set(self, name: str) -> None:
        with self._cond:
            self._set.add(name)
            self._cond.notify_all()

    def is_set(self, name: str) -> bool:
        with self._cond:
            return name in self._set

    def wait(self, name: str, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: name in self._set, timeout)

    def arrive(self, name: str, count: int, timeout: float) -> int:
        """Wait until ``count`` callers have arrived at barrier ``name``; return how many had."""
        with self._cond:
            self._arrived[name] = self._arrived.get(name, 0) + 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._arrived[name] >= count, timeout)
            return self._arrived[name]


@contextlib.contextmanager
def local_cluster(tests_folder: str) -> Iterator[None]:
    """A local Ray cluster (2 CPUs, no dashboard) whose workers have ``tests_folder`` on their
    PYTHONPATH (so they import this module), with the latch actor; stopped on exit."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    path = os.pathsep.join(p for p in (tests_folder, os.environ.get("PYTHONPATH")) if p)
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=128 * 1024 * 1024,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    try:
        handle = Latch.options(name=LATCH_NAME).remote()
        ray.get(handle.is_set.remote("ready"), timeout=WAIT_S)
        yield
    finally:
        ray.shutdown()


def latch() -> Any:
    """The test's latch actor, from wherever this runs on the cluster."""
    return ray.get_actor(LATCH_NAME)


def latch_set(name: str) -> None:
    ray.get(latch().set.remote(name))


def latch_wait(name: str, timeout: float = WAIT_S) -> bool:
    return bool(ray.get(latch().wait.remote(name, timeout)))


# -- tools -----------------------------------------------------------------------------------

OBJECT = {"type": "object"}


def _echo(tool_call_id: str, args: dict[str, Any], signal: Any, on_partial: Any) -> AgentToolResult:
    return AgentToolResult([TextContent(f"echo: {args.get('text', '')}")])


def echo_tool() -> AgentTool:
    """``echo``: returns ``echo: <text>``."""
    return AgentTool("echo", "Echo", "Echoes its text", OBJECT, _echo)


def _gate(tool_call_id: str, args: dict[str, Any], signal: Any, on_partial: Any) -> AgentToolResult:
    """Sets ``started:<key>``, then waits for ``release:<key>`` or an abort of its signal; on
    abort it sets ``aborted:<key>`` (so a test sees the abort reached the tool)."""
    key = args["key"]
    latch_set(f"started:{key}")
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if signal is not None and signal.aborted:
            latch_set(f"aborted:{key}")
            return AgentToolResult([TextContent(f"gate {key}: aborted")])
        if latch_wait(f"release:{key}", 0.2):
            return AgentToolResult([TextContent(f"gate {key}: released")])
    raise TimeoutError(f"gate {key} was never released")


def gate_tool() -> AgentTool:
    """``gate``: waits on the latch (see ``_gate``)."""
    return AgentTool("gate", "Gate", "Waits until released", OBJECT, _gate)


def _meet(tool_call_id: str, args: dict[str, Any], signal: Any, on_partial: Any) -> AgentToolResult:
    """Reports a partial result, then waits at barrier ``<key>`` for ``count`` calls: it can only
    pass when that many calls run at the same time."""
    on_partial(AgentToolResult([TextContent(f"call {args['i']} arrived")]))
    arrived = ray.get(latch().arrive.remote(args["key"], args["count"], WAIT_S))
    return AgentToolResult([TextContent(f"met {arrived}")], details={"pid": os.getpid(), "i": args["i"]})


def meet_tool() -> AgentTool:
    """``meet``: a barrier of parallel calls (see ``_meet``)."""
    return AgentTool("meet", "Meet", "Waits for the others", OBJECT, _meet, parallel_tool_execute=True)


def _boom(tool_call_id: str, args: dict[str, Any], signal: Any, on_partial: Any) -> AgentToolResult:
    raise ValueError("boom")


def boom_tool() -> AgentTool:
    """``boom``: raises ``ValueError("boom")``."""
    return AgentTool("boom", "Boom", "Fails", OBJECT, _boom)


def _crash(tool_call_id: str, args: dict[str, Any], signal: Any, on_partial: Any) -> AgentToolResult:
    os._exit(1)  # the worker process dies, as if its node went down


def crash_tool() -> AgentTool:
    """``crash``: kills the process it runs in."""
    return AgentTool("crash", "Crash", "Kills its worker", OBJECT, _crash)


def all_tools() -> list[AgentTool]:
    """Every tool above, for ``tool_imports``, and ``echo_task``: ``echo`` run as a Ray task
    (from the actor that hosts the agent)."""
    from yiemagent.integrations.ray import ray_tool

    task = attrs.evolve(ray_tool(echo_tool(), num_cpus=0), name="echo_task")
    return [echo_tool(), gate_tool(), meet_tool(), boom_tool(), task]


SINK_FOLDER = os.path.join(tempfile.gettempdir(), "yiemagent-test-sink")


def file_sink(records: list[dict[str, Any]]) -> None:
    """An ``event_sink`` by name: appends each record as a JSON line to
    ``SINK_FOLDER/<source>.jsonl`` (on the agent's node, which is this machine in the tests)."""
    os.makedirs(SINK_FOLDER, exist_ok=True)
    for record in records:
        with open(os.path.join(SINK_FOLDER, f"{record['source']}.jsonl"), "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


def stalling_sink(records: list[dict[str, Any]]) -> None:
    """An ``event_sink`` by name that stalls: like ``file_sink``, but its first batch from a
    source sets ``sink-stalled:<source>`` and then waits for ``sink-go:<source>``."""
    file_sink(records)
    source = records[0]["source"]
    if not ray.get(latch().is_set.remote(f"sink-stalled:{source}")):
        latch_set(f"sink-stalled:{source}")
        latch_wait(f"sink-go:{source}")


def scripted_settings(**changes: Any) -> Any:
    """``AgentSettings`` of the scripted model with the tools and hook above; ``changes``
    override."""
    from yiemagent.integrations.ray import AgentSettings

    base: dict[str, Any] = {
        "model_spec": "scripted",
        "llm_factory": "ray_helpers:make_llm",
        "tool_imports": ("ray_helpers:all_tools",),
        "before_tool_call": "ray_helpers:block_forbidden",
        "system_prompt": "You are a test.",
    }
    return AgentSettings(**{**base, **changes})


def block_forbidden(ctx: Any, signal: Any) -> dict[str, Any] | None:
    """A ``before_tool_call`` hook: blocks a call whose arguments say ``"forbidden": true``."""
    if ctx.args.get("forbidden") is True:
        return {"block": True, "reason": "forbidden by the test hook"}
    return None

#!/usr/bin/env python3
"""Benchmarks of the agent loop's own cost (issue 6): turn overhead, parallel batches, history
growth, many agents in one process, tool loading, conversations through a pool of Ray actors
(issue 14; needs the ``ray`` extra, else it is reported unavailable), and the embedded local
model: tokens per second through ``LlamaCppClient`` (llama.cpp's own server, in-process) against
llama-cpp-python called directly where it is installed, the throughput of 1, 4 and 16 agents
asking one loaded model at once, and seconds per structured answer in the ``grammar`` mode.

Every scenario drives a real ``YiemAgent`` (worker thread, channels, default ``prepare_context``
and ``format_msg_for_llm``, events to a sink that keeps them) through its public API, with an
``llm_call`` that hands back replies prepared before the clock starts. Each figure is the median
of several runs after a warm-up, with min and max, next to its target. The script is a report:
it exits 0 when targets are missed (they are listed at the end), and 1 only when a scenario
itself failed.

    python scripts/bench.py                 # the table (well under a minute)
    python scripts/bench.py --json          # one JSON object on stdout
    python scripts/bench.py --quick --json  # tiny sizes, for the smoke test
    python scripts/bench.py --only turn_overhead --profile   # cProfile of the worker threads
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import cProfile
import dataclasses
import gc
import importlib
import importlib.util
import io
import json
import os
import platform
import pstats
import queue
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypedDict

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(REPO))

from yiemagent import (  # noqa: E402
    AgentMessage,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    ContextOptions,
    OutputOptions,
    TextContent,
    ToolOptions,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
)

SCENARIOS = (
    "import_time",
    "turn_overhead",
    "parallel_batch",
    "history_growth",
    "context_window",
    "many_agents",
    "tool_loading",
    "ray_pool",
    "local_model",
    "local_agents",
    "local_structured",
    "replay",
)
ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["n"],
}
RESPONSE_TIMEOUT_S = 60.0


class BenchError(RuntimeError):
    """A scenario could not measure what it should (a run ended badly, a check failed)."""


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Every size the scenarios use; ``QUICK`` shrinks them all for the smoke test."""

    runs: int = 7
    warmup: int = 1
    turns: int = 200
    batches: tuple[int, ...] = (8, 32)
    block_s: float = 0.2
    history: int = 2000
    history_turns: int = 20
    history_pairs: int = 21
    # Longer runs than history_growth's: the difference of two per-turn figures is small, and a
    # run's one-off costs (its first request) would weigh on 20 turns as if they were per turn.
    window_turns: int = 100
    window_tokens: int = 10_000_000
    trim_window_tokens: int = 2_000
    agents: int = 100
    prompts: int = 10
    latency_s: float = 0.02
    tool_files: int = 200
    pool_conversations: int = 1000
    pool_actors: int = 4
    pool_clients: int = 50
    pool_runs: int = 3
    pool_serial: int = 50
    local_tokens: int = 128


QUICK = Sizes(
    runs=2,
    warmup=1,
    turns=5,
    batches=(2, 3),
    block_s=0.01,
    history=40,
    history_turns=2,
    history_pairs=2,
    window_turns=2,
    window_tokens=10_000_000,
    trim_window_tokens=2_000,
    agents=3,
    prompts=2,
    latency_s=0.002,
    tool_files=4,
    pool_conversations=12,
    pool_actors=2,
    pool_clients=4,
    pool_runs=1,
    pool_serial=3,
    local_tokens=8,
)


@dataclasses.dataclass
class Figure:
    """One measured figure: its samples (one per run), unit and optional upper-bound target."""

    name: str
    label: str
    unit: str
    samples: list[float]
    target: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Median, min, max, run count, target and whether the median meets it (``met`` is None
        without a target; the statistics are None when nothing was measured)."""
        data = self.samples
        median = statistics.median(data) if data else None
        met = None if self.target is None or median is None else median <= self.target
        return {
            "label": self.label,
            "unit": self.unit,
            "median": median,
            "min": min(data) if data else None,
            "max": max(data) if data else None,
            "runs": len(data),
            "target": self.target,
            "met": met,
        }


@dataclasses.dataclass
class Scenario:
    """A scenario's outcome: status (``ok``, ``unavailable``, ``error``), parameters, figures."""

    name: str
    status: str = "ok"
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    figures: list[Figure] = dataclasses.field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: figures keyed by name, in measurement order."""
        return {
            "status": self.status,
            "params": self.params,
            "note": self.note,
            "figures": {f.name: f.to_dict() for f in self.figures},
        }


# -- fixtures: tools, prepared replies, histories ---------------------------------------------


def make_tool(name: str, block_s: float = 0.0, parallel: bool = False) -> AgentTool:
    """A tool that returns one prepared result, after sleeping ``block_s`` if it is positive."""
    result = AgentToolResult([TextContent("ok")])

    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_partial: Any) -> Any:
        if block_s > 0:
            time.sleep(block_s)
        return result

    return AgentTool(
        name, name, f"Benchmark tool {name}.", ARGS_SCHEMA, execute, parallel_tool_execute=parallel
    )


def tool_turns(
    turns: int, calls: int, tool: str, tag: str = "c", dict_form: bool = False
) -> list[AssistantMessage]:
    """``turns`` replies of ``calls`` tool calls each, then a final answer ``done``; with
    ``dict_form`` the calls are the spec's ``{"type": "tool_calls", "tool_calls": [...]}``
    block instead of typed ``AgentToolCall`` blocks."""
    replies = [
        AssistantMessage(
            [
                {
                    "type": "tool_calls",
                    "tool_calls": [
                        {"id": f"{tag}{t}-{c}", "name": tool, "arguments": {"n": t}} for c in range(calls)
                    ],
                }
            ]
            if dict_form
            else [AgentToolCall(f"{tag}{t}-{c}", tool, {"n": t}) for c in range(calls)],
            stop_reason="toolUse",
        )
        for t in range(turns)
    ]
    replies.append(AssistantMessage([TextContent("done")]))
    return replies


def make_history(size: int, tool: str) -> list[AgentMessage]:
    """A realistic history of ``size`` messages: user question, assistant tool call, tool
    result and assistant answer, repeated, with texts of a few hundred characters."""
    history: list[AgentMessage] = []
    filler = "lorem ipsum dolor sit amet " * 8
    for i in range(size):
        kind = i % 4
        if kind == 0:
            history.append(UserMessage([TextContent(f"Question {i}: {filler}")]))
        elif kind == 1:
            history.append(
                AssistantMessage(
                    [TextContent("Let me check."), AgentToolCall(f"h{i}", tool, {"n": i, "note": filler})],
                    stop_reason="toolUse",
                )
            )
        elif kind == 2:
            history.append(
                ToolResultMessage(f"h{i - 1}", tool, [TextContent(f"Result {i}: {filler}")], details={"n": i})
            )
        else:
            history.append(AssistantMessage([TextContent(f"Answer {i}: {filler}")]))
    return history


def scripted_agent(
    replies: Iterable[AssistantMessage],
    tools: Sequence[AgentTool],
    latency_s: float = 0.0,
    keywords: bool = False,
    sent: list[int] | None = None,
    **options: Any,
) -> YiemAgent:
    """A real ``YiemAgent`` whose ``llm_call`` returns the next prepared reply (after sleeping
    ``latency_s``, the simulated model), with a sink that appends every event to a list. With
    ``keywords`` the ``llm_call`` declares ``**kwargs``, so the loop passes it every keyword
    (``on_update``, ``signal``, ``session_id``), as a provider client gets them. With ``sent``
    the ``llm_call`` appends to it the number of messages each request holds."""
    replies_left = iter(replies)
    events: list[Any] = []

    def llm_call(request: dict[str, Any]) -> AssistantMessage:
        if latency_s > 0:
            time.sleep(latency_s)
        return next(replies_left)

    counts: list[int] = sent if sent is not None else []

    def llm_call_counting(request: Any) -> AssistantMessage:
        counts.append(len(request.messages))
        return next(replies_left)

    def llm_call_with_keywords(request: dict[str, Any], **kwargs: Any) -> AssistantMessage:
        return next(replies_left)

    tracer = options.pop("tracer", None)
    if sent is not None and (keywords or latency_s > 0):
        raise ValueError("scripted_agent: sent= counts with a plain llm_call only")
    call = llm_call_counting if sent is not None else llm_call_with_keywords if keywords else llm_call
    agent = YiemAgent(
        llm_call=call,
        tools=list(tools),
        agent_event_sink=events.append,
        **options,
    )
    if tracer is not None:  # tracing attaches from outside, as a listener
        from yiemagent.integrations import trace_agent

        trace_agent(agent, tracer)
    return agent


def check_answer(response: AssistantMessage, what: str) -> None:
    """Raise ``BenchError`` unless ``response`` is the scripted final answer (stop)."""
    if response.stop_reason != "stop":
        raise BenchError(
            f"{what}: the run ended with stop_reason={response.stop_reason!r} ({response.error_message})"
        )


def timed_prompt(
    agent: YiemAgent, text: str, what: str, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Seconds from sending ``text`` to receiving the run's response, which is checked, by
    ``clock`` (wall time unless told)."""
    gc.collect()
    start = clock()
    response = agent.prompt(text, RESPONSE_TIMEOUT_S)
    elapsed = clock() - start
    check_answer(response, what)
    return elapsed


def sample(run_once: Callable[[], float], sizes: Sizes, runs: int | None = None) -> list[float]:
    """Call ``run_once`` ``sizes.warmup`` times unrecorded, then ``runs`` times; the samples."""
    for _ in range(sizes.warmup):
        run_once()
    return [run_once() for _ in range(runs or sizes.runs)]


# -- scenarios ---------------------------------------------------------------------------------


def turn_overhead(sizes: Sizes) -> Scenario:
    """One run of ``turns`` tool-call turns (one no-op call each) and a final answer; µs per
    LLM call (wall time of the run divided by ``turns + 1``). Two variants: replies with typed
    ``AgentToolCall`` blocks and a plain ``llm_call(request)``; replies with the spec's dict
    form and an ``llm_call`` that declares ``**kwargs``. The floor is the same work done by a
    bare hand-written loop (a list as history, a dict per call, the tool called directly)."""
    tool = make_tool("noop")

    def runner(dict_form: bool, traced: bool = False) -> Callable[[], float]:
        def once() -> float:
            options = {"tracer": memory_tracer()} if traced else {}
            agent = scripted_agent(
                tool_turns(sizes.turns, 1, tool.name, dict_form=dict_form),
                [tool],
                keywords=dict_form,
                max_turns=sizes.turns + 5,
                **options,
            )
            try:
                return timed_prompt(agent, "go", "turn_overhead") / (sizes.turns + 1) * 1e6
            finally:
                agent.shutdown()

        return once

    figures = [
        Figure("us_per_turn", "µs per turn", "µs", sample(runner(False), sizes), 30.0),
        Figure(
            "us_per_turn_dict_kwargs",
            "µs per turn, dict calls, **kwargs",
            "µs",
            sample(runner(True), sizes),
            30.0,
        ),
        Figure(
            "us_per_turn_bare", "µs per turn, bare loop", "µs", sample(lambda: bare_turns(sizes.turns), sizes)
        ),
    ]
    if memory_tracer is not None:
        figures.append(
            Figure(
                "us_per_turn_traced",
                "µs per turn, traced (in-memory spans)",
                "µs",
                sample(runner(False, traced=True), sizes),
            )
        )
    return Scenario("turn_overhead", params={"turns": sizes.turns}, figures=figures)


def _memory_tracer_factory() -> Callable[[], Any] | None:
    """A maker of OpenTelemetry tracers that keep their spans in memory, or ``None`` without
    the SDK (then the traced figure is left out)."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None

    def make() -> Any:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        return provider.get_tracer("bench")

    return make


memory_tracer = _memory_tracer_factory()


def bare_turns(turns: int) -> float:
    """µs per turn of a bare hand-written tool loop doing the same work with no framework: it
    appends to a list, reads the call out of a dict, calls the tool and records the result."""
    replies = [
        {"tool_calls": [{"id": f"b{t}", "name": "noop", "arguments": {"n": t}}]} for t in range(turns)
    ] + [{"content": "done"}]
    tools = {"noop": lambda call_id, args: {"role": "tool", "id": call_id, "content": "ok"}}
    gc.collect()
    start = time.perf_counter()
    history: list[Any] = [{"role": "user", "content": "go"}]
    for reply in replies:
        history.append(reply)
        for call in reply.get("tool_calls", []):
            history.append(tools[call["name"]](call["id"], dict(call["arguments"])))
    return (time.perf_counter() - start) / (turns + 1) * 1e6


def parallel_batch(sizes: Sizes) -> Scenario:
    """One turn of N calls to a tool that blocks ``block_s`` (parallel mode, default pool);
    wall seconds from prompt to response, for each batch size."""
    tool = make_tool("block", sizes.block_s, parallel=True)
    allowances = (1.05, 1.10)  # 0.21 s and 0.22 s for a 0.2 s tool

    def runner(calls: int) -> Callable[[], float]:
        def once() -> float:
            agent = scripted_agent(
                tool_turns(1, calls, tool.name), [tool], tool_options=ToolOptions(execution="parallel")
            )
            try:
                return timed_prompt(agent, "go", f"parallel_batch[{calls}]")
            finally:
                agent.shutdown()

        return once

    figures = [
        Figure(
            f"wall_s_{calls}",
            f"wall s, {calls} calls",
            "s",
            sample(runner(calls), sizes),
            round(sizes.block_s * allowances[min(i, 1)], 6),
        )
        for i, calls in enumerate(sizes.batches)
    ]
    return Scenario(
        "parallel_batch", params={"batches": list(sizes.batches), "block_s": sizes.block_s}, figures=figures
    )


def history_run(
    history: list[AgentMessage],
    tool: AgentTool,
    turns: int,
    what: str = "history_growth",
    sent: list[int] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    **options: Any,
) -> tuple[float, float]:
    """A fresh agent holding ``history``: seconds from constructing it to the response of its
    first (one-call) prompt, which covers converting the history wherever the library does it,
    then µs per turn of a run of ``turns`` tool-call turns and a final answer, by ``clock``.
    ``sent`` and ``options`` (``context``) go to
    ``scripted_agent``."""
    replies = [AssistantMessage([TextContent("warm")]), *tool_turns(turns, 1, tool.name, "g")]
    gc.collect()
    start = time.perf_counter()
    agent = scripted_agent(replies, [tool], messages=history, max_turns=turns + 5, sent=sent, **options)
    try:
        check_answer(agent.prompt("warm up", RESPONSE_TIMEOUT_S), f"{what} (first prompt)")
        first = time.perf_counter() - start
        run = timed_prompt(agent, "go", what, clock)
        return first, run / (turns + 1) * 1e6
    finally:
        agent.shutdown()


def history_growth(sizes: Sizes) -> Scenario:
    """Turns after a long history against turns after an empty one: µs per turn of each and
    their ratio, measured in interleaved pairs; loading the long history and answering a first
    prompt (a one-off conversion of the history) is reported apart."""
    tool = make_tool("noop")
    history = make_history(sizes.history, tool.name)
    empty_us, full_us, ratios, first_ms = [], [], [], []
    for pair in range(sizes.warmup + sizes.history_pairs):
        _, empty = history_run([], tool, sizes.history_turns)
        first, full = history_run(history, tool, sizes.history_turns)
        if pair >= sizes.warmup:
            empty_us.append(empty)
            full_us.append(full)
            ratios.append(full / empty)
            first_ms.append(first * 1e3)
    figures = [
        Figure("us_per_turn_empty", "µs per turn, empty history", "µs", empty_us),
        Figure("us_per_turn_long", f"µs per turn, {sizes.history} messages", "µs", full_us),
        Figure("ratio", "ratio long/empty", "x", ratios, 1.2),
        Figure("load_ms_long", "construct + first prompt, ms", "ms", first_ms),
    ]
    return Scenario(
        "history_growth", figures=figures, params={"history": sizes.history, "turns": sizes.history_turns}
    )


def untrimmed_counts(history: int, turns: int) -> list[int]:
    """The messages each request of ``history_run`` holds when nothing is dropped: the history
    and the first prompt, then the history, that prompt and its answer, the second prompt, and
    two more (a tool call and its result) per turn."""
    return [history + 1, *(history + 3 + 2 * turn for turn in range(turns + 1))]


class TurnTaker:
    """The scripted model of one of two agents that take their turns in turn. Each call notes
    the CPU time its agent's thread spent since the previous call returned (one turn of the
    loop: the tool call, its result, measuring and formatting the next request), and, once
    ``paired``, hands the turn to the other agent and waits for it back, except after the last
    reply. Taking turns makes both agents' figures come from the same moments of a shared
    machine, whose speed changes from one moment to the next."""

    def __init__(self, replies: Iterable[AssistantMessage], mine: threading.Event, theirs: threading.Event):
        self.replies = list(replies)
        self.given = 0
        self.mine, self.theirs = mine, theirs
        self.paired = False
        self.sent: list[int] = []  # the messages of each request
        self.turn_us: list[float] = []  # CPU µs of each turn while paired
        self.since: float | None = None

    def __call__(self, request: Any) -> AssistantMessage:
        now = time.thread_time()
        if self.paired and self.since is not None:
            self.turn_us.append((now - self.since) * 1e6)
        self.sent.append(len(request.messages))
        reply = self.replies[self.given]
        self.given += 1
        if self.paired:
            self.theirs.set()
            if self.given < len(self.replies):
                if not self.mine.wait(RESPONSE_TIMEOUT_S):
                    raise BenchError("the other agent did not hand the turn back")
                self.mine.clear()
        self.since = time.thread_time()
        return reply

    def pair(self) -> None:
        """Take turns from the next call on; the figures start with the turn after it."""
        self.paired, self.since = True, None


def paired_turns(
    history: list[AgentMessage], tool: AgentTool, turns: int, variants: dict[str, dict[str, Any]]
) -> dict[str, TurnTaker]:
    """Two fresh agents holding ``history`` (``variants``: name to agent options), each warmed
    up by one prompt, then both given ``turns`` tool-call turns at once, taking turns (see
    ``TurnTaker``); their models, holding each turn's CPU µs and each request's size."""
    events = [threading.Event(), threading.Event()]
    script = [AssistantMessage([TextContent("warm")]), *tool_turns(turns, 1, tool.name, "g")]
    takers = {name: TurnTaker(script, events[i], events[1 - i]) for i, name in enumerate(variants)}
    agents = {
        name: YiemAgent(llm_call=takers[name], tools=[tool], messages=history, max_turns=turns + 5, **options)
        for name, options in variants.items()
    }
    try:
        for name, agent in agents.items():
            check_answer(
                agent.prompt("warm up", RESPONSE_TIMEOUT_S), f"context_window[{name}] (first prompt)"
            )
            takers[name].pair()
        gc.collect()
        with concurrent.futures.ThreadPoolExecutor(len(agents)) as pool:
            runs = {
                name: pool.submit(agent.prompt, "go", RESPONSE_TIMEOUT_S) for name, agent in agents.items()
            }
            for name, run in runs.items():
                check_answer(run.result(RESPONSE_TIMEOUT_S), f"context_window[{name}]")
    finally:
        for agent in agents.values():
            agent.shutdown()
    return takers


def window_round(history: list[AgentMessage], tool: AgentTool, sizes: Sizes) -> dict[str, float]:
    """One round of ``context_window``: the median CPU µs per turn of an agent without a
    window and of one with a window that trims nothing, taking turns (``paired_turns``), and
    µs per turn of a run in which every request is trimmed; every request's size checked."""
    turns = sizes.window_turns
    full = untrimmed_counts(len(history), turns)
    paired = {"none": {}, "window": {"context": ContextOptions(window=sizes.window_tokens)}}
    takers = paired_turns(history, tool, turns, paired)
    for name, taker in takers.items():
        if taker.sent != full:
            raise BenchError(f"context_window[{name}]: the requests held {taker.sent} messages, not {full}")
    sent: list[int] = []
    trim = {"context": ContextOptions(window=sizes.trim_window_tokens, strategy="trim")}
    trimmed = history_run(history, tool, turns, "context_window[trim]", sent, time.process_time, **trim)
    if len(sent) != len(full) or any(n >= f for n, f in zip(sent, full, strict=True)):
        raise BenchError(f"context_window[trim]: not every request was trimmed: sent {sent}, of {full}")
    return {name: statistics.median(takers[name].turn_us) for name in paired} | {"trim": trimmed[1]}


@contextlib.contextmanager
def one_cpu() -> Iterator[None]:
    """Keep this thread, and the threads it starts, on one of the CPUs it may use while the
    block runs, where the system allows it (Linux); elsewhere, or when refused, do nothing.
    The CPUs of a shared machine run at speeds of their own: two agents whose threads sit on
    different ones differ by a third, whatever they run."""
    try:
        allowed = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {max(allowed)})
    except (AttributeError, OSError):  # no such call here, or not allowed
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def context_window(sizes: Sizes) -> Scenario:
    """What measuring every request costs (issue "budgets"): CPU µs per turn after
    ``history`` messages without a context window and with one so large that nothing is
    trimmed (every request is measured before it is sent), and their difference (the target:
    at most 5 µs more per turn); then with ``context_strategy="trim"`` and a window so small
    that every request is trimmed (the trim path's cost; no target). A difference of a few µs
    between two figures of some tens is lost in a shared machine's noise unless both are taken
    at the same moments: each round runs the two agents at once, taking turns, and gives each
    the median CPU time of its turns (``paired_turns``); the figures are the medians over the
    rounds of those and of their difference. Every request's message count is checked (all
    of them sent without trimming, fewer with it)."""
    tool = make_tool("noop")
    history = make_history(sizes.history, tool.name)
    us: dict[str, list[float]] = {"none": [], "window": [], "trim": []}
    overheads: list[float] = []
    with one_cpu():
        for rnd in range(sizes.warmup + sizes.history_pairs):
            measured = window_round(history, tool, sizes)
            if rnd >= sizes.warmup:
                for name, value in measured.items():
                    us[name].append(value)
                overheads.append(measured["window"] - measured["none"])
    figures = [
        Figure(
            "us_per_turn_no_window",
            f"CPU µs per turn, {sizes.history} messages, no window",
            "µs",
            us["none"],
        ),
        Figure("us_per_turn_window", "CPU µs per turn, window (measured, not trimmed)", "µs", us["window"]),
        Figure("us_per_turn_window_overhead", "CPU µs per turn, window - no window", "µs", overheads, 5.0),
        Figure("us_per_turn_trim", "CPU µs per turn, every request trimmed", "µs", us["trim"]),
    ]
    params = {
        "history": sizes.history,
        "turns": sizes.window_turns,
        "window_tokens": sizes.window_tokens,
        "trim_window_tokens": sizes.trim_window_tokens,
    }
    return Scenario("context_window", figures=figures, params=params)


def rss_kib() -> int:
    """This process's resident set size in KiB (``VmRSS`` of /proc/self/status)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BenchError("no VmRSS in /proc/self/status")


def drive_agents(agents: Sequence[YiemAgent], prompts: int) -> float:
    """Seconds for every agent to answer ``prompts`` prompts: each agent is given all of them at
    once with ``follow_up`` (each starts a run of its own, in order), then every response is
    collected and checked. The agents work concurrently, each at its own pace; the prompts
    are built before the clock starts, as a caller's would be."""
    questions = [UserMessage(f"question {n}") for n in range(prompts)]
    start = time.perf_counter()
    for question in questions:  # round-robin, so that no agent waits for the others' sends
        for agent in agents:
            agent.follow_up(question)
    for agent in agents:
        for _ in range(prompts):
            check_answer(agent.take_response(RESPONSE_TIMEOUT_S), "many_agents")
    return time.perf_counter() - start


def bare_worker(inbox: queue.Queue[Any], outbox: queue.Queue[Any], latency_s: float) -> None:
    """The floor's stand-in for an agent: take a prompt, sleep ``latency_s``, answer; until None."""
    while (prompt := inbox.get()) is not None:
        time.sleep(latency_s)
        outbox.put(prompt)


def bare_floor(agents: int, prompts: int, latency_s: float) -> float:
    """Seconds for the same prompts driven through bare threads and queues with no agent loop:
    the floor that this driving pattern and the GIL allow on the machine."""
    pairs: list[tuple[queue.Queue[Any], queue.Queue[Any]]] = [
        (queue.Queue(), queue.Queue()) for _ in range(agents)
    ]
    threads = [threading.Thread(target=bare_worker, args=(*pair, latency_s), daemon=True) for pair in pairs]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    for n in range(prompts):
        for inbox, _ in pairs:
            inbox.put(n)
    for _, outbox in pairs:
        for _ in range(prompts):
            outbox.get(timeout=RESPONSE_TIMEOUT_S)
    elapsed = time.perf_counter() - start
    for inbox, _ in pairs:
        inbox.put(None)
    for thread in threads:
        thread.join()
    return elapsed


def many_agents_child(agents: int, prompts: int, latency_s: float) -> dict[str, float]:
    """One ``many_agents`` run, meant for a fresh process: wall seconds and RSS KiB per agent
    (RSS with the agents created and run, minus RSS before, over the agent count), then the
    bare-threads floor of the same prompts."""
    tool = make_tool("noop")
    warm = [scripted_agent([AssistantMessage([TextContent("a")])], [tool]) for _ in range(2)]
    drive_agents(warm, 1)  # imports and first-use allocations are not the agents' cost
    for agent in warm:
        agent.shutdown()
    replies = [
        [AssistantMessage([TextContent(f"answer {r}")]) for r in range(prompts)] for _ in range(agents)
    ]
    gc.collect()
    before = rss_kib()
    fleet = [scripted_agent(r, [tool], latency_s=latency_s) for r in replies]
    try:
        wall = drive_agents(fleet, prompts)
        gc.collect()
        after = rss_kib()
    finally:
        for agent in fleet:
            agent.shutdown()
    return {
        "wall_s": wall,
        "rss_kib_per_agent": (after - before) / agents,
        "floor_s": bare_floor(agents, prompts, latency_s),
    }


def many_agents(sizes: Sizes) -> Scenario:
    """``agents`` agents answering ``prompts`` prompts each with a simulated model latency, each
    run in a fresh process so that memory freed by earlier runs does not hide the cost."""
    config = {"agents": sizes.agents, "prompts": sizes.prompts, "latency_s": sizes.latency_s}
    ideal = sizes.prompts * sizes.latency_s

    def once() -> dict[str, float]:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(config)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise BenchError(f"many_agents child failed: {done.stderr.strip()[-2000:]}")
        result: dict[str, float] = json.loads(done.stdout)
        return result

    for _ in range(sizes.warmup):
        once()
    runs = [once() for _ in range(sizes.runs)]
    walls = [r["wall_s"] for r in runs]
    figures = [
        Figure("wall_ratio", f"wall / ideal ({ideal:g} s)", "x", [w / ideal for w in walls], 1.10),
        Figure("wall_s", "wall s", "s", walls),
        Figure("floor_ratio", "bare threads+queues / ideal", "x", [r["floor_s"] / ideal for r in runs]),
        Figure(
            "rss_mib_per_agent",
            "RSS per agent, MiB",
            "MiB",
            [r["rss_kib_per_agent"] / 1024 for r in runs],
            1.0,
        ),
    ]
    return Scenario("many_agents", params={**config, "ideal_s": ideal}, figures=figures)


TOOL_FILE = '''"""Benchmark tool {i} (generated by scripts/bench.py): echoes its arguments."""


def prepare_arguments(args):
    return args


def execute_tool(tool_call_id, args, signal, on_partial_result):
    return AgentToolResult([TextContent("tool {i}: " + str(args.get("n")))])


def get_tool():
    return AgentTool(
        name="bench_tool_{i:03d}",
        label="Bench tool {i}",
        description="Echoes n; generated for the tool-loading benchmark.",
        input_schema={{
            "type": "object",
            "properties": {{"n": {{"type": "integer"}}, "note": {{"type": "string"}}}},
            "required": ["n"],
        }},
        execute=execute_tool,
        prepare_arguments=prepare_arguments,
    )
'''


def write_tool_files(folder: Path, count: int) -> None:
    """Write ``count`` tool files (``get_tool`` plus helpers, core types from the loader)."""
    for i in range(count):
        (folder / f"bench_tool_{i:03d}.py").write_text(TOOL_FILE.format(i=i), encoding="utf-8")


def tool_loading(sizes: Sizes) -> Scenario:
    """``load_tools`` on a folder of generated tool files, each run into a new store; ms per
    file. Reports ``unavailable`` when ``yiemagent.tools._store`` cannot be imported."""
    params = {"files": sizes.tool_files}
    try:
        registry = importlib.import_module("yiemagent.tools._store")
    except ImportError as exc:
        return Scenario(
            "tool_loading",
            "unavailable",
            params,
            [Figure("ms_per_file", "ms per file", "ms", [], 5.0)],
            f"yiemagent.tools._store cannot be imported: {exc}",
        )
    with tempfile.TemporaryDirectory(prefix="yiemagent-bench-") as tmp:
        folder = Path(tmp)
        write_tool_files(folder, sizes.tool_files)
        counter = iter(range(1_000_000))

        def once() -> float:
            store = registry.ToolStore(f"bench-{next(counter)}")
            gc.collect()
            start = time.perf_counter()
            registry.load_tools(store, folder)
            elapsed = time.perf_counter() - start
            loaded = sum(name.startswith("bench_tool_") for name in registry.get_tools(store))
            if loaded != sizes.tool_files:
                raise BenchError(f"load_tools registered {loaded} of {sizes.tool_files} tools")
            return elapsed / sizes.tool_files * 1e3

        figure = Figure("ms_per_file", "ms per file", "ms", sample(once, sizes), 5.0)
    return Scenario("tool_loading", params=params, figures=[figure])


# -- ray_pool: conversations through an AgentPool ----------------------------------------------

# Each short conversation: a question the model answers with one tool call and then an answer
# (two model calls), and a follow-up it answers at once (one model call).
CONVERSATION = ("tool, please", "thanks")


def ray_pool_reply(request: dict[str, Any]) -> AssistantMessage:
    """The scripted model of ``ray_pool``: a ``noop`` call for a message starting with "tool",
    ``done`` after the tool's result, ``ok`` otherwise. It reads only the request, so one
    model serves every session of an actor."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return AssistantMessage([TextContent("done")])
    text = "".join(p["text"] for p in last["content"] if p["type"] == "text")
    if text.startswith("tool"):
        return AssistantMessage(
            [AgentToolCall(f"c{uuid.uuid4().hex[:12]}", "noop", {"n": 1})], stop_reason="toolUse"
        )
    return AssistantMessage([TextContent("ok")])


def ray_pool_llm(spec: str | None, latency_s: float = 0.0) -> Callable[[dict[str, Any]], AssistantMessage]:
    """The ``llm_factory`` the pool's actors resolve as ``bench:ray_pool_llm`` (this folder is on
    their PYTHONPATH): ``ray_pool_reply`` after ``latency_s``, the simulated model's latency."""

    def llm_call(request: dict[str, Any]) -> AssistantMessage:
        if latency_s > 0:
            time.sleep(latency_s)
        return ray_pool_reply(request)

    return llm_call


def ray_pool_tools() -> list[AgentTool]:
    """The tools of ``ray_pool``'s agents (``bench:ray_pool_tools``)."""
    return [make_tool("noop")]


def drive_conversations(
    converse: Callable[[str], list[float]], ids: Sequence[str], clients: int
) -> tuple[list[float], float]:
    """Every conversation of ``ids`` held by ``clients`` caller threads at once; the seconds each
    prompt took, and the wall seconds of the whole."""
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as callers:
        per_conversation = list(callers.map(converse, ids))
    wall = time.perf_counter() - start
    return [seconds for seconds_list in per_conversation for seconds in seconds_list], wall


def timed_conversation(prompt: Callable[[str], AssistantMessage]) -> list[float]:
    """Seconds per prompt of one ``CONVERSATION``, each answer checked."""
    latencies = []
    for text in CONVERSATION:
        start = time.perf_counter()
        response = prompt(text)
        latencies.append(time.perf_counter() - start)
        check_answer(response, "ray_pool")
    return latencies


def percentile(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (1-99) of ``values``."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@contextlib.contextmanager
def redis_server() -> Iterator[str | None]:
    """A throwaway ``redis-server`` on a free loopback port, with no persistence, stopped at the
    end; yields its URL, or ``None`` when ``redis-server`` is not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="yiemagent-bench-redis-") as folder:
        server = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                folder,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                        conn.sendall(b"PING\r\n")
                        if conn.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    raise BenchError("redis-server did not start")
                time.sleep(0.05)  # the server is starting; nothing to wait on but its port
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            server.terminate()
            server.wait(30)


def ray_pool_child(
    conversations: int, actors: int, clients: int, runs: int, warmup: int, latency_s: float, serial: int
) -> dict[str, Any]:
    """``ray_pool`` in a fresh process: a local Ray cluster (2 CPUs) and an ``AgentPool`` of
    ``actors`` per session store (a ``DirectoryStore``, and a ``RedisStore`` when
    ``redis-server`` is installed). Per round, ``conversations`` new conversations on local
    agents (one ``YiemAgent`` per conversation, no store), then through each pool, with
    ``clients`` callers at once; and ``serial`` conversations with one caller, where the
    difference is the cost of a prompt's trip through the pool rather than of the queue in
    front of a busy machine. Returns each measured round's figures."""
    import ray

    from yiemagent.integrations.ray import AgentPool, AgentSettings, DirectoryStore, RedisStore

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    path = os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parent), str(REPO), os.environ.get("PYTHONPATH")) if p
    )
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=128 * 1024 * 1024,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    settings = AgentSettings(
        model_spec="bench",
        llm_factory="bench:ray_pool_llm",
        llm_options={"latency_s": latency_s},
        tool_imports=("bench:ray_pool_tools",),
    )
    rounds: list[dict[str, float]] = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="yiemagent-bench-sessions-") as folder,
            redis_server() as redis_url,
            contextlib.ExitStack() as pools,
        ):
            stores: dict[str, Any] = {"": DirectoryStore(folder)}
            if redis_url is not None:
                stores["redis_"] = RedisStore(redis_url)
            pool_of = {
                prefix: pools.enter_context(
                    AgentPool(
                        actors, settings, store, idle_timeout_s=None, max_sessions_per_actor=conversations
                    )
                )
                for prefix, store in stores.items()
            }

            def local(sid: str) -> list[float]:
                agent = YiemAgent(
                    llm_call=ray_pool_llm(None, latency_s), tools=ray_pool_tools(), session_id=sid
                )
                try:
                    return timed_conversation(lambda text: agent.prompt(text, RESPONSE_TIMEOUT_S))
                finally:
                    agent.shutdown()

            for number in range(warmup + runs):
                count = conversations if number >= warmup else min(conversations, 100)
                ids = [f"round{number}-c{n}" for n in range(count)]
                figures: dict[str, float] = {}
                gc.collect()
                alone, alone_wall = drive_conversations(local, ids, clients)
                figures.update(
                    local_prompts_per_s=len(alone) / alone_wall,
                    local_p50_ms=statistics.median(alone) * 1e3,
                    local_p99_ms=percentile(alone, 99) * 1e3,
                )
                serial_ids = [f"{sid}-serial" for sid in ids[:serial]]
                alone_serial, _ = drive_conversations(local, serial_ids, 1)
                for prefix, pool in pool_of.items():

                    def remote(sid: str, pool: Any = pool) -> list[float]:
                        return timed_conversation(lambda text: pool.prompt(sid, text, RESPONSE_TIMEOUT_S))

                    gc.collect()
                    pooled, wall = drive_conversations(remote, ids, clients)
                    pooled_serial, _ = drive_conversations(remote, serial_ids, 1)
                    figures.update(
                        {
                            f"{prefix}serial_overhead_ms": (
                                statistics.median(pooled_serial) - statistics.median(alone_serial)
                            )
                            * 1e3,
                            f"{prefix}prompts_per_s": len(pooled) / wall,
                            f"{prefix}p50_ms": statistics.median(pooled) * 1e3,
                            f"{prefix}p99_ms": percentile(pooled, 99) * 1e3,
                            f"{prefix}overhead_ms": (statistics.median(pooled) - statistics.median(alone))
                            * 1e3,
                        }
                    )
                if number >= warmup:
                    rounds.append(figures)
    finally:
        ray.shutdown()
    return {"rounds": rounds}


RAY_POOL_FIGURES = (
    ("serial_overhead_ms", "pool, DirectoryStore: p50 overhead per prompt, one caller", "ms"),
    ("redis_serial_overhead_ms", "pool, RedisStore: p50 overhead per prompt, one caller", "ms"),
    ("prompts_per_s", "pool, DirectoryStore: prompts per second", "1/s"),
    ("p50_ms", "pool, DirectoryStore: p50 latency per prompt", "ms"),
    ("p99_ms", "pool, DirectoryStore: p99 latency per prompt", "ms"),
    ("overhead_ms", "pool, DirectoryStore: p50 overhead per prompt, all callers", "ms"),
    ("redis_prompts_per_s", "pool, RedisStore: prompts per second", "1/s"),
    ("redis_p50_ms", "pool, RedisStore: p50 latency per prompt", "ms"),
    ("redis_p99_ms", "pool, RedisStore: p99 latency per prompt", "ms"),
    ("redis_overhead_ms", "pool, RedisStore: p50 overhead per prompt, all callers", "ms"),
    ("local_prompts_per_s", "local agents: prompts per second", "1/s"),
    ("local_p50_ms", "local agents: p50 latency per prompt", "ms"),
    ("local_p99_ms", "local agents: p99 latency per prompt", "ms"),
)


def ray_pool(sizes: Sizes) -> Scenario:
    """``pool_conversations`` short conversations (``CONVERSATION``: three model calls of
    ``latency_s`` each, one tool call) through an ``AgentPool`` of ``pool_actors`` actors on a
    local Ray cluster, ``pool_clients`` at once, each session saved after every prompt to a
    ``DirectoryStore`` (and, when ``redis-server`` is installed, to a ``RedisStore`` by a
    second pool); against the same conversations on local agents. The overhead is the pool's
    p50 latency minus the local agents', with every caller at once and with one caller
    (``pool_serial`` conversations). One fresh process per invocation (Ray's start-up is
    not measured), ``pool_runs`` measured rounds after a warm-up round. Reports ``unavailable``
    without the ``ray`` extra."""
    config = {
        "conversations": sizes.pool_conversations,
        "actors": sizes.pool_actors,
        "clients": sizes.pool_clients,
        "runs": sizes.pool_runs,
        "warmup": sizes.warmup,
        "latency_s": sizes.latency_s,
        "serial": sizes.pool_serial,
    }
    params = {**config, "prompts_per_conversation": len(CONVERSATION)}
    if importlib.util.find_spec("ray") is None:
        return Scenario(
            "ray_pool",
            "unavailable",
            params,
            [Figure(name, label, unit, []) for name, label, unit in RAY_POOL_FIGURES],
            "the ray extra is not installed: pip install -e '.[ray]'",
        )
    cmd = [sys.executable, str(Path(__file__).resolve()), "--ray-child", json.dumps(config)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise BenchError(f"ray_pool child failed: {done.stderr.strip()[-2000:]}")
    rounds = json.loads(done.stdout.strip().splitlines()[-1])["rounds"]
    figures = [
        Figure(name, label, unit, [r[name] for r in rounds])
        for name, label, unit in RAY_POOL_FIGURES
        if name in rounds[0]
    ]
    return Scenario(
        "ray_pool",
        params=params,
        figures=figures,
        note="" if "redis_p50_ms" in rounds[0] else "no redis-server: DirectoryStore only",
    )


LOCAL_PROMPT = "Write a long story about a cat who learns to sail."
LOCAL_TARGET = 1 / 0.95  # llama-cpp-python ÷ client tokens/s: the client keeps at least 95 % of it
LOCAL_AGENTS = (1, 4, 16)


def local_model(sizes: Sizes) -> Scenario:
    """Tokens per second of the embedded model through ``LlamaCppClient`` (llama.cpp's own
    server in-process, from xllamacpp; a plain text reply, deltas streamed to ``on_update``) and,
    where llama-cpp-python is installed (it is no longer a dependency: ``pip install
    llama-cpp-python`` to compare), through it called directly on the same prompt tokens with the
    same settings, runs interleaved. ``slowdown`` is direct ÷ client per pair of runs; its target
    1.053 means the client keeps ≥ 0.95 of llama-cpp-python's speed. Reports ``unavailable``
    without the ``local`` extra.

    ``cli_startup_s`` is the command's start-up: seconds from starting ``python -m yiemagent run``
    (with the embedded model, whose loading it includes) to its first streamed output, the
    model's first token; ``cli_scripted_s`` the same with a scripted model, i.e. the command's
    own start-up without a model to load."""
    params: dict[str, Any] = {"max_tokens": sizes.local_tokens, "prompt": LOCAL_PROMPT}
    figures = [Figure("client_tokens_per_s", "LlamaCppClient tokens/s", "tok/s", [])]
    try:
        llamacpp = importlib.import_module("yiemagent.llm.llamacpp._client")
        client = llamacpp.LlamaCppClient(max_tokens=sizes.local_tokens)
    except ImportError as exc:
        return Scenario("local_model", "unavailable", params, figures, str(exc))
    try:
        llama_cpp: Any = importlib.import_module("llama_cpp")
    except ImportError:
        llama_cpp = None
    prompts = importlib.import_module("yiemagent.llm.llamacpp._prompts")
    utils = importlib.import_module("yiemagent.core._context")
    context = importlib.import_module("yiemagent.core._tools").AgentContext(
        "", [UserMessage(LOCAL_PROMPT)], []
    )
    request = utils.format_msg_for_llm(context)
    direct = None
    try:
        client(request)  # loads the model: not part of any measured run
        engine = client._load()
        prompt = engine.apply_template(prompts.transcript(request["messages"], client.system_prompt))
        tokens = engine.tokenize(prompt, special=True)
        updates: list[Any] = []

        def through_client() -> tuple[float, int]:
            updates.clear()
            start = time.perf_counter()
            reply = client(request, on_update=updates.append)
            elapsed = time.perf_counter() - start
            if reply.usage is None or not updates:
                raise BenchError("LlamaCppClient streamed no tokens")
            return elapsed, reply.usage.output

        def called_directly() -> tuple[float, int]:
            start = time.perf_counter()
            direct.reset()  # as the client does: a fresh context for each generation
            out = direct.create_completion(
                tokens,
                max_tokens=sizes.local_tokens,
                temperature=client.temperature,
                repeat_penalty=client.repeat_penalty,
                seed=client.seed,
            )
            return time.perf_counter() - start, int(out["usage"]["completion_tokens"])

        if llama_cpp is not None:
            direct = llama_cpp.Llama(
                model_path=str(client.model_path),
                n_ctx=client.n_ctx,
                n_threads=client.n_threads,
                seed=client.seed,
                verbose=False,
            )
            figures += [
                Figure("direct_tokens_per_s", "llama-cpp-python tokens/s", "tok/s", []),
                Figure("slowdown", "llama-cpp-python ÷ client tokens/s", "x", [], LOCAL_TARGET),
            ]
        for _ in range(sizes.warmup):
            if direct is not None:
                called_directly()
            through_client()
        for _ in range(sizes.runs):
            client_s, client_n = through_client()
            figures[0].samples.append(client_n / client_s)
            params["tokens"] = client_n
            if direct is not None:
                direct_s, direct_n = called_directly()
                figures[1].samples.append(direct_n / direct_s)
                figures[2].samples.append((direct_n / direct_s) / (client_n / client_s))
                params["direct_tokens"] = direct_n
    finally:
        client.close()
        if direct is not None:
            direct.close()
    figures.append(
        Figure(
            "cli_startup_s",
            "CLI start-up to first output, local model",
            "s",
            sample(lambda: cli_first_output("local"), sizes),
        )
    )
    figures.append(
        Figure(
            "cli_scripted_s",
            "CLI start-up to first output, scripted model",
            "s",
            sample(lambda: cli_first_output("scripted"), sizes),
        )
    )
    note = "" if direct is not None else "llama-cpp-python not installed: no direct figures"
    return Scenario("local_model", params=params, figures=figures, note=note)


def local_agents(sizes: Sizes) -> Scenario:
    """Many agents on one embedded model: ``n`` agents (1, 4 and 16) of one
    ``LlamaCppClient`` model (``n_parallel=16``: one loaded model serving up to 16 calls at once)
    each ask for a story at the same moment; the figure is all the tokens they got per second of
    the wall time until the last answer, and ``speedup_n`` that against one agent alone."""
    params: dict[str, Any] = {"agents": list(LOCAL_AGENTS), "max_tokens": sizes.local_tokens // 2}
    figures = [
        Figure(f"tokens_per_s_{n}", f"tokens/s, {n} agents at once", "tok/s", []) for n in LOCAL_AGENTS
    ]
    try:
        llamacpp = importlib.import_module("yiemagent.llm.llamacpp._client")
        client = llamacpp.LlamaCppClient(max_tokens=sizes.local_tokens // 2, n_parallel=max(LOCAL_AGENTS))
    except ImportError as exc:
        return Scenario("local_agents", "unavailable", params, figures, str(exc))

    def round_of(n: int) -> float:
        agents = [YiemAgent(llm_call=client) for _ in range(n)]
        try:
            start = time.perf_counter()
            for agent in agents:
                agent.run_agent(LOCAL_PROMPT)
            replies = [agent.take_response(timeout=600) for agent in agents]
            elapsed = time.perf_counter() - start
        finally:
            for agent in agents:
                agent.shutdown()
        if any(r.stop_reason not in ("stop", "length") or r.usage is None for r in replies):
            raise BenchError(f"an agent's answer failed: {[r.error_message for r in replies]}")
        return sum(r.usage.output for r in replies if r.usage is not None) / elapsed

    try:
        round_of(1)  # loads the model
        for figure, n in zip(figures, LOCAL_AGENTS, strict=True):
            figure.samples.extend(sample(lambda n=n: round_of(n), sizes))
    finally:
        client.close()
    alone = statistics.median(figures[0].samples)
    for figure, n in zip(list(figures[1:]), LOCAL_AGENTS[1:], strict=True):
        figures.append(
            Figure(
                f"speedup_{n}", f"{n} agents ÷ 1 agent, tokens/s", "x", [s / alone for s in figure.samples]
            )
        )
    return Scenario("local_agents", params=params, figures=figures)


class _City(TypedDict):
    name: str
    country: str
    population: int


LOCAL_CITIES = ("Paris", "Lima", "Oslo", "Tokyo", "Rome", "Cairo", "Quito", "Perth", "Dakar", "Hanoi")


def local_structured(sizes: Sizes) -> Scenario:
    """Seconds per structured answer of the embedded model in the ``grammar`` output mode (a
    three-field schema; the grammar bounds its strings and layout and the token budget is sized
    to it), over ``runs`` × the cities asked in turn; ``valid`` counts answers that fit the
    schema (every one must)."""
    params: dict[str, Any] = {"schema": "name: str, country: str, population: int"}
    figures = [Figure("seconds_per_answer", "seconds per structured answer", "s", [], 30.0)]
    try:
        llamacpp = importlib.import_module("yiemagent.llm.llamacpp._client")
        client = llamacpp.LlamaCppClient()
    except ImportError as exc:
        return Scenario("local_structured", "unavailable", params, figures, str(exc))
    valid = 0
    try:
        with YiemAgent(llm_call=client, output=OutputOptions(_City, mode="grammar")) as agent:
            agent.prompt("Describe Paris as data.", timeout=600)  # loads the model
            for _ in range(sizes.runs):
                for city in LOCAL_CITIES[: max(2, sizes.runs)]:
                    agent.reset()
                    start = time.perf_counter()
                    reply = agent.prompt(f"Describe {city} as data.", timeout=600)
                    figures[0].samples.append(time.perf_counter() - start)
                    valid += reply.stop_reason == "stop" and isinstance(reply.output, dict)
    finally:
        client.close()
    params["answers"] = len(figures[0].samples)
    params["valid"] = valid
    if valid != len(figures[0].samples):
        raise BenchError(f"{len(figures[0].samples) - valid} structured answers were not valid")
    figures.append(Figure("max_seconds", "slowest structured answer", "s", [max(figures[0].samples)], 30.0))
    return Scenario("local_structured", params=params, figures=figures)


def cli_first_output(model: str) -> float:
    """Seconds from starting ``python -m yiemagent run`` with ``model`` (``local`` or
    ``scripted``: a reply replayed from a file) to the first byte it writes to stdout."""
    with tempfile.TemporaryDirectory() as folder:
        spec = model
        if model == "scripted":
            replies = Path(folder) / "replies.json"
            replies.write_text(json.dumps(["Hello there."]), encoding="utf-8")
            spec = f"scripted:{replies}"
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        start = time.perf_counter()
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "yiemagent",
                "run",
                "Say hello.",
                "--model",
                spec,
                "--tools",
                folder,
                "-q",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            assert child.stdout is not None
            first = child.stdout.read(1)
            elapsed = time.perf_counter() - start
            child.stdout.read()
        finally:
            child.wait(RESPONSE_TIMEOUT_S)
        if not first or child.returncode != 0:
            raise BenchError(f"yiemagent run --model {model} failed (exit {child.returncode})")
        return elapsed


def import_seconds() -> float:
    """Seconds a fresh interpreter spends in ``import yiemagent`` (timed inside the child, so
    the interpreter's own start-up is left out)."""
    code = "import time; t = time.perf_counter(); import yiemagent; print(time.perf_counter() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=RESPONSE_TIMEOUT_S
    )
    return float(done.stdout.strip())


def help_seconds() -> float:
    """Wall seconds of ``python -m yiemagent --help``, start-up included."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "yiemagent", "--help"],
        capture_output=True,
        check=True,
        timeout=RESPONSE_TIMEOUT_S,
    )
    return time.perf_counter() - start


def import_time(sizes: Sizes) -> Scenario:
    """What loading the library costs before it does anything: ``import yiemagent`` (target
    150 ms) and the command's ``--help`` (target 0.3 s), each in fresh processes (7 by
    default: the median of seven). Nothing is imported until a name is used, so neither loads
    a provider, ``requests``, ``jsonschema`` or Ray."""
    runs = max(sizes.runs, 7) if sizes is not QUICK else sizes.runs
    figures = [
        Figure("import_ms", "import yiemagent", "ms", [import_seconds() * 1000 for _ in range(runs)], 150.0),
        Figure(
            "help_s", "yiemagent --help, start-up included", "s", [help_seconds() for _ in range(runs)], 0.3
        ),
    ]
    return Scenario("import_time", params={"processes": runs}, figures=figures)


def replay_turns(llm_call: Callable[..., AssistantMessage], tool: AgentTool, turns: int) -> float:
    """µs per turn of a run of ``turns`` tool-call turns and a final answer, on ``llm_call``."""
    agent = YiemAgent(llm_call=llm_call, tools=[tool], max_turns=turns + 5, system_prompt="bench")
    try:
        return timed_prompt(agent, "go", "replay") / (turns + 1) * 1e6
    finally:
        agent.shutdown()


def replay(sizes: Sizes) -> Scenario:
    """What answering from a cassette costs against the scripted model it was recorded from: a
    run of ``turns`` tool-call turns recorded once with ``record``, then µs per turn of the same
    run on a ``ScriptedModel``, on ``replay(match="sequence")`` and on ``replay()`` (strict:
    every request put in the cassette's form and checked), in interleaved rounds. The target of
    the sequence replay is the scripted model's median; the strict replay has none: it does
    what the scripted model does not (it reads each request and compares it), and its figure
    says what that check costs."""
    from yiemagent.testing import ScriptedModel, record
    from yiemagent.testing import replay as replay_cassette

    tool = make_tool("noop")
    turns = max(2, sizes.turns // 4)

    def scripted() -> ScriptedModel:
        return ScriptedModel(tool_turns(turns, 1, tool.name), keep_requests=0)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.json"
        replay_turns(record(scripted(), path), tool, turns)
        rounds: dict[str, list[float]] = {"scripted": [], "sequence": [], "strict": []}
        for n in range(sizes.warmup + sizes.runs):
            measured = {
                "scripted": replay_turns(scripted(), tool, turns),
                "sequence": replay_turns(replay_cassette(path, "sequence"), tool, turns),
                "strict": replay_turns(replay_cassette(path), tool, turns),
            }
            if n >= sizes.warmup:
                for key, value in measured.items():
                    rounds[key].append(value)
    base = statistics.median(rounds["scripted"])
    figures = [
        Figure("us_per_turn_scripted", "µs per turn, scripted model", "µs", rounds["scripted"]),
        Figure("us_per_turn_sequence", "µs per turn, replay (sequence)", "µs", rounds["sequence"], base),
        Figure("us_per_turn_strict", "µs per turn, replay (strict)", "µs", rounds["strict"]),
    ]
    return Scenario("replay", params={"turns": turns}, figures=figures)


RUNNERS: dict[str, Callable[[Sizes], Scenario]] = {
    "import_time": import_time,
    "turn_overhead": turn_overhead,
    "parallel_batch": parallel_batch,
    "history_growth": history_growth,
    "context_window": context_window,
    "many_agents": many_agents,
    "tool_loading": tool_loading,
    "ray_pool": ray_pool,
    "local_model": local_model,
    "local_agents": local_agents,
    "local_structured": local_structured,
    "replay": replay,
}


def run_scenario(name: str, sizes: Sizes) -> Scenario:
    """Run one scenario; an exception becomes an ``error`` scenario instead of ending the report."""
    try:
        return RUNNERS[name](sizes)
    except Exception as exc:
        return Scenario(name, "error", note=f"{type(exc).__name__}: {exc}")


# -- report --------------------------------------------------------------------------------------


def missed(scenarios: Sequence[Scenario]) -> list[str]:
    """``scenario.figure`` for every figure with a target that its median misses."""
    return [
        f"{s.name}.{f.name}"
        for s in scenarios
        for f in s.figures
        if s.status == "ok" and f.to_dict()["met"] is False
    ]


def report(scenarios: Sequence[Scenario], sizes: Sizes, quick: bool, elapsed: float) -> dict[str, Any]:
    """The whole report as one JSON-ready dict."""
    return {
        "machine": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "quick": quick,
        "runs": sizes.runs,
        "warmup": sizes.warmup,
        "elapsed_s": elapsed,
        "scenarios": {s.name: s.to_dict() for s in scenarios},
        "missed": missed(scenarios),
        "errors": [s.name for s in scenarios if s.status == "error"],
    }


def fmt(value: float | None) -> str:
    """A number with as many decimals as its size needs."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.4f}"


def table_rows(data: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per figure (or one per unavailable or failed scenario)."""
    rows: list[tuple[str, ...]] = []
    for name, scenario in data["scenarios"].items():
        if scenario["status"] != "ok":
            rows.append((name, scenario["status"].upper(), "", "", "", "", "", "", scenario["note"]))
            continue
        for fig in scenario["figures"].values():
            met = {True: "yes", False: "MISSED", None: "-"}[fig["met"]]
            target = "-" if fig["target"] is None else f"<= {fmt(fig['target'])}"
            rows.append(
                (
                    name,
                    fig["label"],
                    fmt(fig["median"]),
                    fmt(fig["min"]),
                    fmt(fig["max"]),
                    str(fig["runs"]),
                    target,
                    met,
                    "",
                )
            )
    return rows


def render(data: dict[str, Any]) -> str:
    """The human-readable table, with a closing line naming every missed target."""
    header = ("scenario", "figure", "median", "min", "max", "runs", "target", "met", "")
    rows = [header, *table_rows(data)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = [
        f"yiemagent benchmarks: Python {data['machine']['python']}, {data['machine']['cpus']} CPUs, "
        f"median, min and max over the runs counted, after {data['warmup']} warm-up"
        f"{' (QUICK sizes)' if data['quick'] else ''}",
        "",
    ]
    for row in rows:
        cells = [
            row[0].ljust(widths[0]),
            row[1].ljust(widths[1]),
            *(cell.rjust(w) for cell, w in zip(row[2:8], widths[2:8], strict=True)),
        ]
        lines.append("  ".join(cells) + (f"  {row[8]}" if row[8] else ""))
    lines.append("")
    lines.append("Missed targets: " + (", ".join(data["missed"]) or "none"))
    if data["errors"]:
        lines.append("Failed scenarios: " + ", ".join(data["errors"]))
    lines.append(f"Total time: {data['elapsed_s']:.1f} s")
    return "\n".join(lines)


# -- profiling -----------------------------------------------------------------------------------


def profile(names: Sequence[str], sizes: Sizes, top: int) -> str:
    """Run the scenarios without warm-up, with a cProfile profiler in every thread they start
    (the agents' workers and tool pools, where the loop's time goes; not the ``many_agents``
    child processes), and return the merged statistics: yiemagent's top functions by cumulative
    and by own time, then every function by own time."""
    if sys.version_info >= (3, 12):
        raise SystemExit("--profile needs CPython 3.10 or 3.11 (cProfile became process-wide in 3.12)")
    profilers: list[cProfile.Profile] = []

    def start(frame: Any, event: str, arg: Any) -> None:
        sys.setprofile(None)
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.enable()

    once = dataclasses.replace(sizes, warmup=0, history_pairs=sizes.runs)
    threading.setprofile(start)
    try:
        for name in names:
            RUNNERS[name](once)
    finally:
        threading.setprofile(None)
    out = io.StringIO()
    stats = pstats.Stats(*profilers, stream=out)
    for key in ("cumulative", "tottime"):
        stats.sort_stats(key).print_stats(r"yiemagent[/\\]", top)
    stats.sort_stats("tottime").print_stats(top)  # own time outside yiemagent too (attrs, jsonschema)
    return out.getvalue()


# -- command line --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for the smoke test")
    parser.add_argument("--runs", type=int, help="measured runs per figure (default 7, quick 2)")
    parser.add_argument("--only", help="comma-separated scenarios to run: " + ", ".join(SCENARIOS))
    parser.add_argument("--profile", action="store_true", help="print cProfile statistics instead")
    parser.add_argument("--top", type=int, default=25, help="functions listed per --profile table")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one many_agents run, in a fresh process
    parser.add_argument("--ray-child", help=argparse.SUPPRESS)  # the ray_pool rounds, in a fresh process
    return parser.parse_args(argv)


def chosen(only: str | None) -> list[str]:
    """The scenarios named by ``--only`` (all by default), checked."""
    names = [n.strip() for n in only.split(",") if n.strip()] if only else list(SCENARIOS)
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; choose from {', '.join(SCENARIOS)}")
    return names


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the chosen scenarios and return the report dict (the smoke test calls this)."""
    args = parse_args(argv)
    sizes = QUICK if args.quick else Sizes()
    if args.runs:
        sizes = dataclasses.replace(sizes, runs=args.runs)
    start = time.perf_counter()
    scenarios = [run_scenario(name, sizes) for name in chosen(args.only)]
    return report(scenarios, sizes, args.quick, time.perf_counter() - start)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the table, ``--json``, ``--profile``, or a ``many_agents`` child run."""
    args = parse_args(argv)
    if args.child:
        print(json.dumps(many_agents_child(**json.loads(args.child))))
        return 0
    if args.ray_child:
        print(json.dumps(ray_pool_child(**json.loads(args.ray_child))))
        return 0
    if args.profile:
        sizes = QUICK if args.quick else Sizes()
        print(profile(chosen(args.only), sizes, args.top))
        return 0
    data = run(argv)
    print(json.dumps(data, indent=2) if args.json else render(data))
    return 1 if data["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())

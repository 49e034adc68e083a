#!/usr/bin/env python3
"""What the run loop costs a turn, against a bare ``while`` loop doing the same work.

The harness the peers' loops are compared with: one run of ``--turns`` tool-call turns (one call
of a no-op tool each) and a final answer, with a model that answers at once (replies prepared
before the clock starts). The loop is ``run_loop`` with the default ``prepare_context`` and
formatter, events going to a listener that keeps them; the floor is a bare ``while`` loop that
calls the model with the history, appends its reply, calls the tool for each call and appends
the result, with the same messages and tool. Each figure is CPU microseconds per turn
(``time.process_time``), the median of ``--runs`` runs after a warm-up, and the ratio is the
loop's median over the bare loop's.

The loop is measured plain (also with no listener, when it makes no events) and with each
feature configured (usage limits, an output, an
approval policy that lets every call run, all three), so a run that uses no feature can be seen
to pay nothing for them; and after 2,000 messages of history, against an empty one.

    python scripts/bench_loop.py            # the table
    python scripts/bench_loop.py --json     # one JSON object
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(REPO))

from yiemagent import (  # noqa: E402
    AgentMessage,
    AgentState,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    RunConfig,
    TextContent,
    ToolResultMessage,
    UsageLimits,
    UserMessage,
    run_loop,
)
from yiemagent.core._output import OutputSpec  # noqa: E402

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
ANSWER = {"type": "object", "properties": {"done": {"type": "boolean"}}, "required": ["done"]}


def noop_tool() -> AgentTool:
    """A tool that returns one prepared result."""
    result = AgentToolResult([TextContent("ok")])
    return AgentTool("noop", "noop", "Does nothing.", SCHEMA, lambda _id, _args, _s=None, _u=None: result)


def replies(turns: int) -> list[AssistantMessage]:
    """``turns`` replies of one call each, then a final answer (JSON, for a run with an output)."""
    made = [
        AssistantMessage([AgentToolCall(f"c{t}", "noop", {"n": t})], stop_reason="toolUse")
        for t in range(turns)
    ]
    made.append(AssistantMessage([TextContent('{"done": true}')]))
    return made


def history(size: int) -> list[AgentMessage]:
    """``size`` messages of earlier turns: question, call, result, answer."""
    out: list[AgentMessage] = []
    for i in range(size // 4):
        out += [
            UserMessage([TextContent(f"Question {i}")]),
            AssistantMessage([AgentToolCall(f"h{i}", "noop", {"n": i})], stop_reason="toolUse"),
            ToolResultMessage(f"h{i}", "noop", [TextContent("ok")]),
            AssistantMessage([TextContent(f"Answer {i}")]),
        ]
    return out


def loop_run(turns: int, options: dict[str, Any], earlier: int = 0, listener: bool = True) -> float:
    """CPU µs per turn of one ``run_loop`` run (its events kept by a listener, or, without
    ``listener``, not made at all)."""
    script = iter(replies(turns))
    events: list[Any] = []
    state = AgentState(tools={"noop": noop_tool()}, messages=history(earlier))
    config = RunConfig(llm_call=lambda _request: next(script), max_turns=turns + 5, **options)
    gc.collect()
    start = time.process_time()
    response = run_loop(
        [UserMessage([TextContent("go")])], state, config, events.append if listener else None
    )
    spent = time.process_time() - start
    if response.stop_reason != "stop":
        raise SystemExit(f"the run ended with {response.stop_reason}: {response.error_message}")
    return spent / (turns + 1) * 1e6


def bare_run(turns: int) -> float:
    """CPU µs per turn of a bare ``while`` loop over the same messages: call the model with
    the history, append its reply, call the tool for each call, append the result."""
    script = iter(replies(turns))
    tool = noop_tool()
    gc.collect()
    start = time.process_time()
    messages: list[AgentMessage] = [UserMessage([TextContent("go")])]
    while True:
        reply = (lambda _messages: next(script))(messages)
        messages.append(reply)
        calls = [block for block in reply.content if isinstance(block, AgentToolCall)]
        if not calls:
            break
        for call in calls:
            result = tool.execute(call.id, call.arguments, None, None)
            messages.append(ToolResultMessage(call.id, call.name, result.content))
    return (time.process_time() - start) / (turns + 1) * 1e6


def variants() -> dict[str, dict[str, Any]]:
    """The loop's configurations: plain, each feature, all of them."""
    limits = UsageLimits(max_llm_calls=100_000, max_tool_calls=100_000, max_total_tokens=10**9)
    output = OutputSpec(schema=ANSWER, mode="native")
    approval = {"needs_approval": lambda _tool, _args, _context: False}
    return {
        "plain": {},
        "budgets": {"usage_limits": limits},
        "output": {"output": output},
        "approval": approval,
        "all": {"usage_limits": limits, "output": output, **approval},
    }


def median_of(measure: Callable[[], float], runs: int) -> float:
    measure()  # warm-up
    return statistics.median(measure() for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bare = median_of(lambda: bare_run(args.turns), args.runs)
    figures: dict[str, Any] = {"turns": args.turns, "runs": args.runs, "bare_us": bare}
    for name, options in variants().items():
        us = median_of(lambda o=options: loop_run(args.turns, o), args.runs)  # type: ignore[misc]
        figures[name] = {"us_per_turn": us, "ratio_to_bare": us / bare}
    quiet = median_of(lambda: loop_run(args.turns, {}, listener=False), args.runs)
    figures["plain_no_listener"] = {"us_per_turn": quiet, "ratio_to_bare": quiet / bare}
    empty = figures["plain"]["us_per_turn"]
    long = median_of(lambda: loop_run(args.turns, {}, earlier=2000), args.runs)
    figures["history_2000"] = {"us_per_turn": long, "ratio_to_empty": long / empty}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{args.turns} turns, median of {args.runs} runs, CPU µs per turn")
    print(f"  bare while loop          {bare:8.2f}")
    for name in variants():
        f = figures[name]
        print(f"  run_loop, {name:<14} {f['us_per_turn']:8.2f}   {f['ratio_to_bare']:5.2f}x bare")
    q = figures["plain_no_listener"]
    print(f"  run_loop, no listener    {q['us_per_turn']:8.2f}   {q['ratio_to_bare']:5.2f}x bare")
    h = figures["history_2000"]
    print(
        f"  run_loop, 2,000 earlier  {h['us_per_turn']:8.2f}   {h['ratio_to_empty']:5.2f}x an empty history"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""A/B comparison of the turn overhead of several checkouts of yiemagent, timed on CPU.

On a noisy machine, wall-clock figures of separate invocations move by a third; this script
makes them comparable. It runs ``bench.py``'s ``turn_overhead`` scenario (a real ``YiemAgent``,
``turns`` tool-call turns and a final answer, typed replies with a plain ``llm_call`` and
dict-form replies with an ``llm_call(request, **kwargs)``) for each checkout in turn, round
after round, each time in a fresh process that imports the package from that checkout and the
scenario helpers from this one, and times ``agent.prompt`` with ``time.process_time``. Each
process runs a variant ``runs`` times after a warm-up; a checkout's figures are the lowest of
all and the median of each process's lowest (noise only adds time).

    python scripts/bench_ab.py ../old-checkout .            # 11 rounds
    python scripts/bench_ab.py --rounds 3 --turns 100 --json ../old .
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent

# Runs in the child process: argv = checkout, scripts dir, turns, runs. Prints one JSON object.
CHILD = r"""
import gc, json, sys, time
from pathlib import Path
root, scripts, turns, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, root)
import yiemagent  # from the checkout under test, before bench.py puts its own first
if not Path(yiemagent.__file__).resolve().is_relative_to(Path(root)):
    raise SystemExit(f"yiemagent was imported from {yiemagent.__file__}, not from {root}")
sys.path.insert(0, scripts)
import bench

def once(dict_form):
    tool = bench.make_tool("noop")
    agent = bench.scripted_agent(bench.tool_turns(turns, 1, tool.name, dict_form=dict_form),
                                 [tool], keywords=dict_form, max_turns=turns + 5)
    try:
        gc.collect()
        start = time.process_time()
        response = agent.prompt("go", 600)
        elapsed = time.process_time() - start
    finally:
        agent.shutdown()
    bench.check_answer(response, "bench_ab")
    return elapsed / (turns + 1) * 1e6

out = {}
for name, dict_form in (("typed", False), ("dict_kwargs", True)):
    once(dict_form)
    out[name] = min(once(dict_form) for _ in range(runs))
print(json.dumps(out))
"""


def positive_int(text: str) -> int:
    """An ``argparse`` type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def measure(checkout: Path, turns: int, runs: int) -> dict[str, float]:
    """One fresh process's lowest µs per turn for each variant, for ``checkout``."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(checkout), str(SCRIPTS), str(turns), str(runs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"measuring {checkout} failed:\n{done.stderr.strip()}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def summary(samples: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per variant: the lowest figure and the median of the processes' lowest."""
    return {
        name: {"lowest": min(s[name] for s in samples), "median": statistics.median(s[name] for s in samples)}
        for name in samples[0]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "checkouts",
        nargs="+",
        type=Path,
        help="directories holding a yiemagent package (a git worktree each)",
    )
    parser.add_argument("--rounds", type=positive_int, default=11, help="processes per checkout")
    parser.add_argument("--turns", type=positive_int, default=200, help="tool-call turns per run")
    parser.add_argument("--runs", type=positive_int, default=10, help="runs per process, after a warm-up")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    checkouts = [c.resolve() for c in args.checkouts]
    for checkout in checkouts:
        if not (checkout / "yiemagent" / "__init__.py").is_file():
            parser.error(f"{checkout} holds no yiemagent package")
    samples: dict[Path, list[dict[str, float]]] = {c: [] for c in checkouts}
    for _ in range(args.rounds):
        for checkout in checkouts:  # alternate, so that slow minutes hit every checkout alike
            samples[checkout].append(measure(checkout, args.turns, args.runs))
    report: dict[str, Any] = {str(c): summary(s) for c, s in samples.items()}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"CPU µs per turn ({args.turns} turns; {args.rounds} processes per checkout, "
        f"{args.runs} runs each): lowest / median of each process's lowest"
    )
    for checkout, variants in report.items():
        for name, figures in variants.items():
            print(f"  {checkout}  {name:12} {figures['lowest']:7.1f} / {figures['median']:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Parallel tools: the calls of one reply run at the same time with
``tool_options=ToolOptions(execution="parallel")``.

The model asks for three quotes in one reply; each lookup takes 0.3 s (a slow service, played
by a wait). The same question runs twice: sequentially (one call after the other, about 0.9 s)
and in parallel (about 0.3 s, the slowest call). In parallel mode the events of different calls
interleave, but each call's start comes before its progress and its progress before its end;
the results still enter the history in the order of the calls. A tool runs in parallel only
when it allows it (``@function_tool(parallel=True)`` or ``parallel_tool_execute=True``). The
model is scripted (see ``_scripted.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from _scripted import ScriptedModel, answer, calls, show, use

from yiemagent import AbortSignal, AgentToolResult, ToolOptions, ToolResultMessage, YiemAgent, function_tool

PRICES = {"ACME": 12.5, "GLOBEX": 48.0, "INITECH": 3.2}
LOOKUP_S = 0.3


@function_tool(parallel=True)
def quote(symbol: str, signal: AbortSignal, on_partial_result: Callable[[AgentToolResult], None]) -> str:
    """Get the price of a stock.

    Args:
        symbol: The ticker, e.g. "ACME".
    """
    on_partial_result(AgentToolResult(f"asking the exchange for {symbol}"))
    signal.wait(LOOKUP_S)  # the slow service; an abort ends the wait at once
    return f"{symbol}: {PRICES.get(symbol, 0.0)}"


def ask(mode: Literal["sequential", "parallel"]) -> float:
    """Ask for three quotes with the tools run in ``mode``; return the seconds it took."""
    model = ScriptedModel(
        [
            calls(*(use("quote", symbol=s) for s in PRICES)),
            "ACME 12.5, GLOBEX 48.0, INITECH 3.2.",
        ]
    )
    print(f"== {mode}")
    with YiemAgent(
        llm_call=model, tools=[quote], tool_options=ToolOptions(execution=mode), agent_event_sink=show
    ) as agent:
        started = time.perf_counter()
        reply = agent.prompt("Quote ACME, GLOBEX and INITECH.", timeout=60)
        took = time.perf_counter() - started
        order = [m.tool_call_id for m in agent.messages if isinstance(m, ToolResultMessage)]
    print(f"answer: {answer(reply)}")
    print(f"results in the history, in call order: {order}")
    print(f"{mode}: {took:.2f} s for {len(PRICES)} calls of {LOOKUP_S} s")
    return took


def main() -> None:
    """Run the question both ways and compare."""
    sequential = ask("sequential")
    parallel = ask("parallel")
    print(f"parallel took {parallel / sequential:.0%} of the sequential time")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""How much of yiemagent's behaviour the conformance suite can see: apply semantic faults to a copy
of the package, one at a time, run ``python -m yiemagent.parity run parity/scenarios`` on each,
and report which faults the suite caught (some scenario failed) and which survived.

Each fault is a small edit of the real code (an exact snippet replaced by another), named for
what it breaks and grouped by area: the request to the model, the hooks' contexts, texts a
tool or hook supplies, tool stores, results and their order, channels. A fault whose snippet is
no longer in the code exactly once is reported as ``stale`` (exit 1), so the list cannot rot
silently as the code changes. A suite run that hangs past ``--timeout`` counts as caught.

    python scripts/parity_mutants.py                 # every fault, a table and the share caught
    python scripts/parity_mutants.py --json          # one JSON object
    python scripts/parity_mutants.py --only no_tool_results,block_reason_lost
    python scripts/parity_mutants.py --min-caught 0.9   # exit 1 below that share

Exit status: 0 when every fault applied (and the share caught is at least ``--min-caught``),
1 otherwise, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Fault:
    """One semantic fault: in ``path`` (under ``yiemagent/``), ``old`` becomes ``new``."""

    name: str
    area: str
    what: str
    path: str
    old: str
    new: str


FAULTS = [
    # -- the request the loop gives the model -------------------------------------------------
    Fault(
        "no_tool_results",
        "request",
        "tool results are never sent back to the model",
        "core/_context.py",
        "HistorySnapshot(state.messages)",
        "[m for m in state.messages if m.role != 'toolResult']",
    ),
    Fault(
        "last_message_only",
        "request",
        "prepare_context keeps only the last message",
        "core/_context.py",
        "HistorySnapshot(state.messages)",
        "state.messages[-1:]",
    ),
    Fault(
        "no_system_prompt",
        "request",
        "the system prompt is dropped from the request",
        "core/_context.py",
        "AgentContext(state.system_prompt, ",
        'AgentContext("", ',
    ),
    Fault(
        "no_tools_offered",
        "request",
        "the request offers no tools",
        "core/_context.py",
        "HistorySnapshot(state.messages), state.tools)",
        "HistorySnapshot(state.messages), {})",
    ),
    Fault(
        "no_session_id",
        "request",
        "the run's session id never reaches the request",
        "core/_loop.py",
        "request.session_id = config.session_id",
        "request.session_id = None",
    ),
    Fault(
        "empty_texts_sent",
        "request",
        "the request's text parts are sent empty",
        "core/_spec_format.py",
        'return {"type": "text", "text": block.text}',
        'return {"type": "text", "text": ""}',
    ),
    Fault(
        "no_tools_array",
        "request",
        "the spec view of the request has an empty tools array",
        "core/_spec_format.py",
        "        return list(self._tool_list)",
        "        return []",
    ),
    # -- what the hooks receive ---------------------------------------------------------------
    Fault(
        "hooks_see_no_history",
        "hooks",
        "the hooks' context has an empty history",
        "core/_loop.py",
        "view = HistoryView(state.messages)",
        "view = HistoryView([])",
    ),
    Fault(
        "before_hook_raw_args",
        "hooks",
        "before_tool_call sees the raw, not the prepared, arguments",
        "core/_pipeline.py",
        "BeforeToolCallContext(assistant_message, tool_call, args, context)",
        "BeforeToolCallContext(assistant_message, tool_call, tool_call.arguments, context)",
    ),
    Fault(
        "after_hook_raw_args",
        "hooks",
        "after_tool_call sees the raw, not the prepared, arguments",
        "core/_pipeline.py",
        "AfterToolCallContext(assistant_message, prep.tool_call, prep.args,",
        "AfterToolCallContext(assistant_message, prep.tool_call, prep.tool_call.arguments,",
    ),
    # -- texts a tool, hook or validator supplies ---------------------------------------------
    Fault(
        "block_reason_lost",
        "texts",
        "a block's reason is replaced by the default text",
        "core/_pipeline.py",
        'return (str(reason) if reason else "Tool execution was blocked") if block else None',
        'return "Tool execution was blocked" if block else None',
    ),
    Fault(
        "exception_text_lost",
        "texts",
        "a raising tool's exception text is dropped",
        "core/_pipeline.py",
        """        msg = f'Tool "{name}" failed: {describe_error(exc)}'""",
        """        msg = f'Tool "{name}" failed.'""",
    ),
    Fault(
        "violations_unnamed",
        "texts",
        "argument errors lose their text (violations, paths)",
        "core/_pipeline.py",
        "create_error_tool_result(str(exc), exc.kind)",
        'create_error_tool_result("Invalid arguments.", exc.kind)',
    ),
    Fault(
        "unknown_tool_unlisted",
        "texts",
        "an unknown tool's error no longer lists the tools",
        "core/_pipeline.py",
        """f'Tool "{name}" not found. Available tools: {known}.'""",
        """f'Tool "{name}" not found.'""",
    ),
    Fault(
        "terminated_text",
        "texts",
        "a terminated batch's response has another opening text",
        "core/_responses.py",
        'content: list[ContentBlock] = [TextContent("Tool execution completed.")]',
        'content: list[ContentBlock] = [TextContent("Done.")]',
    ),
    # -- tool stores ----------------------------------------------------------------------------
    Fault(
        "register_keeps_old",
        "stores",
        "register_tool does not replace a tool of the same name",
        "tools/_store.py",
        "        store.tools[tool.name] = tool\n    return tool",
        "        store.tools.setdefault(tool.name, tool)\n    return tool",
    ),
    Fault(
        "list_tools_heading",
        "stores",
        "listTools' text has another heading",
        "tools/_store.py",
        'text = "Available tools:\\n" + ',
        'text = "Tools:\\n" + ',
    ),
    Fault(
        "added_tools_not_live",
        "stores",
        "tools a call added are not offered on the next turn",
        "core/_loop.py",
        "                self.added_tools.extend(msg.added_tool_names)",
        "                pass",
    ),
    # -- results and their order --------------------------------------------------------------
    Fault(
        "terminate_any",
        "results",
        "one terminating result ends the batch (not all of them)",
        "core/_pipeline.py",
        "        if not f.result.terminate:\n            return False",
        "        if f.result.terminate:\n            return True",
    ),
    Fault(
        "terminated_no_error",
        "results",
        "a terminated batch with a failed call reports no error",
        "core/_responses.py",
        'error_message="One or more tool calls failed" if failed else None',
        "error_message=None",
    ),
    Fault(
        "terminated_no_usage",
        "results",
        "a terminated response loses the reply's usage",
        "core/_responses.py",
        '        usage=response.usage,\n        stop_reason="tool_use_terminated",',
        '        usage=None,\n        stop_reason="tool_use_terminated",',
    ),
    Fault(
        "max_turns_off_by_one",
        "results",
        "max_turns allows one LLM call more",
        "core/_loop.py",
        "if turn >= config.max_turns:",
        "if turn > config.max_turns:",
    ),
    Fault(
        "abort_after_batch_ignored",
        "results",
        "an abort during a batch does not end the run",
        "core/_loop.py",
        '        if self.signal.aborted:\n            return self.made_up("aborted", ABORTED)\n'
        "        if batch is None:",
        "        if batch is None:",
    ),
    Fault(
        "repeats_allowed",
        "results",
        "the same call is never refused as a repeat",
        "core/_pipeline.py",
        "if (refusal := repeats.refusal(",
        "if False and (refusal := repeats.refusal(",
    ),
    Fault(
        "turn_end_without_results",
        "results",
        "turn_end carries no tool results",
        "core/_loop.py",
        "TurnEndEvent(reply, batch.messages if batch is not None else [])",
        "TurnEndEvent(reply, [])",
    ),
    Fault(
        "no_message_start",
        "results",
        "history messages get no message_start event",
        "core/_loop.py",
        "        if emit.active and not started:\n            emit.send(MessageStartEvent(msg))",
        "        if False:\n            emit.send(MessageStartEvent(msg))",
    ),
    Fault(
        "pending_calls_hidden",
        "results",
        "the state shows no pending tool calls during a batch",
        "core/_loop.py",
        "state.pending_tool_calls = {call.id for call in calls}",
        "state.pending_tool_calls = set()",
    ),
    Fault(
        "results_not_errors",
        "results",
        "error results are stored as successes",
        "core/_pipeline.py",
        "                f.is_error,\n                timestamp,\n            )",
        "                False,\n                timestamp,\n            )",
    ),
    # -- channels -------------------------------------------------------------------------------
    Fault(
        "steering_never_joins",
        "channels",
        "messages sent during a run never join it",
        "core/_loop.py",
        "for msg in take_input():",
        "for msg in []:",
    ),
    Fault(
        "follow_up_mode_flipped",
        "channels",
        "follow_up_mode 'all' takes one, 'one-at-a-time' all",
        "agent/_worker.py",
        'if self.follow_up_mode == "all":',
        'if self.follow_up_mode != "all":',
    ),
    Fault(
        "steering_mode_flipped",
        "channels",
        "steering_mode 'one-at-a-time' takes all, 'all' one",
        "agent/_worker.py",
        'if self.steering_mode == "one-at-a-time":\n                        break',
        'if self.steering_mode != "one-at-a-time":\n                        break',
    ),
    Fault(
        "ids_not_normalised",
        "results",
        "tool calls without an id are not given one",
        "core/_loop.py",
        "reply = normalize_tool_calls(reply, self.config.new_tool_call_id)",
        "reply = reply",
    ),
]


@dataclasses.dataclass
class Outcome:
    fault: Fault
    verdict: str  # caught, survived, stale
    detail: str = ""


def apply(fault: Fault, package: Path) -> str | None:
    """Apply ``fault`` to the copy of the package at ``package``; the reason it cannot, or None."""
    target = package / fault.path
    if not target.is_file():
        return f"{fault.path} does not exist"
    text = target.read_text(encoding="utf-8")
    count = text.count(fault.old)
    if count != 1:
        return f"its snippet occurs {count} times in {fault.path}, not once"
    target.write_text(text.replace(fault.old, fault.new), encoding="utf-8")
    return None


def run_suite(copy_root: Path, scenarios: Path, timeout: float) -> tuple[bool, str]:
    """Run the conformance suite with the package at ``copy_root``; ``(passed, last line)``."""
    env = {**os.environ, "PYTHONPATH": str(copy_root), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "yiemagent.parity", "run", str(scenarios)],
            cwd=copy_root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False, f"the suite did not finish in {timeout:g} s"
    lines = (done.stdout.strip() or done.stderr.strip() or "(no output)").splitlines()
    return done.returncode == 0, lines[-1]


def copy_package(into: Path) -> Path:
    """A copy of the package under ``into``, as the suite will import it, with the example tools
    next to it as in a checkout (the writeTool scenarios load writeTool from there); return the
    package's folder."""
    package = into / "yiemagent"
    shutil.copytree(ROOT / "yiemagent", package, ignore=shutil.ignore_patterns("__pycache__"))
    if (ROOT / "tools").is_dir():
        shutil.copytree(ROOT / "tools", into / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    return package


def try_fault(fault: Fault, scenarios: Path, timeout: float) -> Outcome:
    """Copy the package, apply ``fault``, run the suite on it."""
    with tempfile.TemporaryDirectory(prefix="yiem-mutant-") as tmp:
        problem = apply(fault, copy_package(Path(tmp)))
        if problem is not None:
            return Outcome(fault, "stale", problem)
        passed, last = run_suite(Path(tmp), scenarios, timeout)
        return Outcome(fault, "survived" if passed else "caught", last)


def baseline(scenarios: Path, timeout: float) -> None:
    """The suite must pass on an unchanged copy, run exactly as the faults' copies are, or no
    fault's verdict means anything (a copy that failed for another reason would make every
    fault look caught)."""
    with tempfile.TemporaryDirectory(prefix="yiem-mutant-") as tmp:
        copy_package(Path(tmp))
        passed, last = run_suite(Path(tmp), scenarios, timeout)
    if not passed:
        raise SystemExit(f"the suite fails on an unchanged copy of the code ({last}); fix that first")


def report(outcomes: list[Outcome]) -> str:
    rows = [f"{'fault':<28} {'area':<9} verdict   what"]
    for o in outcomes:
        rows.append(f"{o.fault.name:<28} {o.fault.area:<9} {o.verdict:<9} {o.fault.what}")
        if o.verdict == "stale":
            rows.append(f"{'':<39}({o.detail})")
    applied = [o for o in outcomes if o.verdict != "stale"]
    caught = sum(o.verdict == "caught" for o in applied)
    share = caught / len(applied) if applied else 0.0
    rows.append(f"\ncaught {caught} of {len(applied)} faults ({share:.0%})")
    for area in sorted({o.fault.area for o in applied}):
        mine = [o for o in applied if o.fault.area == area]
        rows.append(f"  {area:<9} {sum(o.verdict == 'caught' for o in mine)} of {len(mine)}")
    return "\n".join(rows)


def seconds(text: str) -> float:
    """``--timeout``: a positive, finite number of seconds."""
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def share_of_one(text: str) -> float:
    """``--min-caught``: a share from 0 to 1 (NaN is none)."""
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share from 0 to 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated fault names: " + ", ".join(f.name for f in FAULTS))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--timeout", type=seconds, default=120.0, help="seconds one suite run may take")
    parser.add_argument(
        "--min-caught", type=share_of_one, default=0.0, help="exit 1 when the share caught is lower (0 to 1)"
    )
    parser.add_argument("--scenarios", type=Path, default=ROOT / "parity" / "scenarios")
    args = parser.parse_args(argv)
    faults = FAULTS
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {f.name for f in FAULTS})
        if unknown:
            parser.error(f"unknown fault(s) {unknown}")
        faults = [f for f in FAULTS if f.name in wanted]
    scenarios = args.scenarios.resolve()
    baseline(scenarios, args.timeout)
    outcomes = [try_fault(f, scenarios, args.timeout) for f in faults]
    applied = [o for o in outcomes if o.verdict != "stale"]
    share = sum(o.verdict == "caught" for o in applied) / len(applied) if applied else 0.0
    if args.json:
        print(
            json.dumps(
                {
                    "caught_share": share,
                    "faults": [
                        {
                            "name": o.fault.name,
                            "area": o.fault.area,
                            "what": o.fault.what,
                            "verdict": o.verdict,
                            "detail": o.detail,
                        }
                        for o in outcomes
                    ],
                },
                indent=2,
            )
        )
    else:
        print(report(outcomes))
    stale = len(outcomes) - len(applied)
    return 1 if stale or share < args.min_caught else 0


if __name__ == "__main__":
    sys.exit(main())

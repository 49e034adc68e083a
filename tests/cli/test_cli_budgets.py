"""``yiemagent run`` with budgets: ``--max-llm-calls`` and ``--max-total-tokens`` stop a run
saying which limit (exit 1, no traceback), ``--context-window`` ends a run that would not fit
before anything is sent, ``--context-strategy trim`` sends the request trimmed, and ``--json``
carries the run's usage. Each runs the real command in a child process."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import run_cli, script_file, tools_folder


def echo_call(text: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "echo", "arguments": {"text": text}}]}


def test_max_llm_calls_stops_the_run_and_says_which_limit(tmp_path: Path) -> None:
    tools = tools_folder(tmp_path / "tools")
    script = script_file(tmp_path / "r.json", [echo_call("a"), echo_call("b"), "never asked"])
    done = run_cli(
        "run", "Echo things.", "--model", f"scripted:{script}", "--tools", str(tools),
        "--max-llm-calls", "2", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    printed = json.loads(done.stdout)
    assert printed["stop_reason"] == "usage_limit"
    assert "max_llm_calls=2" in printed["error_message"]
    assert printed["run_usage"]["llm_calls"] == 2 and printed["run_usage"]["calls_per_tool"] == {"echo": 2}
    assert "max_llm_calls=2" in done.stderr and "Traceback" not in done.stderr


def test_max_total_tokens_counts_what_the_model_reported(tmp_path: Path) -> None:
    tools = tools_folder(tmp_path / "tools")
    first = {
        "content": [{"type": "toolCall", "id": "c1", "name": "echo", "arguments": {"text": "a"}}],
        "stop_reason": "toolUse",
        "usage": {"input": 900, "output": 200},
    }
    script = script_file(tmp_path / "r.json", [first, "never asked"])
    done = run_cli(
        "run", "Echo.", "--model", f"scripted:{script}", "--tools", str(tools),
        "--max-total-tokens", "1000",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert "max_total_tokens=1000" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_prompt_past_the_context_window_is_not_sent(tmp_path: Path) -> None:
    script = script_file(tmp_path / "r.json", ["never asked"])
    long_prompt = "word " * 2000
    done = run_cli(
        "run", long_prompt, "--model", f"scripted:{script}", "--context-window", "500", cwd=tmp_path
    )
    assert done.returncode == 1
    assert "does not fit the context window of 500 tokens" in done.stderr
    assert "nothing was sent" in done.stderr and "Traceback" not in done.stderr
    assert "--context-strategy trim" in done.stderr  # the advice a command-line user can follow


def test_trim_sends_the_last_turn_without_the_oldest(tmp_path: Path) -> None:
    tools = tools_folder(tmp_path / "tools")
    calls = [echo_call(f"{n} " + "x" * 900) for n in range(4)]
    script = script_file(tmp_path / "r.json", [*calls, "all echoed"])
    done = run_cli(
        "run", "Echo long things.", "--model", f"scripted:{script}", "--tools", str(tools),
        "--context-window", "1200", "--context-strategy", "trim",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "all echoed"


def test_a_bad_budget_option_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_cli("run", "hi", "--max-llm-calls", "0", cwd=tmp_path)
    assert done.returncode == 2
    assert "--max-llm-calls" in done.stderr and "Traceback" not in done.stderr
    done = run_cli("run", "hi", "--context-strategy", "shrink", cwd=tmp_path)
    assert done.returncode == 2 and "invalid choice: 'shrink'" in done.stderr

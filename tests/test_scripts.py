"""Every example script in ``scripts/`` runs offline as a real subprocess, exits 0 and tells the
story it promises (``bench.py``, ``bench_ab.py`` and ``parity_mutants.py`` have their own smoke
tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

# script -> lines (or parts of lines) its output must show
EXPECTED: dict[str, list[str]] = {
    "example.py": ["-> getTime(", "answer: Here you go: Current time in Tokyo:"],
    "quick_start.py": [
        "  <- add [ok]: 42",
        "answer: 2 + 40 = 42. (stop_reason=stop)",
        "history: user -> assistant -> toolResult -> assistant",
    ],
    "manual_registration.py": [
        "offered on the first question: ['shout', 'listTools']",
        "offered on the second question: ['shout', 'listTools', 'convert']",
        "<- convert [ok]:",
    ],
    "hooks.py": [
        "approval asked for writeTool 'runShell': declined",
        "<- writeTool [error]: The user declined the tool 'runShell'",
        "approval asked for writeTool 'wordCount': approved",
        "<- wordCount [ok]: 4",
        '"email": "[email]", "phone": "[phone]"',
    ],
    "parallel_tools.py": [
        "sequential: ",
        "parallel: ",
        "results in the history, in call order: ['call_1_1', 'call_1_2', 'call_1_3']",
    ],
    "self_tooling.py": [
        '<- writeTool [ok]: Created tool "celsiusToFahrenheit"',
        "<- celsiusToFahrenheit [ok]: 70.7 F",
        "offered on turn 3: ['getTime', 'getWeather', 'writeTool', 'listTools', 'celsiusToFahrenheit']",
    ],
    "custom_format.py": ["(3 older messages not sent)", "answer: The capital is Tokyo."],
    "tracing.py": [
        "invoke_agent demographer  [UNSET]",
        "chat scripted-model  [UNSET]",
        "execute_tool population  [UNSET] {'gen_ai.tool.name': 'population'",
        "answer: Tokyo has far more people",
    ],
    "structured_output.py": [
        "  - args.temperature: 'minus four' is not of type 'integer'",
        "output: Weather(city='Oslo', temperature=-4, conditions='snow') (stop_reason=stop)",
        "the model was called 3 time(s)",
    ],
    "resume.py": [
        "run 1 ended: stop_reason=tool_use_terminated",
        "run 2 ended: stop_reason=stop",
        "resume() again: ValueError: cannot resume",
    ],
}

NEEDS = {"tracing.py": "otel"}  # script -> the extra it needs beyond the package


def test_every_example_script_is_tested() -> None:
    # bench.py, bench_ab.py, bench_loop.py and parity_mutants.py have their own smoke tests,
    # mcp_example.py its own test (it starts an MCP server).
    found = {p.name for p in SCRIPTS.glob("*.py") if not p.name.startswith("_")} - {
        "bench.py",
        "bench_ab.py",
        "bench_loop.py",
        "mcp_example.py",
        "parity_mutants.py",
    }
    assert found == set(EXPECTED)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.needs(NEEDS[n])) if n in NEEDS else n for n in sorted(EXPECTED)],
)
def test_the_script_runs_offline_and_tells_its_story(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / name)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    for expected in EXPECTED[name]:
        assert expected in done.stdout, f"{expected!r} not in:\n{done.stdout}"
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the working folder

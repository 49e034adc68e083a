"""``writeTool`` in the ``yiemagent`` command: offered only with ``--allow-write-tool`` (or a
``--tools`` folder that holds it), and then every call of it waits for approval: ``[y]es / [n]o /
[e]dit`` on the terminal, denied when the input ends without an answer (a pipe, an empty stdin),
approved by ``--yes``. Every test runs the real command as a subprocess with a scripted model;
the terminal ones on a pty."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Terminal, clean_env, run_cli, script_file

from yiemagent.agent import load_session

posix_terminal = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")

SHOUT = {
    "name": "shout",
    "label": "Shout",
    "description": "Shout a text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "executeCode": "return args['text'].upper() + '!'",
}
WRITE_THEN_CALL: list[Any] = [
    {"tool_calls": [{"name": "writeTool", "arguments": SHOUT}]},
    {"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]},
    "Done.",
]


def tool_names(session: Path) -> list[str]:
    """The names of the tools the saved conversation's tool results came from."""
    return [
        m.tool_name
        for m in load_session(session).messages  # type: ignore[attr-defined]
        if m.role == "toolResult"
    ]


def test_writetool_is_not_offered_by_default(tmp_path: Path) -> None:
    script = script_file(tmp_path / "replies.json", WRITE_THEN_CALL)
    done = run_cli(
        "run", "Make a shout tool", "--model", f"scripted:{script}", "--events", "jsonl", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert 'Tool \\"writeTool\\" not found. Available tools: getTime, getWeather, listTools.' in done.stdout
    assert 'Tool \\"shout\\" not found' in done.stdout  # nothing was written


def test_without_an_answer_a_writetool_call_is_denied_and_says_why(tmp_path: Path) -> None:
    script = script_file(tmp_path / "replies.json", WRITE_THEN_CALL)
    done = run_cli(
        "run",
        "Make a shout tool",
        "--model",
        f"scripted:{script}",
        "--allow-write-tool",
        "--events",
        "jsonl",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert 'Tool \\"writeTool\\" was not run: no answer (the input ended).' in done.stdout
    assert "no answer (the input ended): denied 1 call waiting for approval" in done.stderr
    assert 'Tool \\"shout\\" not found' in done.stdout  # never written, so never callable


def test_yes_allows_writetool_without_asking(tmp_path: Path) -> None:
    script = script_file(tmp_path / "replies.json", WRITE_THEN_CALL)
    done = run_cli(
        "run",
        "Make a shout tool",
        "--model",
        f"scripted:{script}",
        "--allow-write-tool",
        "--yes",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done.\n"
    assert "approved (--yes): writeTool" in done.stderr  # one line says what was approved
    assert "✓ shout" in done.stderr and "HI!" in done.stderr


def _chat_with_writetool(tmp_path: Path, answer: str) -> tuple[str, Path]:
    """A chat (on a pty) whose model writes the shout tool and calls it; ``answer`` is typed
    at the question. Returns what the terminal showed and the saved session."""
    script = script_file(tmp_path / "replies.json", WRITE_THEN_CALL)
    saved = tmp_path / "session.json"
    term = Terminal(
        "chat", "--model", f"scripted:{script}", "--allow-write-tool", cwd=tmp_path, env=clean_env()
    )
    try:
        term.expect("you> ")
        term.send("/tools\n")
        assert "writeTool: Write Tool" in term.expect("you> ")
        term.send("Make a shout tool\n")
        question = term.expect("Run it? [y]es / [n]o / [e]dit ")
        assert "The model wants to call writeTool with:" in question
        assert "\"executeCode\": \"return args['text'].upper() + '!'\"" in question  # the code
        term.send(answer + "\n")
        if answer == "n":
            term.expect("Reason (optional, Enter for none): ")
            term.send("\n")
        shown = term.expect("you> ")
        term.send(f"/save {saved}\n/exit\n")
        assert term.wait() == 0
    finally:
        term.close()
    return shown, saved


@posix_terminal
def test_chat_asks_before_writetool_and_yes_runs_it(tmp_path: Path) -> None:
    shown, saved = _chat_with_writetool(tmp_path, "y")
    assert "✓ shout" in shown and "HI!" in shown and "Done." in shown
    assert tool_names(saved) == ["writeTool", "shout"]


@posix_terminal
def test_chat_asks_before_writetool_and_no_blocks_it(tmp_path: Path) -> None:
    shown, saved = _chat_with_writetool(tmp_path, "n")
    assert "writeTool error: The user denied this tool call." in shown
    assert 'Tool "shout" not found' in shown
    results = [m for m in load_session(saved).messages if m.role == "toolResult"]
    assert [r.is_error for r in results] == [True, True]  # type: ignore[attr-defined]

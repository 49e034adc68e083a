"""Approval in the ``yiemagent`` command: a tool that declares ``needs_approval`` (or every tool,
with ``--approve``) is asked about before it runs: the tool, its arguments as JSON, and ``[y]es
/ [n]o / [e]dit``. Every test runs the real command as a subprocess with a scripted model whose
first reply calls the tool; the terminal ones on a pty (reads bounded by ``cli_helpers.WAIT``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import Terminal, clean_env, run_cli, script_file, tools_folder

posix_terminal = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")

QUESTION = "Run it? [y]es / [n]o / [e]dit "

# A tool that needs approval and leaves a marker file holding the arguments it ran with.
MARK_TOOL = """
import json


def execute(tool_call_id, args, signal, on_partial_result):
    with open("marker.json", "w", encoding="utf-8") as stream:
        json.dump(args, stream)
    return AgentToolResult("marked " + args["text"])


def get_tool():
    return AgentTool(
        name="mark", label="Mark", description="Leave a marker file.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}},
                      "required": ["text"]},
        execute=execute, needs_approval=True,
    )
"""

MARK_THEN_ANSWER: list[Any] = [
    {"tool_calls": [{"name": "mark", "arguments": {"text": "hi"}, "id": "call_mark"}]},
    "Done.",
]

# An editor: replaces the file it is given with other arguments.
EDITOR_SCRIPT = """
import json, sys
with open(sys.argv[1], "w", encoding="utf-8") as stream:
    json.dump({"text": "edited"}, stream)
"""


def mark_tools(tmp_path: Path) -> Path:
    """A tools folder with ``echo`` (no approval needed) and ``mark`` (approval needed)."""
    folder = tools_folder(tmp_path / "tools")
    (folder / "mark.py").write_text(MARK_TOOL, encoding="utf-8")
    return folder


def marker(tmp_path: Path) -> Any:
    """The arguments the mark tool ran with, or ``None`` when it did not run."""
    path = tmp_path / "marker.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def env_without_editor(**extra: str) -> dict[str, str]:
    env = clean_env(**extra)
    for name in ("VISUAL", "EDITOR"):
        if name not in extra:
            env.pop(name, None)
    return env


def start_run(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> Terminal:
    """``yiemagent run`` on a pty with the mark tool and the scripted model."""
    script = script_file(tmp_path / "replies.json", MARK_THEN_ANSWER)
    mark_tools(tmp_path)
    return Terminal(
        "run",
        "Leave a mark",
        "--model",
        f"scripted:{script}",
        "--tools",
        "tools",
        *options,
        cwd=tmp_path,
        env=env if env is not None else env_without_editor(),
    )


@posix_terminal
def test_yes_on_a_terminal_runs_the_tool_with_the_arguments_shown(tmp_path: Path) -> None:
    term = start_run(tmp_path)
    try:
        question = term.expect(QUESTION)
        assert "The model wants to call mark with:" in question
        assert '"text": "hi"' in question
        assert marker(tmp_path) is None  # nothing ran before the answer
        term.send("y\n")
        rest = term.expect("Done.")
        assert "✓ mark" in rest and "marked hi" in rest
        assert term.wait() == 0
    finally:
        term.close()
    assert marker(tmp_path) == {"text": "hi"}


@posix_terminal
def test_no_with_a_reason_denies_the_call_and_the_answer_follows(tmp_path: Path) -> None:
    term = start_run(tmp_path)
    try:
        term.expect(QUESTION)
        term.send("n\n")
        term.expect("Reason (optional, Enter for none): ")
        term.send("not today\n")
        rest = term.expect("Done.")
        assert "✗ mark error: The user denied this tool call: not today" in rest
        assert term.wait() == 0
    finally:
        term.close()
    assert marker(tmp_path) is None


@posix_terminal
def test_edit_opens_the_editor_and_the_tool_runs_with_the_edit(tmp_path: Path) -> None:
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR_SCRIPT, encoding="utf-8")
    env = env_without_editor(EDITOR=f"{shlex.quote(sys.executable)} {shlex.quote(str(editor))}")
    term = start_run(tmp_path, env=env)
    try:
        term.expect(QUESTION)
        term.send("e\n")
        rest = term.expect("Done.")
        assert "marked edited" in rest
        assert term.wait() == 0
    finally:
        term.close()
    assert marker(tmp_path) == {"text": "edited"}


@posix_terminal
def test_an_invalid_edit_is_shown_and_asked_again(tmp_path: Path) -> None:
    term = start_run(tmp_path)  # no editor: the arguments are typed at the prompt
    try:
        term.expect(QUESTION)
        term.send("e\n")
        term.expect("json> ")
        term.send("{not json\n")
        term.expect("json> ")
        term.send("\n")  # an empty line ends the edit
        shown = term.expect(QUESTION)
        assert "the edit cannot be used: it is not valid JSON" in shown
        assert '"text": "hi"' in shown  # the question again, with the arguments that would run
        term.send("e\n")
        term.expect("json> ")
        term.send('{"text": 5}\n')  # JSON, but not valid for the tool
        shown = term.expect(QUESTION)
        assert 'the edit cannot be used: Validation failed for tool "mark"' in shown
        assert "Traceback" not in term.output
        term.send("e\n")
        term.expect("json> ")
        term.send('{"text":\n')  # an object may take several lines
        term.expect("json> ")
        term.send('"typed"}\n')
        term.expect("Done.")
        assert term.wait() == 0
    finally:
        term.close()
    assert marker(tmp_path) == {"text": "typed"}


@posix_terminal
@pytest.mark.parametrize(("key", "why"), [("\x04", "the input ended"), ("\x03", "interrupted")])
def test_end_of_input_or_ctrl_c_at_the_question_denies_and_says_so(
    tmp_path: Path, key: str, why: str
) -> None:
    term = start_run(tmp_path)
    try:
        term.expect(QUESTION)
        term.send(key)
        rest = term.expect("Done.")
        assert f"no answer ({why}): denied 1 call waiting for approval" in rest
        assert f'Tool "mark" was not run: no answer ({why}).' in rest
        assert term.wait() == 0
    finally:
        term.close()
    assert marker(tmp_path) is None


def test_yes_approves_without_a_terminal_and_shows_each_call(tmp_path: Path) -> None:
    script = script_file(tmp_path / "replies.json", MARK_THEN_ANSWER)
    mark_tools(tmp_path)
    done = run_cli("run", "Mark", "--model", f"scripted:{script}", "--tools", "tools", "--yes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done.\n"
    assert 'approved (--yes): mark {"text": "hi"}' in done.stderr
    assert QUESTION not in done.stderr
    assert marker(tmp_path) == {"text": "hi"}


def test_without_a_terminal_the_answers_come_from_stdin_and_its_end_denies(tmp_path: Path) -> None:
    script = script_file(tmp_path / "replies.json", MARK_THEN_ANSWER)
    mark_tools(tmp_path)
    args = ("run", "Mark", "--model", f"scripted:{script}", "--tools", "tools")
    done = run_cli(*args, cwd=tmp_path)  # an empty stdin
    assert done.returncode == 0, done.stderr
    assert "no answer (the input ended): denied 1 call" in done.stderr
    assert marker(tmp_path) is None
    done = run_cli(*args, cwd=tmp_path, stdin='e\n{"text": "piped"}\n')  # edit: JSON on stdin
    assert done.returncode == 0, done.stderr
    assert marker(tmp_path) == {"text": "piped"}


def test_two_calls_of_one_id_are_asked_about_apart_and_the_denied_one_never_runs(tmp_path: Path) -> None:
    same_id = [
        {
            "tool_calls": [
                {"name": "mark", "arguments": {"text": "first"}, "id": "call_mark"},
                {"name": "mark", "arguments": {"text": "second"}, "id": "call_mark"},
            ]
        },
        "Done.",
    ]
    script = script_file(tmp_path / "replies.json", same_id)
    mark_tools(tmp_path)
    args = ("run", "Mark", "--model", f"scripted:{script}", "--tools", "tools", "--events", "jsonl")
    done = run_cli(*args, cwd=tmp_path, env=env_without_editor(), stdin="n\ny\n")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(QUESTION) == 2
    assert marker(tmp_path) == {"text": "second"}  # the first, denied, never ran
    events = [json.loads(line) for line in done.stdout.splitlines()]
    decided = [(e["tool_call_id"], e["decision"]) for e in events if e["type"] == "approval_decision"]
    assert decided[0] == ("call_mark", "deny") and decided[1][1] == "approve"
    assert decided[1][0] != "call_mark"
    ended = [(e["tool_call_id"], e["is_error"]) for e in events if e["type"] == "tool_execution_end"]
    assert ended == [("call_mark", True), (decided[1][0], False)]


def test_a_closed_stdin_at_the_question_denies_without_a_traceback(tmp_path: Path) -> None:
    """``yiemagent run --approve ... 0<&-``: nobody can answer, so the call is denied, as at the
    end of the input (input() raised "lost sys.stdin" with a traceback)."""
    script = script_file(tmp_path / "replies.json", MARK_THEN_ANSWER)
    mark_tools(tmp_path)
    done = run_cli(
        "run",
        "Mark",
        "--model",
        f"scripted:{script}",
        "--tools",
        "tools",
        "--approve",
        cwd=tmp_path,
        closed=(0,),
    )
    assert done.returncode == 0, done.stderr
    assert "no answer (the input is closed): denied 1 call" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == "Done.\n"
    assert marker(tmp_path) is None


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_an_edit_nested_too_deep_at_the_prompt_is_refused_and_asked_again(tmp_path: Path, depth: int) -> None:
    script = script_file(tmp_path / "replies.json", MARK_THEN_ANSWER)
    mark_tools(tmp_path)
    deep = '{"text": ' + "[" * depth + "]" * depth + "}"
    done = run_cli(
        "run", "Mark", "--model", f"scripted:{script}", "--tools", "tools",
        cwd=tmp_path, env=env_without_editor(), stdin=f"e\n{deep}\n\nn not that\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert "the edit cannot be used: it is nested too deep (at most 64 levels)" in done.stderr
    assert done.stderr.count(QUESTION) == 2 and marker(tmp_path) is None


def test_approve_asks_about_every_tool_and_events_hold_the_request_and_the_decisions(
    tmp_path: Path,
) -> None:
    replies: list[Any] = [
        {
            "tool_calls": [
                {"name": "echo", "arguments": {"text": "one"}, "id": "call_a"},
                {"name": "echo", "arguments": {"text": "two"}, "id": "call_b"},
            ]
        },
        {"tool_calls": [{"name": "echo", "arguments": {"text": "three"}, "id": "call_c"}]},
        "Done.",
    ]
    script = script_file(tmp_path / "replies.json", replies)
    tools_folder(tmp_path / "tools")
    done = run_cli(
        "run",
        "Echo",
        "--model",
        f"scripted:{script}",
        "--tools",
        "tools",
        "--approve",
        "--events",
        "jsonl",
        cwd=tmp_path,
        stdin='n no thanks\ne\n{"text": "TWO"}\ny\n',
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    requests = [e for e in events if e["type"] == "approval_requested"]
    assert [[p["tool_call_id"] for p in r["pending"]] for r in requests] == [["call_a", "call_b"], ["call_c"]]
    assert requests[0]["pending"][0] == {
        "tool_call_id": "call_a",
        "tool_name": "echo",
        "arguments": {"text": "one"},
    }
    decisions = [
        {k: v for k, v in e.items() if k != "turn"} for e in events if e["type"] == "approval_decision"
    ]
    assert decisions == [
        {
            "type": "approval_decision",
            "tool_call_id": "call_a",
            "tool_name": "echo",
            "decision": "deny",
            "reason": "The user denied this tool call: no thanks",
        },
        {
            "type": "approval_decision",
            "tool_call_id": "call_b",
            "tool_name": "echo",
            "decision": "edit",
            "arguments": {"text": "TWO"},
        },
        {
            "type": "approval_decision",
            "tool_call_id": "call_c",
            "tool_name": "echo",
            "decision": "approve",
            "arguments": {"text": "three"},
        },
    ]
    # Each decision comes after its request and before the resumed run starts.
    first_request, first_decision = kinds.index("approval_requested"), kinds.index("approval_decision")
    assert first_request < first_decision < kinds.index("agent_start", first_decision)
    ends = {e["tool_call_id"]: e for e in events if e["type"] == "tool_execution_end"}
    assert ends["call_a"]["is_error"] and ends["call_a"]["error_kind"] == "denied"
    assert ends["call_b"]["text"] == "TWO" and ends["call_c"]["text"] == "THREE"
    assert events[-1]["type"] == "agent_end" and events[-1]["response"]["stop_reason"] == "stop"


def test_without_approve_a_tool_that_needs_none_runs_unasked(tmp_path: Path) -> None:
    replies: list[Any] = [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, "Done."]
    script = script_file(tmp_path / "replies.json", replies)
    tools_folder(tmp_path / "tools")
    done = run_cli("run", "Echo", "--model", f"scripted:{script}", "--tools", "tools", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert QUESTION not in done.stderr and "✓ echo" in done.stderr


@posix_terminal
def test_chat_asks_then_the_conversation_goes_on(tmp_path: Path) -> None:
    replies: list[Any] = [*MARK_THEN_ANSWER, "Second answer."]
    script = script_file(tmp_path / "replies.json", replies)
    mark_tools(tmp_path)
    term = Terminal(
        "chat", "--model", f"scripted:{script}", "--tools", "tools", cwd=tmp_path, env=env_without_editor()
    )
    try:
        term.expect("you> ")
        term.send("Leave a mark\n")
        assert '"text": "hi"' in term.expect(QUESTION)
        term.send("y\n")
        shown = term.expect("you> ")
        assert "✓ mark" in shown and "Done." in shown
        term.send("And now?\n")
        assert "Second answer." in term.expect("you> ")
        term.send("/exit\n")
        assert term.wait() == 0
    finally:
        term.close()
    assert marker(tmp_path) == {"text": "hi"}

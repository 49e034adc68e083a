"""What the ``yiemagent`` command shows a person at a terminal beyond the answer: a status line
while the model thinks or a tool runs (on a terminal only, erased before other output, never in
a pipe), ``chat``'s messages of several lines (``!multi`` ... ``!end``, and a bracketed paste),
and ``--verbose``, which shows a failing tool's traceback. The real command runs as a subprocess,
on a pseudo-terminal where a terminal is the point."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_helpers import Terminal, clean_env, run_cli, script_file, tools_folder

from yiemagent.agent import load_session

posix_terminal = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
ERASE = "\r\x1b[K"

RAISING_TOOL = """
def report(path):
    raise ValueError("disk full while writing " + path)


def execute(tool_call_id, args, signal, on_partial_result):
    report(args["path"])


def get_tool():
    return AgentTool(name="save", label="Save", description="Save a report.",
                     input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
                     execute=execute)
"""


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    return tools_folder(tmp_path / "tools")


@posix_terminal
def test_run_shows_a_status_line_while_a_tool_runs_and_erases_it(tmp_path: Path, tools: Path) -> None:
    script = script_file(
        tmp_path / "replies.json", [{"tool_calls": [{"name": "waitForAbort", "arguments": {}}]}]
    )
    term = Terminal(
        "run",
        "Wait",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        cwd=tmp_path,
        env=clean_env(TERM="xterm"),
    )
    try:
        term.expect("running waitForAbort ")  # drawn while the tool runs ...
        term.expect(" s")  # ... with how long it has been running
        term.expect("running waitForAbort ")  # and drawn again as the time goes on
        term.send("\x03")
        assert term.wait() == 1
    finally:
        term.close()
    out = term.output
    note = out.index("\naborting the run")
    assert out[:note].rstrip("^C").endswith(ERASE)  # erased before the note was written
    last = out.rindex("running waitForAbort")
    assert ERASE in out[last:]  # and erased for good once the run ended
    assert out.rstrip().endswith("aborted")


@posix_terminal
def test_chat_erases_the_status_before_the_answer_and_the_prompt(tmp_path: Path, tools: Path) -> None:
    script = script_file(
        tmp_path / "replies.json",
        [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, "The echo said HI."],
    )
    term = Terminal(
        "chat",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        cwd=tmp_path,
        env=clean_env(TERM="xterm"),
    )
    try:
        term.expect("you> ")
        term.send("Echo hi\n")
        shown = term.expect("The echo said HI.")
        term.expect("you> ")
        term.send("/exit\n")
        assert term.wait() == 0
    finally:
        term.close()
    assert "thinking " in shown  # the status was on while the model was asked
    # Whatever status was drawn last before the answer, it was erased before the answer.
    assert shown.rindex(ERASE) > shown.rindex("thinking ")


def test_no_status_line_goes_into_a_pipe(tmp_path: Path, tools: Path) -> None:
    script = script_file(
        tmp_path / "replies.json", [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, "Done."]
    )
    done = run_cli(
        "run",
        "Echo hi",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        cwd=tmp_path,
        env=clean_env(TERM="xterm"),
    )
    assert done.returncode == 0, done.stderr
    assert "thinking" not in done.stderr and "\x1b[K" not in done.stderr
    assert done.stdout == "Done.\n"


def _save_after(tmp_path: Path, tools: Path, typed: str) -> list[str]:
    """Type ``typed`` into a chat on a pty, then save; the user messages it received."""
    script = script_file(tmp_path / "replies.json", ["One answer.", "Another answer."])
    saved = tmp_path / "session.json"
    term = Terminal(
        "chat",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        cwd=tmp_path,
        env=clean_env(TERM="xterm"),
    )
    try:
        term.expect("you> ")
        term.send(typed)
        term.expect("One answer.")
        term.expect("you> ")
        term.send(f"/save {saved}\n/exit\n")
        assert term.wait() == 0
    finally:
        term.close()
    return [
        m.content[0].text
        for m in load_session(saved).messages  # type: ignore[union-attr]
        if m.role == "user"
    ]


@posix_terminal
def test_a_pasted_block_of_lines_is_one_message(tmp_path: Path, tools: Path) -> None:
    paste = "\x1b[200~Dear boss,\nmay I have Friday off?\nThanks\x1b[201~\n"
    assert _save_after(tmp_path, tools, paste) == ["Dear boss,\nmay I have Friday off?\nThanks"]


@posix_terminal
def test_multi_and_end_make_one_message_of_several_lines(tmp_path: Path, tools: Path) -> None:
    typed = "!multi\nfirst line\n\nthird line\n!end\n"
    assert _save_after(tmp_path, tools, typed) == ["first line\n\nthird line"]


def test_multi_from_a_pipe_is_one_message_too(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ["Got it."])
    saved = tmp_path / "session.json"
    done = run_cli(
        "chat",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        cwd=tmp_path,
        stdin=f"!multi\nline one\nline two\n!end\n/save {saved}\n",
    )
    assert done.returncode == 0, done.stderr
    [user] = [m for m in load_session(saved).messages if m.role == "user"]
    assert user.content[0].text == "line one\nline two"  # type: ignore[union-attr]


def test_verbose_shows_a_failing_tools_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "save.py").write_text(RAISING_TOOL, encoding="utf-8")
    script = script_file(
        tmp_path / "replies.json",
        [{"tool_calls": [{"name": "save", "arguments": {"path": "/tmp/r.txt"}}]}, "Sorry."],
    )
    args = ["run", "Save it", "--model", f"scripted:{script}", "--tools", str(folder)]
    quiet = run_cli(*args, cwd=tmp_path)
    verbose = run_cli(*args, "--verbose", cwd=tmp_path)
    assert quiet.returncode == verbose.returncode == 0
    assert "Traceback" not in quiet.stderr
    assert 'Tool "save" raised (call' in verbose.stderr
    assert "Traceback (most recent call last)" in verbose.stderr
    assert "in report" in verbose.stderr
    assert "ValueError: disk full while writing /tmp/r.txt" in verbose.stderr
    assert verbose.stdout == quiet.stdout == "Sorry.\n"

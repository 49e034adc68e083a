"""The ``yiemagent`` command, run as a real subprocess: ``run`` (answer, ``--json``, events as JSON
lines, exit status), ``tools`` (listing, ``--check``), the message when no model is available,
and ``chat`` on a pseudo-terminal (slash commands, a question, ``/save``, Ctrl-C).
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import (
    NO_XLLAMACPP,
    Terminal,
    clean_env,
    run_cli,
    script_file,
    tools_folder,
)
from paths import ROOT

from yiemagent import AssistantMessage
from yiemagent.agent import load_session

# Pseudo-terminals and Ctrl-C as SIGINT are POSIX only; the other tests run anywhere.
posix_terminal = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")

ECHO_THEN_ANSWER = [
    {"text": "Let me echo that.", "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
    "The echo said HI.",
]


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    return tools_folder(tmp_path / "tools")


def events_of(stdout: str) -> list[dict[str, Any]]:
    """Every line of ``stdout`` parsed as JSON (each must parse)."""
    return [json.loads(line) for line in stdout.splitlines()]


# -- run --------------------------------------------------------------------------------------


def test_run_prints_the_answer_on_stdout_and_tool_activity_on_stderr(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ECHO_THEN_ANSWER)
    done = run_cli("run", "Echo hi", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The echo said HI.\n"
    assert 'echo {"text": "hi"}' in done.stderr
    assert "echoing hi" in done.stderr  # the progress report
    assert "echo (" in done.stderr and "HI" in done.stderr  # the end, with its duration


def test_run_events_jsonl_is_every_event_in_order(tmp_path: Path, tools: Path) -> None:
    replies = [
        {
            "tool_calls": [
                {"name": "echo", "arguments": {"text": "a"}},
                {"name": "echo", "arguments": {"text": "b"}},
            ]
        },
        *ECHO_THEN_ANSWER,
    ]
    script = script_file(tmp_path / "replies.json", replies)
    done = run_cli(
        "run",
        "Echo",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        "--events",
        "jsonl",
        "--parallel",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    events = events_of(done.stdout)
    types = [e["type"] for e in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert types.count("agent_start") == 1 and types.count("agent_end") == 1
    assert [e["turn"] for e in events if e["type"] == "turn_start"] == [1, 2, 3]
    assert all(isinstance(e["turn"], int) for e in events)
    starts = {e["tool_call_id"]: i for i, e in enumerate(events) if e["type"] == "tool_execution_start"}
    ends = {e["tool_call_id"]: i for i, e in enumerate(events) if e["type"] == "tool_execution_end"}
    updates = [(e["tool_call_id"], i) for i, e in enumerate(events) if e["type"] == "tool_execution_update"]
    assert starts.keys() == ends.keys() and len(starts) == 3
    assert all(starts[cid] < ends[cid] for cid in starts)
    assert all(starts[cid] < i < ends[cid] for cid, i in updates) and len(updates) == 3
    first = next(e for e in events if e["type"] == "tool_execution_start")
    assert first == {
        "type": "tool_execution_start",
        "turn": 1,
        "tool_call_id": "call_1_1",
        "tool_name": "echo",
        "arguments": {"text": "a"},
    }
    end = next(e for e in events if e["type"] == "tool_execution_end" and e["turn"] == 2)
    assert end["result"]["content"] == [{"type": "text", "text": "HI"}] and not end["is_error"]
    streamed = "".join(e["delta"] for e in events if e["type"] == "message_update" and e["turn"] == 3)
    assert streamed == "The echo said HI."
    last = AssistantMessage.from_dict(events[-1]["messages"][-1])
    assert isinstance(last, AssistantMessage) and last.stop_reason == "stop"


def test_run_events_file_keeps_the_answer_on_stdout(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ECHO_THEN_ANSWER)
    log = tmp_path / "events.jsonl"
    done = run_cli(
        "run",
        "Echo hi",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        "--events-file",
        str(log),
        "--quiet",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The echo said HI.\n" and done.stderr == ""
    events = events_of(log.read_text(encoding="utf-8"))
    assert events[0]["type"] == "agent_start" and events[-1]["type"] == "agent_end"


def test_run_json_prints_the_final_message(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ["Hello there."])
    done = run_cli(
        "run", "Hi", "--model", f"scripted:{script}", "--tools", str(tools), "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    message = AssistantMessage.from_dict(json.loads(done.stdout))
    assert isinstance(message, AssistantMessage)
    assert message.content[0].to_dict() == {"type": "text", "text": "Hello there."}  # type: ignore[union-attr]


def test_run_exits_1_when_the_run_ends_in_an_error(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ECHO_THEN_ANSWER[:1])  # no final answer
    done = run_cli("run", "Echo hi", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "error:" in done.stderr and "no reply left" in done.stderr


def test_run_exits_1_when_the_turns_run_out(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ECHO_THEN_ANSWER)
    done = run_cli(
        "run",
        "Echo hi",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        "--max-turns",
        "1",
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "--max-turns" in done.stderr


def test_run_reads_the_prompt_from_stdin(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ["Read it."])
    done = run_cli(
        "run",
        "-",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        "--json",
        cwd=tmp_path,
        stdin="a long prompt\n",
    )
    assert done.returncode == 0, done.stderr


@posix_terminal
def test_run_ctrl_c_aborts_the_run_and_exits_1(tmp_path: Path, tools: Path) -> None:
    script = script_file(
        tmp_path / "replies.json", [{"tool_calls": [{"name": "waitForAbort", "arguments": {}}]}]
    )
    term = Terminal(
        "run", "Wait", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, env=clean_env()
    )
    try:
        term.expect("waiting for an abort")
        term.send("\x03")
        assert term.wait() == 1
        assert "aborting the run" in term.output and term.output.rstrip().endswith("aborted")
    finally:
        term.close()


@posix_terminal
def test_sigterm_stops_the_run_and_cleans_up(tmp_path: Path) -> None:
    """A terminated command (SIGTERM, or SIGHUP from a closed terminal) still aborts its run
    and removes its temporary copy of the example tools."""
    script = script_file(
        tmp_path / "replies.json",
        [
            {
                "tool_calls": [
                    {
                        "name": "writeTool",
                        "arguments": {
                            "name": "waitForAbort",
                            "label": "Wait",
                            "description": "Wait for the abort.",
                            "inputSchema": {"type": "object"},
                            "executeCode": "on_partial_result('waiting for an abort')\nsignal.wait(120)\n"
                            "return 'stopped'",
                        },
                    }
                ]
            },
            {"tool_calls": [{"name": "waitForAbort", "arguments": {}}]},
        ],
    )
    temp = tmp_path / "temp"
    temp.mkdir()
    term = Terminal(
        "run",
        "Wait",
        "--model",
        f"scripted:{script}",
        "--allow-write-tool",
        "--yes",
        cwd=tmp_path,
        env=clean_env(TMPDIR=str(temp)),
    )
    try:
        term.expect("waiting for an abort")  # the model wrote a tool into the copy and runs it
        assert len(list(temp.iterdir())) == 1
        term.proc.send_signal(signal.SIGTERM)
        assert term.wait() == 128 + signal.SIGTERM
    finally:
        term.close()
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--json", "--events", "jsonl"], "--events-file"),
        (["--max-turns", "0"], "--max-turns"),
        (["--base-url", "http://localhost:1/v1"], "--base-url does not apply"),
    ],
)
def test_run_refuses_bad_options_with_exit_2(tmp_path: Path, tools: Path, args: list[str], says: str) -> None:
    script = script_file(tmp_path / "replies.json", ["x"])
    done = run_cli("run", "Hi", "--model", f"scripted:{script}", "--tools", str(tools), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr


def test_a_bad_script_file_is_named_with_what_is_wrong(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", [{"tool_call": "echo"}])
    done = run_cli("run", "Hi", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path)
    assert done.returncode == 2
    assert "replies.json" in done.stderr and "reply 1" in done.stderr and "'tool_call'" in done.stderr


def test_a_provider_without_its_key_says_which_variable_to_set(tmp_path: Path, tools: Path) -> None:
    done = run_cli("run", "Hi", "--model", "openai:gpt-4o-mini", "--tools", str(tools), cwd=tmp_path)
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr and "Traceback" not in done.stderr


def test_without_any_model_it_says_how_to_get_one(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "xllamacpp.py").write_text(NO_XLLAMACPP, encoding="utf-8")
    env = clean_env(PYTHONPATH=str(shim))
    for command in (["run", "Hi"], ["chat"]):
        done = run_cli(*command, cwd=tmp_path, env=env)
        assert done.returncode == 2, done.stderr
        assert "pip install 'yiemagent[local]'" in done.stderr and "CMAKE_ARGS" not in done.stderr
        assert "--model openai:gpt-4o-mini" in done.stderr and "OPENAI_API_KEY" in done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""


# -- tools ------------------------------------------------------------------------------------


def test_tools_lists_each_tool_with_its_schema(tmp_path: Path, tools: Path) -> None:
    done = run_cli("tools", str(tools), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = {t["name"]: t for t in json.loads(done.stdout)}
    assert list(listed) == ["echo", "waitForAbort", "listTools"]
    assert listed["echo"]["input_schema"]["required"] == ["text"]
    assert listed["echo"]["file"].endswith("echo.py") and listed["listTools"]["file"] is None
    text = run_cli("tools", "--tools", str(tools), cwd=tmp_path)
    assert text.returncode == 0 and '"required": [' in text.stdout and "echo: Echo" in text.stdout


def test_tools_defaults_to_the_example_tools(tmp_path: Path) -> None:
    done = run_cli("tools", "--check", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok: 3 tool files loaded from ")


def test_tools_says_run_and_chat_offer_the_example_write_tool_only_with_its_flag(tmp_path: Path) -> None:
    """The example writeTool is listed, but run and chat leave it out unless
    --allow-write-tool is given: its line (and its JSON entry) says so, and no other does."""
    text = run_cli("tools", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    heads = {line.split(":")[0]: line for line in text.stdout.splitlines() if line[:1].isalpha()}
    assert heads["writeTool"] == (
        "writeTool: Write Tool  (writeTool.py; run and chat offer it only with --allow-write-tool, "
        "and ask before each call)"
    )
    assert all("--allow-write-tool" not in line for name, line in heads.items() if name != "writeTool")
    listed = {t["name"]: t for t in json.loads(run_cli("tools", "--json", cwd=tmp_path).stdout)}
    assert listed["writeTool"]["offered_only_with"] == "--allow-write-tool"
    assert [n for n, t in listed.items() if "offered_only_with" in t] == ["writeTool"]
    # A folder the user names is offered as it is: its writeTool needs no flag.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "writeTool.py").write_bytes((ROOT / "tools" / "writeTool.py").read_bytes())
    own = json.loads(run_cli("tools", "mine", "--json", cwd=tmp_path).stdout)
    assert next(t for t in own if t["name"] == "writeTool").get("offered_only_with") is None


def test_tools_check_names_each_broken_file_and_line(tmp_path: Path, tools: Path) -> None:
    (tools / "broken.py").write_text("x = 1\n\ndef get_tool(:\n    pass\n", encoding="utf-8")
    (tools / "raises.py").write_text("import os\nraise RuntimeError('boom')\n", encoding="utf-8")
    (tools / "empty.py").write_text("x = 1\n", encoding="utf-8")
    done = run_cli("tools", "tools", "--check", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    # paths relative to the working folder (the test's tmp_path), as a person would type them
    assert "tools/broken.py:3: syntax error at line 3: invalid syntax: def get_tool(:" in lines
    assert any(line.startswith("tools/raises.py:2: RuntimeError") and "boom" in line for line in lines)
    assert any(line.startswith("tools/empty.py: defines no get_tool()") for line in lines)
    assert lines[-1] == "3 files with problems; 2 tool files loaded from tools"


def test_tools_of_a_missing_folder_is_exit_2(tmp_path: Path) -> None:
    done = run_cli("tools", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert done.returncode == 2 and "nowhere" in done.stderr and "Traceback" not in done.stderr


# -- chat -------------------------------------------------------------------------------------


@posix_terminal
def test_chat_on_a_terminal(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ECHO_THEN_ANSWER)
    saved = tmp_path / "session.json"
    term = Terminal(
        "chat", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, env=clean_env()
    )
    try:
        term.expect("you> ")
        term.send("/tools\n")
        shown = term.expect("you> ")
        assert "echo: Echo" in shown and "waitForAbort" in shown and "listTools" in shown
        term.send("Please echo hi\n")
        shown = term.expect("The echo said HI.")
        assert "Let me echo that." in shown
        assert 'echo {"text": "hi"}' in shown and "echoing hi" in shown and ": HI" in shown
        term.expect("you> ")
        term.send(f"/save {saved}\n")
        assert "saved 4 messages" in term.expect("you> ")
        term.send("/exit\n")
        assert term.wait() == 0
    finally:
        term.close()
    messages = load_session(saved).messages
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"]


@posix_terminal
def test_chat_ctrl_c_aborts_the_answer_not_the_session(tmp_path: Path, tools: Path) -> None:
    script = script_file(
        tmp_path / "replies.json",
        [
            {"tool_calls": [{"name": "waitForAbort", "arguments": {}}]},
            "Still here.",
        ],
    )
    term = Terminal(
        "chat", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, env=clean_env()
    )
    try:
        term.expect("you> ")
        term.send("Wait\n")
        term.expect("waiting for an abort")  # the tool runs and blocks until the abort
        term.send("\x03")
        shown = term.expect("you> ")
        assert "stopping the answer" in shown and "aborted" in shown
        assert "waitForAbort" in shown and "stopped" in shown  # the tool saw the abort
        term.send("Are you there?\n")
        assert "Still here." in term.expect("you> ")
        term.send("\x04")  # Ctrl-D at the prompt ends the session
        assert term.wait() == 0
    finally:
        term.close()


def test_chat_load_continues_a_saved_conversation(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ["First answer.", "Second answer."])
    saved = tmp_path / "saved.json"
    lines = f"Hello\n/save {saved}\n/reset\n/load {saved}\nAgain\n/save {saved}\n/exit\n"
    done = run_cli("chat", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, stdin=lines)
    assert done.returncode == 0, done.stderr
    assert "loaded 2 messages" in done.stdout and "Second answer." in done.stdout
    assert len(load_session(saved).messages) == 4


# -- packaging --------------------------------------------------------------------------------


def test_the_example_tools_ship_inside_the_package() -> None:
    """tools/ is installed as yiemagent/example_tools/ (one copy in the repository, so the two
    cannot drift), and the command finds it there outside a checkout."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    root = ROOT
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    assert "yiemagent.example_tools" in setuptools["packages"]
    assert setuptools["package-dir"]["yiemagent.example_tools"] == "tools"
    assert config["project"]["scripts"]["yiemagent"] == "yiemagent.cli:main"
    from yiemagent.cli._session import example_tools_folder

    assert example_tools_folder().resolve() in (
        (root / "tools").resolve(),
        (root / "yiemagent" / "example_tools").resolve(),
    )


HOSTILE_ANSWER = "Hello \x1b[2J\x1b]0;owned\x07world.\r Bye."


@posix_terminal
def test_run_prints_a_models_escape_sequences_to_a_terminal_as_text_only(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", [HOSTILE_ANSWER])
    term = Terminal(
        "run",
        "Hi",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        "-q",
        cwd=tmp_path,
        env=clean_env(),
    )
    try:
        assert term.wait() == 0
    finally:
        term.close()
    assert "Hello world. Bye." in term.output and "\x1b" not in term.output


def test_run_keeps_the_answer_exact_in_a_pipe(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", [HOSTILE_ANSWER])
    done = run_cli("run", "Hi", "--model", f"scripted:{script}", "--tools", str(tools), "-q", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == HOSTILE_ANSWER + "\n"

"""The ``yiemagent`` command given hostile input, run as a real subprocess: bad scripted replies,
tool folders that would run scripts, closed or endless standard streams, outputs that fail, and
tools that print while the events go to stdout. Every case ends with a one-line message and the
exit status of the CLI's convention (2: cannot start as asked, 1: the run or its output failed),
never a traceback.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import ECHO_TOOL, WAIT, clean_env, run_cli, script_file, tools_folder

from yiemagent.cli import _chat
from yiemagent.cli._render import Renderer
from yiemagent.errors import CliError

posix = pytest.mark.skipif(sys.platform == "win32", reason="closed descriptors, FIFOs, rlimits")
MEMORY = 2**30  # the address space a command that could read without end gets in these tests

# A file that leaves a mark when it runs: what loading a folder that holds it must not do.
TRAP = """
from pathlib import Path
Path(__file__).with_name("I_RAN").write_text("the script ran")
"""

# A tool that prints in every way a tool can: print(), its descriptor 1, and a child process.
NOISY_TOOL = """
import os, subprocess, sys

print("noisy tool file loaded")


def execute(tool_call_id, args, signal, on_partial_result):
    text = args["text"]
    print("print from " + text)
    os.write(1, ("fd 1 from " + text + "\\n").encode())
    subprocess.run([sys.executable, "-c", "import sys; print('child of ' + sys.argv[1])", text],
                   check=True)
    return AgentToolResult(text.upper())


def get_tool():
    return AgentTool(
        name="noisy", label="Noisy", description="Print, then answer in capitals.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}},
                      "required": ["text"]},
        execute=execute, parallel_tool_execute=True,
    )
"""

# A tool that returns once someone has opened its FIFO ("gate") for writing and closed it.
GATE_TOOL = """
def execute(tool_call_id, args, signal, on_partial_result):
    with open(args["gate"], encoding="utf-8") as gate:
        gate.read()
    return AgentToolResult("through the gate")


def get_tool():
    return AgentTool(
        name="gate", label="Gate", description="Wait at a FIFO.",
        input_schema={"type": "object", "properties": {"gate": {"type": "string"}}},
        execute=execute,
    )
"""

ANSWER = ["The answer."]


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    return tools_folder(tmp_path / "tools")


def assert_refused_unread(stderr: str, kind: str) -> None:
    """The message refuses the script for what it is (a device or FIFO, which would never end),
    before reading it: not for running out of memory."""
    assert "MemoryError" not in stderr, stderr
    assert f"it is {kind}, not a regular file" in stderr, stderr


def assert_one_line_error(done: subprocess.CompletedProcess[str], status: int, *says: str) -> None:
    """The command ended with ``status`` and exactly one ``yiemagent: error:`` line on stderr,
    holding each of ``says``; nothing on stdout, no traceback."""
    assert done.returncode == status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("yiemagent: error: "), done.stderr
    for text in says:
        assert text in lines[0], (text, lines[0])
    assert done.stdout == ""


# -- scripted replies -----------------------------------------------------------------------

MESSAGE = '{"role": "assistant", "content": [{"type": "text", "text": "x"}]'
BAD_SCRIPTS = {
    "timestamp 1e400": f'[{MESSAGE}, "timestamp": 1e400}}]',
    "timestamp -1e400": f'[{MESSAGE}, "timestamp": -1e400}}]',
    "timestamp a word": f'[{MESSAGE}, "timestamp": "noon"}}]',
    "timestamp 5000 digits": f'[{MESSAGE}, "timestamp": {"9" * 5000}}}]',
    "content a number": '[{"role": "assistant", "content": 5}]',
    "content a list of numbers": '[{"role": "assistant", "content": [5]}]',
    "usage a string": f'[{MESSAGE}, "usage": "lots"}}]',
    "role user": '[{"role": "user", "content": "x"}]',
    "tool_calls a string": '[{"tool_calls": "echo"}]',
    "tool call without a name": '[{"tool_calls": [{"arguments": {}}]}]',
    "unknown shorthand key": '[{"tool_call": "echo"}]',
    "a reply that is a number": "[5]",
    "NaN": "[NaN]",
    "nested 100,000 deep": "[" * 100_000 + "]" * 100_000,
    "not JSON": "[{",
    "empty": "",
    "an object without replies": '{"answers": []}',
    "replies not a list": '{"replies": 5}',
    "a broken session": '{"format": "yiemagent.session", "version": 1, "messages": 5}',
}


@pytest.mark.parametrize("case", list(BAD_SCRIPTS))
def test_a_bad_scripted_reply_is_one_line_and_exit_2(tmp_path: Path, tools: Path, case: str) -> None:
    script = tmp_path / "replies.json"
    script.write_text(BAD_SCRIPTS[case], encoding="utf-8")
    done = run_cli("run", "Hi", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path)
    assert_one_line_error(done, 2, f"--model scripted:{script}")


def test_a_script_that_is_not_utf8_is_one_line_and_exit_2(tmp_path: Path, tools: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_bytes(b'["caf\xe9"]')
    done = run_cli("run", "Hi", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path)
    assert_one_line_error(done, 2, f"--model scripted:{script}")


@posix
def test_an_endless_script_device_is_refused_unread(tmp_path: Path, tools: Path) -> None:
    """``ScriptedModel.from_file`` reads only regular files: ``/dev/zero`` would never end."""
    done = run_cli(
        "run", "Hi", "--model", "scripted:/dev/zero", "--tools", str(tools), cwd=tmp_path, memory_limit=MEMORY
    )
    assert_one_line_error(done, 2, "--model scripted:/dev/zero")
    assert_refused_unread(done.stderr, "a character device")


@posix
def test_a_fifo_that_never_ends_is_refused(tmp_path: Path, tools: Path) -> None:
    """A writer that never stops, behind a FIFO: the command refuses the FIFO without reading
    it, and says why."""
    fifo = tmp_path / "replies.json"
    os.mkfifo(fifo)
    writer = threading.Thread(target=_write_for_ever, args=(fifo,), daemon=True)
    writer.start()
    try:
        done = run_cli(
            "run",
            "Hi",
            "--model",
            f"scripted:{fifo}",
            "--tools",
            str(tools),
            cwd=tmp_path,
            memory_limit=MEMORY,
        )
    finally:
        # If the command never opened the FIFO, open it here, so that the writer's open returns
        # and its next write fails: the thread ends either way.
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(WAIT)
    assert_one_line_error(done, 2, f"--model scripted:{fifo}")
    assert_refused_unread(done.stderr, "a FIFO (named pipe)")


def _write_for_ever(fifo: Path) -> None:
    """Write JSON-looking text into ``fifo`` until its reader goes away."""
    chunk = b"[" + b'"x", ' * 10_000
    try:
        with open(fifo, "wb") as stream:
            while True:
                stream.write(chunk)
    except OSError:  # the reader closed it: BrokenPipeError
        pass


# -- tool folders -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["run", "Hi"], ["chat"], ["tools"], ["tools", "--check"]])
def test_an_empty_tools_path_is_refused_and_runs_nothing(tmp_path: Path, command: list[str]) -> None:
    """``--tools "$DIR"`` with DIR unset is ``--tools ""``: the working folder, whose scripts
    loading would run."""
    (tmp_path / "trap.py").write_text(TRAP, encoding="utf-8")
    script = script_file(tmp_path / "replies.json", ANSWER)
    model = ["--model", f"scripted:{script}"] if command[0] != "tools" else []
    for how in (["--tools", ""], [""] if command[0] == "tools" else ["--tools", "  "]):
        done = run_cli(*command, *model, *how, cwd=tmp_path)
        assert_one_line_error(done, 2, "path is empty", "unset variable")
        assert not (tmp_path / "I_RAN").exists()


@pytest.mark.parametrize("command", [["run", "Hi"], ["tools", "--check"]])
def test_a_folder_of_scripts_without_tool_files_is_refused_and_runs_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    """A home or project folder given by mistake: none of its .py files is a tool file."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "trap.py").write_text(TRAP, encoding="utf-8")
    (scripts / "notes.txt").write_text("get_tool", encoding="utf-8")  # not a .py file
    script = script_file(tmp_path / "replies.json", ANSWER)
    model = ["--model", f"scripted:{script}"] if command[0] == "run" else []
    done = run_cli(*command, *model, "--tools", "scripts", cwd=tmp_path)
    assert_one_line_error(done, 2, "'scripts' holds no tool files", "defines get_tool()", "none was run")
    assert not (scripts / "I_RAN").exists()


def test_a_folder_with_a_tool_file_or_no_python_file_still_loads(tmp_path: Path) -> None:
    """What is not refused: a folder with a tool file, and one that runs nothing."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "echo.py").write_text(ECHO_TOOL, encoding="utf-8")
    done = run_cli("tools", "--check", str(folder), cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "ok: 1 tool file loaded from mine\n"
    (tmp_path / "empty").mkdir()
    script = script_file(tmp_path / "replies.json", ANSWER)
    done = run_cli("run", "Hi", "--model", f"scripted:{script}", "--tools", "empty", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "The answer.\n"


# -- stdin ------------------------------------------------------------------------------------


def test_run_dash_with_an_empty_stdin_says_the_prompt_is_empty(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    done = run_cli("run", "-", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path)
    assert_one_line_error(done, 2, "the prompt is empty")


@posix
def test_run_dash_with_stdin_closed_says_so(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    done = run_cli(
        "run", "-", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, closed=[0]
    )
    assert_one_line_error(done, 2, "stdin is closed", "give the prompt as an argument")


def test_run_dash_with_a_prompt_that_is_not_text(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    done = run_cli(
        "run", "-", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, stdin=b"caf\xff\n"
    )
    assert_one_line_error(done, 2, "the prompt on stdin is not utf-8 text")


@posix
def test_run_dash_with_an_endless_stdin_stops_at_the_limit(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "yiemagent",
                "run",
                "-",
                "--model",
                f"scripted:{script}",
                "--tools",
                str(tools),
            ],
            cwd=tmp_path,
            env=clean_env(),
            stdin=zero,
            capture_output=True,
            text=True,
            timeout=WAIT,
            preexec_fn=lambda: _limit_memory(MEMORY),
        )
    assert_one_line_error(done, 2, "the prompt on stdin is longer than 16777216 characters")


def _limit_memory(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@posix
def test_chat_with_stdin_closed_says_so(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    done = run_cli("chat", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, closed=[0])
    assert_one_line_error(done, 2, "stdin is closed", "chat reads your messages")


def test_chat_with_an_empty_stdin_ends_cleanly(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    done = run_cli("chat", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("yiemagent chat") and done.stdout.endswith("you> \n")


def test_chat_survives_lines_and_commands_it_cannot_use(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    lines = b"caf\xff\n/save a\x00b\n/load /dev/null\n/load .\n/exit\n"
    done = run_cli("chat", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, stdin=lines)
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stderr
    assert "The answer." in done.stdout  # the line that was not UTF-8 was sent, repaired
    assert "cannot save to 'a\\x00b': embedded null byte" in done.stdout
    assert "cannot load '/dev/null': /dev/null: not a file" in done.stdout
    assert "cannot load '.': .: not a file" in done.stdout


# -- stdout and stderr ------------------------------------------------------------------------


@posix
@pytest.mark.parametrize("command", [["run", "Hi"], ["chat"], ["tools"]])
def test_a_closed_stdout_is_refused_before_anything_runs(
    tmp_path: Path, tools: Path, command: list[str]
) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    model = ["--model", f"scripted:{script}"] if command[0] != "tools" else []
    done = run_cli(*command, *model, "--tools", str(tools), cwd=tmp_path, closed=[1])
    assert_one_line_error(done, 2, "stdout is closed", "redirect it")


@posix
def test_a_closed_stderr_loses_only_the_tool_activity(tmp_path: Path, tools: Path) -> None:
    script = script_file(
        tmp_path / "replies.json", [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, *ANSWER]
    )
    done = run_cli(
        "run", "Echo", "--model", f"scripted:{script}", "--tools", str(tools), cwd=tmp_path, closed=[2]
    )
    assert done.returncode == 0 and done.stdout == "The answer.\n"
    refused = run_cli("run", "", "--tools", str(tools), cwd=tmp_path, closed=[2])
    assert refused.returncode == 2 and refused.stdout == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_exit_1_with_a_message(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    done = run_cli(
        "run",
        "Hi",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        "--events-file",
        "/dev/full",
        "--quiet",
        cwd=tmp_path,
    )
    assert done.returncode == 1 and done.stdout == "The answer.\n"
    assert done.stderr == (
        "yiemagent: error: the events could not all be written to "
        "--events-file /dev/full: No space left on device\n"
    )
    with open("/dev/full", "w") as full:
        answer = subprocess.run(
            [
                sys.executable,
                "-m",
                "yiemagent",
                "run",
                "Hi",
                "--model",
                f"scripted:{script}",
                "--tools",
                str(tools),
                "--quiet",
            ],
            cwd=tmp_path,
            env=clean_env(),
            stdout=full,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=WAIT,
        )
    assert answer.returncode == 1
    assert answer.stderr == (
        "yiemagent: error: the answer could not be written to stdout: No space left on device\n"
    )


def test_an_empty_events_file_name_is_refused(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ANSWER)
    done = run_cli(
        "run", "Hi", "--model", f"scripted:{script}", "--tools", str(tools), "--events-file", "", cwd=tmp_path
    )
    assert_one_line_error(done, 2, "--events-file is empty")


# -- what tools print -------------------------------------------------------------------------

NOISY_CALLS = [
    {
        "tool_calls": [
            {"name": "noisy", "arguments": {"text": "a"}},
            {"name": "noisy", "arguments": {"text": "b"}},
        ]
    },
    "Both printed.",
]


@pytest.fixture
def noisy(tmp_path: Path) -> Path:
    folder = tmp_path / "noisy"
    folder.mkdir()
    (folder / "noisy.py").write_text(NOISY_TOOL, encoding="utf-8")
    return folder


def assert_printed_on_stderr(stderr: str) -> None:
    """Everything the noisy tool printed, for both calls, is on stderr (the two calls run at
    once, so their pieces may interleave)."""
    assert "noisy tool file loaded" in stderr
    for text in ("a", "b"):
        for how in ("print from", "fd 1 from", "child of"):
            assert f"{how} {text}" in stderr, (how, text, stderr)


def test_events_on_stdout_stay_json_while_parallel_tools_print(tmp_path: Path, noisy: Path) -> None:
    script = script_file(tmp_path / "replies.json", NOISY_CALLS)
    done = run_cli(
        "run",
        "Print",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(noisy),
        "--events",
        "jsonl",
        "--parallel",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    events: list[dict[str, Any]] = [json.loads(line) for line in done.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end"  # nothing of the CLI's lost
    assert types.count("tool_execution_end") == 2
    assert_printed_on_stderr(done.stderr)


def test_the_answer_alone_is_on_stdout_while_tools_print(tmp_path: Path, noisy: Path) -> None:
    script = script_file(tmp_path / "replies.json", NOISY_CALLS)
    log = tmp_path / "events.jsonl"
    for extra in ([], ["--events-file", str(log)]):
        done = run_cli(
            "run",
            "Print",
            "--model",
            f"scripted:{script}",
            "--tools",
            str(noisy),
            "--parallel",
            *extra,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == "Both printed.\n"
        assert_printed_on_stderr(done.stderr)
    assert all(json.loads(line) for line in log.read_text(encoding="utf-8").splitlines())


@posix
def test_events_file_dev_stdout_is_still_the_real_stdout(tmp_path: Path, noisy: Path) -> None:
    """``--events-file /dev/stdout`` is opened before the tools' output moves to stderr."""
    script = script_file(tmp_path / "replies.json", NOISY_CALLS)
    done = run_cli(
        "run",
        "Print",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(noisy),
        "--events-file",
        "/dev/stdout",
        "--quiet",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    *events, answer = done.stdout.splitlines()
    assert [json.loads(line)["type"] for line in events][-1] == "agent_end"
    assert answer == "Both printed."
    assert_printed_on_stderr(done.stderr)


def test_tools_json_stays_json_while_tool_files_print_as_they_load(tmp_path: Path, noisy: Path) -> None:
    done = run_cli("tools", str(noisy), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [t["name"] for t in json.loads(done.stdout)] == ["noisy", "listTools"]
    assert "noisy tool file loaded" in done.stderr


@posix
def test_a_reader_that_goes_away_ends_the_run_quietly_with_exit_1(tmp_path: Path) -> None:
    """``yiemagent run ... --events jsonl | head``: the events after the reader left cannot be
    written; the command ends with status 1 and says nothing about it (a regression guard for
    the stdout plumbing: this already held before the tools' output moved to stderr)."""
    folder = tmp_path / "gate"
    folder.mkdir()
    (folder / "gate.py").write_text(GATE_TOOL, encoding="utf-8")
    gate = tmp_path / "gate.fifo"
    os.mkfifo(gate)
    script = script_file(
        tmp_path / "replies.json",
        [{"tool_calls": [{"name": "gate", "arguments": {"gate": str(gate)}}]}, *ANSWER],
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "yiemagent",
            "run",
            "Go",
            "--model",
            f"scripted:{script}",
            "--tools",
            str(folder),
            "--events",
            "jsonl",
            "--quiet",
        ],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # up to the tool's start: it now waits at the gate
            if json.loads(line)["type"] == "tool_execution_start":
                break
        proc.stdout.close()  # the reader goes away
        opener = threading.Thread(target=lambda: os.close(os.open(gate, os.O_WRONLY)), daemon=True)
        opener.start()  # opening the FIFO lets the tool return; the next event meets no reader
        opener.join(WAIT)
        _, stderr = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
    assert proc.returncode == 1
    assert stderr == b""


def test_chat_whose_input_breaks_mid_session_ends_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal that goes away (``input()`` raising EIO) ends the chat with exit 1 and one
    message saying why, never a traceback."""

    def broken(_prompt: str) -> str:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("builtins.input", broken)
    with pytest.raises(CliError) as info:
        _chat._converse(session=None, renderer=Renderer(io.StringIO(), color=False))  # type: ignore[arg-type]
    assert info.value.exit_code == 1
    assert str(info.value) == "chat could not read its input any more (OSError: [Errno 5] Input/output error)"


def test_a_command_that_cannot_start_leaves_its_events_file_alone(tmp_path: Path, tools: Path) -> None:
    """The model is chosen before the events file is opened, so a bad ``--model`` does not
    truncate the events a previous run wrote there."""
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "agent_start"}\n', encoding="utf-8")
    done = run_cli(
        "run", "Hi", "--model", "nonsense", "--tools", str(tools), "--events-file", str(events), cwd=tmp_path
    )
    assert done.returncode == 2 and "cannot read LLM spec 'nonsense'" in done.stderr
    assert events.read_text(encoding="utf-8") == '{"type": "agent_start"}\n'
    script = script_file(tmp_path / "replies.json", ANSWER)  # and one that runs starts it afresh
    done = run_cli(
        "run",
        "Hi",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        "--events-file",
        str(events),
        cwd=tmp_path,
    )
    written = [json.loads(line)["type"] for line in events.read_text(encoding="utf-8").splitlines()]
    assert done.returncode == 0 and written[0] == "agent_start" and written.count("agent_start") == 1

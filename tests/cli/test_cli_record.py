"""``--record CASSETTE`` and ``--model replay:CASSETTE`` on the ``yiemagent`` command, run as a real
subprocess: a recorded run replays to the same output with no model, a changed run is named at the
field that changed, and every bad path or cassette is an exit-2 message, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import clean_env, run_cli, script_file, tools_folder

from yiemagent.testing import read_cassette


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    return tools_folder(tmp_path / "tools")


@pytest.fixture
def cassette(tmp_path: Path, tools: Path) -> Path:
    """A run of ``Echo hi`` recorded from a scripted model: a call of echo, then the answer."""
    script = script_file(
        tmp_path / "replies.json",
        [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, "It said HI."],
    )
    path = tmp_path / "echo.json"
    done = run_cli(
        "run",
        "Echo hi",
        "--model",
        f"scripted:{script}",
        "--tools",
        str(tools),
        "--record",
        str(path),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "It said HI."
    return path


def test_a_recorded_run_replays_to_the_same_answer_offline(
    tmp_path: Path, tools: Path, cassette: Path
) -> None:
    requests = [i.request for i in read_cassette(cassette).interactions]
    assert [len(r["messages"]) for r in requests] == [1, 3]
    for _ in range(2):
        done = run_cli("run", "Echo hi", "--model", f"replay:{cassette}", "--tools", str(tools), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "It said HI."
        assert "echo" in done.stderr  # the tool ran again, for real


def test_a_changed_system_prompt_is_named_and_sequence_replays_anyway(
    tmp_path: Path, tools: Path, cassette: Path
) -> None:
    args = ["run", "Echo hi", "--model", f"replay:{cassette}", "--tools", str(tools), "--system", "Be terse."]
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 1
    assert "call 1 does not match the cassette" in done.stderr
    assert "request.system_prompt: expected" in done.stderr and 'actual "Be terse."' in done.stderr
    assert "Traceback" not in done.stderr
    done = run_cli(*args, "--replay-match", "sequence", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "It said HI."


def test_a_removed_tool_is_named(tmp_path: Path, cassette: Path) -> None:
    only_wait = tmp_path / "other"
    only_wait.mkdir()
    (only_wait / "waitForAbort.py").write_text((tmp_path / "tools" / "waitForAbort.py").read_text())
    done = run_cli("run", "Echo hi", "--model", f"replay:{cassette}", "--tools", str(only_wait), cwd=tmp_path)
    assert done.returncode == 1
    assert 'request.tools[0].name: expected "echo", actual "listTools"' in done.stderr


def test_chat_records_too(tmp_path: Path, tools: Path) -> None:
    script = script_file(tmp_path / "replies.json", ["Hello!", "Bye!"])
    path = tmp_path / "chat.json"
    done = run_cli(
        "chat", "--model", f"scripted:{script}", "--tools", str(tools), "--record", str(path),
        cwd=tmp_path, stdin="hi\nthanks\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(path.read_text(encoding="utf-8"))
    assert [i["request"]["messages"][-1]["text"] for i in data["interactions"]] == ["hi", "thanks"]
    replayed = run_cli(
        "chat", "--model", f"replay:{path}", "--tools", str(tools), cwd=tmp_path, stdin="hi\nthanks\n"
    )
    assert replayed.returncode == 0, replayed.stderr
    assert "Hello!" in replayed.stdout and "Bye!" in replayed.stdout


def test_no_key_is_recorded(tmp_path: Path, tools: Path) -> None:
    key = "sk-test-" + "0123456789abcdef" * 2
    script = script_file(tmp_path / "replies.json", [f"The key is {key}."])
    path = tmp_path / "key.json"
    done = run_cli(
        "run", f"Say {key}", "--model", f"scripted:{script}", "--tools", str(tools), "--record", str(path),
        cwd=tmp_path, env=clean_env(OPENAI_API_KEY=key),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = path.read_text(encoding="utf-8")
    assert key not in text and "The key is ***." in text and "Say ***" in text


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "replay:"], "needs the path of a cassette written with --record"),
        (["--model", "replay:missing.json"], "missing.json: not a usable cassette"),
        (["--model", "replay:bad.json"], "$.version: version 7 is not one this yiemagent reads"),
        (["--model", "replay:x.json", "--base-url", "http://localhost:1/v1"], "--base-url does not apply"),
        (["--record", "no/such/folder/c.json"], "--record no/such/folder/c.json: cannot write the cassette"),
        (["--replay-match", "fuzzy"], "invalid choice: 'fuzzy'"),
        (["--record", ""], "--record is empty; give the file to write the cassette to"),
        (["--record", "  "], "--record is empty"),
    ],
)
def test_bad_record_and_replay_options_are_exit_2(
    tmp_path: Path, tools: Path, args: list[str], says: str
) -> None:
    (tmp_path / "bad.json").write_text('{"format": "yiemagent-cassette", "version": 7, "interactions": []}')
    script = script_file(tmp_path / "replies.json", ["x"])
    model = [] if "--model" in args else ["--model", f"scripted:{script}"]
    done = run_cli("run", "hi", *model, *args, "--tools", str(tools), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("same", ["echo.json", "./echo.json", "{folder}/echo.json", "link.json"])
def test_recording_over_the_replayed_cassette_is_refused_and_keeps_it(
    tmp_path: Path, tools: Path, cassette: Path, same: str
) -> None:
    """``--model replay:X --record X`` would replace the recording with this run's interactions
    (one error interaction when the run does not match): it is refused before anything runs."""
    (tmp_path / "link.json").hardlink_to(cassette)
    before = cassette.read_bytes()
    record = same.format(folder=tmp_path)
    done = run_cli(
        "run", "Something else", "--model", "replay:echo.json", "--record", record, "--tools", str(tools),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--record {record} is the cassette --model replay:echo.json replays" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert cassette.read_bytes() == before


def test_a_replayed_run_may_be_recorded_to_another_file(tmp_path: Path, tools: Path, cassette: Path) -> None:
    done = run_cli(
        "run", "Echo hi", "--model", "replay:echo.json", "--record", "copy.json", "--tools", str(tools),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "copy.json").read_text())["interactions"]

"""The ``yiemagent`` command against the real llama-cpp-python server, the first server most
people run: ``run`` answers the Tokyo question with a getTime call whether it streams or not
(``--no-stream``); streamed, the server sends no events for the tool call and the client asks
again without streaming by itself; and an empty reply is exit 1 with a message. The server is
the session's (``conftest.server_url``); ``--temperature 0`` makes its model's choices the same
on every run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import clean_env, run_cli

SYSTEM = "You are a helpful assistant. Use the tools when they help; answer briefly."


def run_against(server_url: str, tmp_path: Path, *options: str) -> Any:
    return run_cli(
        "run",
        "What time is it in Tokyo?",
        "--base-url",
        server_url,
        "--model",
        "smollm2",
        "--temperature",
        "0",
        *options,
        cwd=tmp_path,
        env=clean_env(),
    )


def first_tool_call(stdout: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first tool call's start and end events of a ``--events jsonl`` run."""
    events = [json.loads(line) for line in stdout.splitlines()]
    start = next(e for e in events if e["type"] == "tool_execution_start")
    end = next(
        e for e in events if e["type"] == "tool_execution_end" and e["tool_call_id"] == start["tool_call_id"]
    )
    return start, end


def check_tokyo_call(done: Any) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    start, end = first_tool_call(done.stdout)
    assert (start["tool_name"], start["arguments"]) == ("getTime", {"city": "Tokyo"})
    assert not end["is_error"] and end["text"].startswith("Current time in Tokyo: ")


def test_run_streams_falls_back_by_itself_and_calls_the_tool(server_url: str, tmp_path: Path) -> None:
    done = run_against(
        server_url, tmp_path, "--system", SYSTEM, "--max-turns", "1", "--events", "jsonl", "--verbose"
    )
    check_tokyo_call(done)
    assert (
        "answered a streamed request with no events; asking again without streaming, and "
        "not streaming from now on"
    ) in done.stderr


def test_run_with_no_stream_calls_the_tool_without_a_fallback(server_url: str, tmp_path: Path) -> None:
    done = run_against(
        server_url,
        tmp_path,
        "--system",
        SYSTEM,
        "--max-turns",
        "1",
        "--events",
        "jsonl",
        "--verbose",
        "--no-stream",
    )
    check_tokyo_call(done)
    assert "no events" not in done.stderr


def test_an_empty_reply_is_exit_1_with_a_message(server_url: str, tmp_path: Path) -> None:
    # Without a system prompt this model takes the server's message branch, which is empty.
    done = run_against(server_url, tmp_path, "--system", "")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "the model's reply was empty (no text, stop reason 'stop')" in done.stderr
    assert "Traceback" not in done.stderr

"""The ``yiemagent`` command against llama.cpp's own server (``llama-server``, here served by
xllamacpp), the first server most people run: ``run --base-url`` answers streamed (the answer
comes as it is written, in pieces) and with ``--no-stream``, offers the example tools on the
wire, reads the server's context window with ``--context-window auto``, and refuses a prompt
that would not fit before sending it. The server is the session's (``conftest.server_url``);
``--temperature 0`` makes its model's choices the same on every run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import clean_env, run_cli

pytestmark = pytest.mark.needs("local")


def run_against(server_url: str, tmp_path: Path, *options: str, prompt: str = "Say hello.") -> Any:
    return run_cli(
        "run",
        prompt,
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


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_run_streams_the_answer_from_the_server(server_url: str, tmp_path: Path) -> None:
    done = run_against(server_url, tmp_path, "--max-turns", "1", "--events", "jsonl")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    events = events_of(done.stdout)
    pieces = [e for e in events if e["type"] == "message_update"]
    end = next(e for e in reversed(events) if e["type"] == "agent_end")
    assert len(pieces) > 1 and [m["role"] for m in end["messages"]] == ["user", "assistant"]
    answer = end["messages"][-1]["content"][0]["text"]
    assert answer.strip() and "".join(p["delta"] for p in pieces) == answer


def test_run_with_no_stream_answers_in_one_piece(server_url: str, tmp_path: Path) -> None:
    done = run_against(server_url, tmp_path, "--max-turns", "1", "--no-stream")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip()


def test_run_reads_the_servers_window_and_refuses_what_would_not_fit(server_url: str, tmp_path: Path) -> None:
    too_long = "Summarise this: " + "lorem ipsum dolor " * 3000
    done = run_against(server_url, tmp_path, "--context-window", "auto", prompt=too_long)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "context window" in done.stderr and done.stdout == ""
    fits = run_against(server_url, tmp_path, "--context-window", "auto", "--max-turns", "1")
    assert fits.returncode == 0 and fits.stdout.strip(), fits.stderr

"""``--mcp``: the command uses the tools of a real MCP server (``mcp-server-time`` over stdio)."""

from __future__ import annotations

import json
import shlex
import sys
import unicodedata
from pathlib import Path

import pytest
from cli_helpers import run_cli, script_file
from paths import TESTS

pytestmark = pytest.mark.needs("mcp")

TIME_SERVER = f"{sys.executable} -m mcp_server_time --local-timezone UTC"


def test_run_calls_a_tool_of_an_mcp_server(tmp_path: Path) -> None:
    model = script_file(
        tmp_path / "replies.json",
        [
            {"tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]},
            "Done.",
        ],
    )
    done = run_cli(
        "run",
        "What time is it in Tokyo?",
        "--model",
        f"scripted:{model}",
        "--tools",
        str(tmp_path),
        "--mcp",
        TIME_SERVER,
        "--events",
        "jsonl",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["tool_name"] == "get_current_time" and not end["is_error"]
    assert "Asia/Tokyo" in end["text"]


def test_tools_lists_an_mcp_servers_tools(tmp_path: Path) -> None:
    done = run_cli("tools", str(tmp_path), "--mcp", TIME_SERVER, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert {"get_current_time", "convert_time"} <= set(done.stdout.split('"')), done.stdout


def test_an_unreachable_mcp_server_is_named_in_the_error(tmp_path: Path) -> None:
    done = run_cli("tools", str(tmp_path), "--mcp", "http://127.0.0.1:9/mcp", cwd=tmp_path)
    assert done.returncode == 2 and "MCP server 'http://127.0.0.1:9/mcp'" in done.stderr


# -- what a server says reaches the terminal as text only ----------------------------------------

EDGE_SERVER = shlex.join([sys.executable, str(TESTS / "mcp_edge_server.py")])
ESCAPE_TOOL = "31m_0_owned_2J1mred_2e39f177"  # the mapped name of the tool named with escapes


def controls(text: str) -> list[str]:
    """The control characters in ``text`` other than line feeds (ESC, BEL, CR, C1, ...)."""
    return sorted({c for c in text if unicodedata.category(c) == "Cc" and c != "\n"})


def test_tools_shows_a_servers_names_and_descriptions_without_escapes(tmp_path: Path) -> None:
    done = run_cli("tools", str(tmp_path), "--mcp", EDGE_SERVER, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert controls(done.stdout) == []
    # MCP tools are labelled with their server (they were "(built in)", like listTools).
    assert f"\n{ESCAPE_TOOL}: Title  (MCP server {EDGE_SERVER})\n" in done.stdout
    assert done.stdout.startswith("listTools: List Tools  (built in)\n")
    assert "    Says which tool was called. Harmless    text\n    over two lines.\n" in done.stdout

    as_json = run_cli("tools", str(tmp_path), "--mcp", EDGE_SERVER, "--json", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    assert controls(as_json.stdout) == []  # written as \u escapes: the data is all there
    listed = {tool["name"]: tool for tool in json.loads(as_json.stdout)}
    assert listed[ESCAPE_TOOL]["description"].startswith("Says which tool was called.\x1b[31m")


def test_chat_shows_a_tools_and_the_models_escapes_as_text_only(tmp_path: Path) -> None:
    model = script_file(
        tmp_path / "replies.json",
        [
            {"tool_calls": [{"name": ESCAPE_TOOL, "arguments": {}}]},
            "Done.\x1b[2J\x1b]0;title\x07\r Bye.",
        ],
    )
    done = run_cli(
        "chat",
        "--model",
        f"scripted:{model}",
        "--tools",
        str(tmp_path),
        "--mcp",
        EDGE_SERVER,
        cwd=tmp_path,
        stdin="call it\n",
    )
    assert done.returncode == 0, done.stderr
    assert controls(done.stdout) == []
    assert f"  ✓ {ESCAPE_TOOL} (" in done.stdout
    assert ": called red done\n" in done.stdout  # the tool's answer, its escape sequences gone
    assert "Done. Bye." in done.stdout

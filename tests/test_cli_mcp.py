"""``--mcp``: the command uses the tools of a real MCP server (``mcp-server-time`` over stdio)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cli_helpers import run_cli, script_file

TIME_SERVER = f"{sys.executable} -m mcp_server_time --local-timezone UTC"


def test_run_calls_a_tool_of_an_mcp_server(tmp_path: Path) -> None:
    model = script_file(tmp_path / "replies.json", [
        {"tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]},
        "Done.",
    ])
    done = run_cli("run", "What time is it in Tokyo?", "--model", f"scripted:{model}",
                   "--tools", str(tmp_path), "--mcp", TIME_SERVER, "--events", "jsonl", cwd=tmp_path)
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

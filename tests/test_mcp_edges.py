"""The edges of MCP servers, against real servers written with the SDK: tool names providers
refuse (``tests/mcp_edge_server.py`` over stdio).
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agent_helpers import WAIT, ScriptedLLM, reply
from mcp_edge_server import CLASH, ODD_NAMES
from mcp_helpers import nothing_left_behind

from yiemagent import (
    AgentToolCall,
    AssistantMessage,
    McpToolError,
    TextContent,
    ToolResultMessage,
    ToolStore,
    YiemAgent,
)
from yiemagent.llm.anthropic_format import openai_request_to_anthropic
from yiemagent.mcp_tools import load_mcp_tools

HERE = Path(__file__).resolve().parent
EDGE_SERVER = [sys.executable, str(HERE / "mcp_edge_server.py")]
# The rule of OpenAI's function names and of Anthropic's tool names (both their API references).
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MIB = 2**20
# What each odd name reads as once mapped (README: accents dropped, each run of other characters
# one "_", cut to fit); the mapped name is that, "_" and 8 hex digits of the name's SHA-256.
READABLE = {
    "get time": "get_time",
    "files/read": "files_read",
    "wetter_münchen": "wetter_munchen",
    "x" * 300: "x" * 50,  # 64 characters in all, with the prefix and the digest
    "bell\x07and\x01nul": "bell_and_nul",
    ODD_NAMES[5]: "31m_0_owned_2J1mred",  # the escape sequences' printable bytes are left
    "a b": "a_b",
    "a/b": "a_b",
}


def mapped(prefix: str, name: str) -> str:
    """The documented name of the server's tool ``name`` when it is not a valid one."""
    return f"{prefix}{READABLE[name]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


@pytest.fixture
def no_leaks() -> Iterator[None]:
    with nothing_left_behind():
        yield


def results_by_id(messages: list[Any]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def result_text(message: ToolResultMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


# -- names ---------------------------------------------------------------------------------------


def test_names_providers_refuse_are_mapped_and_reach_the_servers_tools(no_leaks: None) -> None:
    with ToolStore() as store:
        connection = load_mcp_tools(store, EDGE_SERVER, prefix="edge_")
        assert len(connection.tool_names) == 2 + len(ODD_NAMES)
        assert [name for name in connection.tool_names if not PROVIDER_NAME.match(name)] == []
        by_server = {server: ours for ours, server in connection.server_names.items()}
        assert set(by_server) == {"echo", "big", *ODD_NAMES}
        # The documented mapping, nothing else: a fitting name as it is, any other mapped.
        assert by_server["echo"] == "edge_echo" and by_server["big"] == "edge_big"
        assert {name: by_server[name] for name in ODD_NAMES} == {
            name: mapped("edge_", name) for name in ODD_NAMES}
        assert by_server["get time"] == "edge_get_time_343b1418"
        assert len(by_server["x" * 300]) == 64
        assert by_server["a b"] != by_server["a/b"]  # both read a_b once mapped: the digest differs
        with ToolStore() as again:  # the same names on every connection
            assert load_mcp_tools(again, EDGE_SERVER, prefix="edge_").tool_names == connection.tool_names

        batch = [AgentToolCall(f"c{i}", by_server[name], {}) for i, name in enumerate(ODD_NAMES)]
        llm = ScriptedLLM(AssistantMessage(content=batch, stop_reason="toolUse"), reply("done"))
        with YiemAgent(llm_call=llm, tool_store=store) as agent:
            agent.prompt("call them all", timeout=3 * WAIT)
            results = results_by_id(agent.messages)

    offered = [tool["function"]["name"] for tool in llm.requests[0]["tools"]]
    assert set(by_server.values()) <= set(offered)
    assert [name for name in offered if not PROVIDER_NAME.match(name)] == []
    _, _, anthropic_tools = openai_request_to_anthropic(llm.requests[0])
    assert [t["name"] for t in anthropic_tools if not PROVIDER_NAME.match(t["name"])] == []
    for i, name in enumerate(ODD_NAMES):  # each mapped name reached the server's tool of that name
        assert not results[f"c{i}"].is_error
        assert result_text(results[f"c{i}"]).startswith(f"called {name}")


@pytest.mark.parametrize("order", ["--clash", "--clash-first"])
def test_a_name_two_tools_map_to_is_refused_for_one_whatever_the_order(
        order: str, caplog: pytest.LogCaptureFixture, no_leaks: None) -> None:
    with ToolStore() as store:  # the server also has a tool plainly named what "a b" maps to
        with pytest.raises(McpToolError) as refused:
            load_mcp_tools(store, [*EDGE_SERVER, order])
        assert (f"\"{CLASH}\": the server's tools '{CLASH}' and 'a b' both map to this name; "
                f"'{CLASH}' keeps it and 'a b' is not registered") in str(refused.value)
        assert store.tools == {}

        connection = load_mcp_tools(store, [*EDGE_SERVER, order], strict=False)
        assert connection.server_names[CLASH] == CLASH  # the tool of that very name keeps it
        assert "a b" not in connection.server_names.values()
        assert "a/b" in connection.server_names.values()
        assert "'a b' is not registered" in caplog.text
        result = store.tools[CLASH].execute("c1", {}, None, None)
        assert result.content == [TextContent(f"called {CLASH}")]


def test_a_prefix_providers_would_refuse_is_refused_at_once() -> None:
    for prefix in ("my tools.", "x" * 33, "zeit/"):
        with pytest.raises(ValueError, match="prefix must be at most 32 ASCII letters, digits"):
            load_mcp_tools(ToolStore(), EDGE_SERVER, prefix=prefix)

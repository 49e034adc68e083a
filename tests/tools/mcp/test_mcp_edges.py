"""The edges of MCP servers, against real servers written with the SDK: tool names providers
refuse (``tests/mcp_edge_server.py`` over stdio), results and notifications larger than
``max_result_bytes`` over stdio and over streamable HTTP (``tests/mcp_http_server.py``, as one
JSON body and as an event stream), and a stdio server's own child process, which must not outlive
the connection.
"""

from __future__ import annotations

import hashlib
import os
import re
import select
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import TESTS
from tiers import absent

pytest.importorskip("mcp.types", reason=absent("mcp"))  # not "mcp": tests/tools/mcp is one too

from agent_helpers import WAIT, ScriptedLLM, call, reply
from mcp_edge_server import CLASH, ODD_NAMES
from mcp_helpers import HttpServer, nothing_left_behind

from yiemagent import AgentToolCall, AssistantMessage, TextContent, ToolResultMessage, ToolStore, YiemAgent
from yiemagent.errors import McpToolError
from yiemagent.llm.anthropic._wire import openai_request_to_anthropic
from yiemagent.tools.mcp import McpOptions
from yiemagent.tools.mcp._connection import load_mcp_tools

HERE = TESTS
EDGE_SERVER = [sys.executable, str(HERE / "mcp_edge_server.py")]
# The rule of OpenAI's function names and of Anthropic's tool names (both their API references).
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MIB = 2**20
PLAIN_TOOLS = ["echo", "noisy", "big"]  # the edge server's tools with names that fit
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


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    yield server
    server.kill()


def results_by_id(messages: list[Any]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def result_text(message: ToolResultMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


# -- names ---------------------------------------------------------------------------------------


def test_names_providers_refuse_are_mapped_and_reach_the_servers_tools(no_leaks: None) -> None:
    with ToolStore() as store:
        connection = load_mcp_tools(store, EDGE_SERVER, prefix="edge_")
        assert len(connection.tool_names) == len(PLAIN_TOOLS) + len(ODD_NAMES)
        assert [name for name in connection.tool_names if not PROVIDER_NAME.match(name)] == []
        by_server = {server: ours for ours, server in connection.server_names.items()}
        assert set(by_server) == {*PLAIN_TOOLS, *ODD_NAMES}
        # The documented mapping, nothing else: a fitting name as it is, any other mapped.
        assert all(by_server[name] == f"edge_{name}" for name in PLAIN_TOOLS)
        assert {name: by_server[name] for name in ODD_NAMES} == {
            name: mapped("edge_", name) for name in ODD_NAMES
        }
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
    order: str, caplog: pytest.LogCaptureFixture, no_leaks: None
) -> None:
    with ToolStore() as store:  # the server also has a tool plainly named what "a b" maps to
        with pytest.raises(McpToolError) as refused:
            load_mcp_tools(store, [*EDGE_SERVER, order])
        assert (
            f"\"{CLASH}\": the server's tools '{CLASH}' and 'a b' both map to this name; "
            f"'{CLASH}' keeps it and 'a b' is not registered"
        ) in str(refused.value)
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


# -- a stdio server's own processes --------------------------------------------------------------


def running(pid: int) -> bool:
    """Whether process ``pid`` runs: ``os.kill(pid, 0)`` finds it and it is not a zombie (dead,
    only waiting for its parent, here init, to collect it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to end: on its pidfd, which becomes readable
    when the process exits (Linux 5.3 and later), else by looking at its state until then."""
    deadline = time.monotonic() + timeout
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        while running(pid) and time.monotonic() < deadline:
            select.select([], [], [], 0.01)  # a bounded poll of /proc, not a synchronisation
        return not running(pid)
    try:
        select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    return not running(pid)


def test_a_process_the_server_started_ends_with_the_connection(tmp_path: Path, no_leaks: None) -> None:
    pidfile = tmp_path / "child.pid"
    connection = load_mcp_tools(ToolStore(), [*EDGE_SERVER, "--child", str(pidfile)])
    helper = int(pidfile.read_text())  # written before the server started serving
    try:
        assert running(helper)
        connection.close()
        assert wait_for_exit(helper, WAIT), f"the server's child {helper} outlived close()"
    finally:
        if running(helper):
            os.kill(helper, 9)


# -- results over the limit ----------------------------------------------------------------------


def peak_bytes_of(work: Any) -> tuple[Any, int]:
    """Run ``work()`` with allocations traced (on every thread); return its value and the peak
    of traced memory above what was there before."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        value = work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return value, peak - before


def assert_too_large(message: str, before: str = "") -> None:
    """``message`` says the 50 MiB answer to ``big`` was over the default limit, how big it was,
    and how to raise the limit."""
    said = re.fullmatch(
        re.escape(before) + r'MCP tool "big": the server\'s answer is larger than max_result_bytes '
        rf"\({16 * MIB} bytes; it was (\d+) bytes\) and was dropped unread; pass "
        r"load_mcp_tools options=McpOptions\(max_result_bytes=\.\.\.\) with a larger limit to "
        r"accept it",
        message,
    )
    assert said is not None, message
    assert 50 * MIB < int(said[1]) < 50 * MIB + 200  # the text and its JSON-RPC envelope


def test_a_50_mb_result_over_stdio_is_an_error_result_without_holding_it(no_leaks: None) -> None:
    with ToolStore() as store:
        # The timeout is the deadline: the old reader took minutes over a 50 MB line.
        load_mcp_tools(store, EDGE_SERVER, options=McpOptions(timeout_s=3 * WAIT))
        llm = ScriptedLLM(call("big", {"mb": 50}), call("echo", {"text": "still here"}, "c2"), reply("done"))
        with YiemAgent(llm_call=llm, tool_store=store) as agent:
            _, peak = peak_bytes_of(lambda: agent.prompt("go", timeout=6 * WAIT))
            results = results_by_id(agent.messages)
    too_big = results["call_1"]
    assert too_big.is_error
    assert_too_large(result_text(too_big), 'Tool "big" failed: McpToolError: ')
    assert peak < 24 * MIB  # the line is held up to the limit only (it was 50 MB, read whole)
    assert result_text(results["c2"]) == "still here"  # the session went on


def test_the_limit_can_be_raised_and_a_result_within_it_is_whole(no_leaks: None) -> None:
    with ToolStore() as store:
        load_mcp_tools(store, EDGE_SERVER, options=McpOptions(max_result_bytes=3 * MIB))
        big = store.tools["big"]
        assert big.execute("c1", {"mb": 2}, None, None).content == [TextContent("x" * 2 * MIB)]
        with pytest.raises(McpToolError, match=rf"larger than max_result_bytes \({3 * MIB} bytes"):
            big.execute("c2", {"mb": 4}, None, None)


def test_max_result_bytes_must_be_a_positive_number_of_bytes() -> None:
    for bad in (0, -1, 1.5, True, "16M"):
        with pytest.raises(ValueError, match="max_result_bytes must be a positive whole number"):
            load_mcp_tools(ToolStore(), EDGE_SERVER, options=McpOptions(max_result_bytes=bad))  # type: ignore[arg-type]


def test_a_50_mb_json_answer_over_http_is_refused_unread(http_server: HttpServer, no_leaks: None) -> None:
    with ToolStore() as store:  # the 2026-07-28 protocol answers a call without progress in JSON
        load_mcp_tools(store, http_server.url, options=McpOptions(mode="auto", timeout_s=3 * WAIT))
        big = store.tools["big"]

        def refused() -> str:
            with pytest.raises(McpToolError) as info:
                big.execute("c1", {"mb": 50}, None, None)
            return str(info.value)

        message, peak = peak_bytes_of(refused)
        assert_too_large(message)
        assert peak < 8 * MIB  # its Content-Length said so: not one byte of it was kept
        assert store.tools["echo"].execute("c2", {"text": "hi"}, None, None).content == [TextContent("hi")]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_event_stream_answer_is_bounded_by_max_result_bytes(
    http_server: HttpServer, mode: Any, no_leaks: None
) -> None:
    with ToolStore() as store:
        load_mcp_tools(store, http_server.url, options=McpOptions(mode=mode))
        big = store.tools["big"]
        # Over 1 MiB (the SDK's own bound on an event, which failed such a call as a lost server)
        # and within the default limit: it gets through.
        whole = big.execute("c1", {"mb": 2, "stream": True}, None, None)
        assert whole.content == [TextContent("x" * 2 * MIB)]
    with ToolStore() as store:
        load_mcp_tools(store, http_server.url, options=McpOptions(mode=mode, max_result_bytes=MIB))
        with pytest.raises(
            McpToolError,
            match=rf"larger than max_result_bytes \({MIB} bytes; it "
            r"was more\) and was dropped unread",
        ):
            store.tools["big"].execute("c2", {"mb": 2, "stream": True}, None, None)
        assert store.tools["echo"].execute("c3", {"text": "hi"}, None, None).content == [TextContent("hi")]


def test_a_notification_over_the_limit_is_dropped_and_the_call_goes_on_over_stdio(
    caplog: pytest.LogCaptureFixture, no_leaks: None
) -> None:
    with ToolStore() as store:
        load_mcp_tools(store, EDGE_SERVER, options=McpOptions(max_result_bytes=MIB))
        result = store.tools["noisy"].execute("c1", {"mb": 2}, None, None)
    assert result.content == [TextContent("after the noise")]
    assert re.search(
        r"dropped a message of \d+ bytes, over max_result_bytes \(1048576 bytes\), "
        "that answered no call",
        caplog.text,
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_notification_over_the_limit_is_dropped_and_the_call_goes_on_over_http(
    http_server: HttpServer, mode: Any, caplog: pytest.LogCaptureFixture, no_leaks: None
) -> None:
    with ToolStore() as store:
        load_mcp_tools(store, http_server.url, options=McpOptions(mode=mode, max_result_bytes=MIB))
        result = store.tools["noisy"].execute("c1", {"mb": 2}, None, None)
    assert result.content == [TextContent("after the noise")]
    assert (
        "dropped a message larger than max_result_bytes (1048576 bytes) that answered no call" in caplog.text
    )

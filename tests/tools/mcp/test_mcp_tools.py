"""MCP servers' tools in a store: real servers nobody in this project wrote.

``mcp-server-time`` (from PyPI) runs over stdio through full agent runs with a scripted model; a
server written with the SDK's own ``MCPServer`` (``tests/mcp_http_server.py``) runs over
streamable HTTP on loopback for progress, error results, aborts, timeouts, tool-list changes and
a server killed mid-call, under both protocol negotiations. Every test checks that no thread and
no child process outlives the connection.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tiers import absent

pytest.importorskip("mcp.types", reason=absent("mcp"))  # not "mcp": tests/tools/mcp is one too
pytest.importorskip("mcp_server_time", reason=absent("mcp"))

import mcp.types as mcp_types
from agent_helpers import WAIT, ScriptedLLM, call, echo_tool, reply, text
from mcp_helpers import HttpServer, child_pids, nothing_left_behind

from yiemagent import (
    AgentEvent,
    AgentToolCall,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolExecEndEvent,
    ToolExecUpdateEvent,
    ToolResultMessage,
    ToolStore,
    YiemAgent,
    load_tools,
    register_tool,
)
from yiemagent.errors import McpToolError
from yiemagent.tools.mcp import McpOptions
from yiemagent.tools.mcp._connection import McpConnection, _content_blocks, _label_for, load_mcp_tools

TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
MODES = ["auto", "legacy"]  # the 2026-07-28 protocol, and the initialize handshake of older servers


# -- what a test leaves behind -------------------------------------------------------------------


@pytest.fixture
def no_leaks() -> Iterator[None]:
    """Fail the test if a thread or a child process it started is still there at the end."""
    with nothing_left_behind():
        yield


# -- the HTTP server -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    yield server
    server.kill()


@pytest.fixture
def own_server() -> Iterator[HttpServer]:
    """A server of the test's own, to kill."""
    server = HttpServer()
    yield server
    server.kill()


def slow_state(store: ToolStore, cancelled: int = 0) -> dict[str, int]:
    """The test server's count of ``slow`` calls, once ``cancelled`` of them were cancelled."""
    result = store.tools["slow_state"].execute("state", {"cancelled": cancelled}, None, None)
    state: dict[str, int] = result.details["structured_content"]
    return state


# -- stdio: mcp-server-time through an agent -----------------------------------------------------


def test_time_server_tools_run_through_an_agent(no_leaks: None) -> None:
    with ToolStore("time") as store:
        connection = load_mcp_tools(store, TIME_SERVER, prefix="time_")
        assert connection.tool_names == ["time_get_current_time", "time_convert_time"]
        assert list(store.tools) == connection.tool_names
        llm = ScriptedLLM(
            AssistantMessage(
                content=[
                    AgentToolCall("c1", "time_get_current_time", {"timezone": "Asia/Tokyo"}),
                    # target_timezone is missing: our pipeline refuses the call against the server's schema
                    AgentToolCall(
                        "c2", "time_convert_time", {"source_timezone": "Europe/London", "time": "9:30"}
                    ),
                    AgentToolCall("c3", "time_get_current_time", {"timezone": "Mars/Olympus_Mons"}),
                ],
                stop_reason="toolUse",
            ),
            call(
                "time_convert_time",
                {"source_timezone": "Europe/London", "time": "09:30", "target_timezone": "Asia/Tokyo"},
                "c4",
            ),
            reply("It is late evening in Tokyo."),
        )
        with YiemAgent(llm_call=llm, tool_store=store) as agent:
            answer = agent.prompt("What time is it in Tokyo?", timeout=3 * WAIT)
            history = agent.messages
    assert text(answer) == "It is late evening in Tokyo."
    offered = {t["function"]["name"]: t["function"] for t in llm.requests[0]["tools"]}
    assert list(offered) == ["time_get_current_time", "time_convert_time"]
    assert offered["time_convert_time"]["parameters"]["required"] == [
        "source_timezone",
        "time",
        "target_timezone",
    ]

    results = {m.tool_call_id: m for m in history if isinstance(m, ToolResultMessage)}
    tokyo = json.loads(results["c1"].content[0].text)  # type: ignore[union-attr]
    assert not results["c1"].is_error
    assert tokyo["timezone"] == "Asia/Tokyo" and tokyo["datetime"].endswith("+09:00")
    assert results["c1"].details["structured_content"] == tokyo

    refused = results["c2"].content[0].text  # type: ignore[union-attr]
    assert results["c2"].is_error and "target_timezone" in refused and "McpToolError" not in refused

    mars = results["c3"].content[0].text  # type: ignore[union-attr]
    assert results["c3"].is_error
    assert mars.startswith('Tool "time_get_current_time" failed: McpToolError: ')
    assert "Mars/Olympus_Mons" in mars

    converted = json.loads(results["c4"].content[0].text)  # type: ignore[union-attr]
    assert not results["c4"].is_error
    assert converted["source"]["timezone"] == "Europe/London"
    assert converted["target"]["timezone"] == "Asia/Tokyo"
    assert converted["target"]["datetime"][11:16] in ("17:30", "18:30")  # London in summer or winter
    assert store.tools == {}  # closing the store took the server's tools away


def test_a_stdio_server_that_died_is_started_again(no_leaks: None) -> None:
    before = child_pids()
    with ToolStore() as store:
        load_mcp_tools(store, TIME_SERVER)
        [server] = child_pids() - before
        os.kill(server, signal.SIGKILL)
        tool = store.tools["get_current_time"]
        try:  # the call may come before the connection saw the server go: an error, not a hang
            tool.execute("c1", {"timezone": "UTC"}, None, None)
        except McpToolError as exc:
            assert "next call reconnects" in str(exc)
        result = tool.execute("c2", {"timezone": "UTC"}, None, None)
        assert json.loads(result.content[0].text)["timezone"] == "UTC"  # type: ignore[union-attr]
        assert server not in child_pids()


def test_closing_leaves_no_tool_thread_or_process(no_leaks: None) -> None:
    store = ToolStore()
    register_tool(store, echo_tool())
    with load_mcp_tools(store, TIME_SERVER) as connection:
        tool = store.tools["get_current_time"]
        assert len(child_pids()) >= 1
    assert connection.closed and list(store.tools) == ["echo"]  # the hand-registered tool stays
    with pytest.raises(McpToolError, match="is closed"):
        tool.execute("c1", {"timezone": "UTC"}, None, None)
    connection.close()  # idempotent
    store.close()  # the connection took its closer back: nothing to do


# -- HTTP: the SDK's own server ------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_progress_becomes_update_events(http_server: HttpServer, mode: Any, no_leaks: None) -> None:
    events: list[AgentEvent] = []
    with ToolStore() as store:
        load_mcp_tools(store, http_server.url, options=McpOptions(mode=mode))
        llm = ScriptedLLM(call("progress", {"steps": 3}), reply("done"))
        with YiemAgent(llm_call=llm, tool_store=store, agent_event_sink=events.append) as agent:
            agent.prompt("go", timeout=WAIT)
    updates = [e.partial_result for e in events if isinstance(e, ToolExecUpdateEvent)]
    assert [u.content[0].text for u in updates] == [
        "progress 1/3: step 1 of 3",
        "progress 2/3: step 2 of 3",
        "progress 3/3: step 3 of 3",
    ]
    assert updates[0].details == {"progress": 1.0, "total": 3.0, "message": "step 1 of 3"}
    [end] = [e for e in events if isinstance(e, ToolExecEndEvent)]
    assert not end.is_error and end.result.content == [TextContent("3 steps done")]
    assert end.result.details["structured_content"] == {"result": "3 steps done"}


@pytest.mark.parametrize("mode", MODES)
def test_error_results_and_images(http_server: HttpServer, mode: Any, no_leaks: None) -> None:
    with ToolStore() as store:
        load_mcp_tools(store, http_server.url, options=McpOptions(mode=mode))
        llm = ScriptedLLM(
            AssistantMessage(
                content=[
                    AgentToolCall("c1", "fail", {"reason": "no luck"}),
                    AgentToolCall("c2", "picture", {}),
                ],
                stop_reason="toolUse",
            ),
            reply("done"),
        )
        with YiemAgent(llm_call=llm, tool_store=store, tool_execution="parallel") as agent:
            agent.prompt("go", timeout=WAIT)
            failed, picture = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert failed.is_error
    assert failed.content == [
        TextContent('Tool "fail" failed: McpToolError: Error executing tool fail: no luck')
    ]
    assert not picture.is_error
    assert picture.content[0] == ImageContent(picture.content[0].data, "image/png")  # type: ignore[union-attr]
    assert picture.content[1] == TextContent("a transparent pixel")


@pytest.mark.parametrize("mode", MODES)
def test_an_abort_cancels_the_call_on_the_server(http_server: HttpServer, mode: Any, no_leaks: None) -> None:
    started = threading.Event()

    def sink(event: AgentEvent) -> None:
        if isinstance(event, ToolExecUpdateEvent) and event.tool_name == "slow":
            started.set()

    with ToolStore() as store:
        load_mcp_tools(store, http_server.url, options=McpOptions(mode=mode))
        cancelled = slow_state(store)["slow_cancelled"]
        with YiemAgent(
            llm_call=ScriptedLLM(call("slow", {})), tool_store=store, agent_event_sink=sink
        ) as agent:
            agent.run_agent("go")
            assert started.wait(WAIT)
            aborted_at = time.monotonic()
            agent.abort()
            response = agent.take_response(WAIT)
            assert time.monotonic() - aborted_at < WAIT / 2
            [result] = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
        assert response.stop_reason == "aborted"
        assert result.is_error and "aborted" in result.content[0].text  # type: ignore[union-attr]
        assert slow_state(store, cancelled + 1)["slow_cancelled"] == cancelled + 1


def test_a_call_past_its_timeout_is_cancelled(http_server: HttpServer, no_leaks: None) -> None:
    with ToolStore() as store:
        load_mcp_tools(
            store, http_server.url, options=McpOptions(timeout_s=0.5, headers={"X-Caller": "yiemagent-tests"})
        )
        cancelled = slow_state(store)["slow_cancelled"]
        with pytest.raises(McpToolError, match=r'MCP tool "slow" timed out after 0\.5 s'):
            store.tools["slow"].execute("c1", {}, None, None)
        assert slow_state(store, cancelled + 1)["slow_cancelled"] == cancelled + 1


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_server_gives_error_results_and_the_next_call_reconnects(
    no_leaks: None, own_server: HttpServer, mode: Any
) -> None:  # own_server ends first
    started = threading.Event()

    def sink(event: AgentEvent) -> None:
        if isinstance(event, ToolExecUpdateEvent):
            started.set()

    with ToolStore() as store:
        load_mcp_tools(store, own_server.url, options=McpOptions(mode=mode, timeout_s=3 * WAIT))
        llm = ScriptedLLM(
            call("slow", {}), reply("lost it"), call("echo", {"text": "back"}, "c2"), reply("back again")
        )
        with YiemAgent(llm_call=llm, tool_store=store, agent_event_sink=sink) as agent:
            agent.run_agent("go")
            assert started.wait(WAIT)
            own_server.kill()
            assert text(agent.take_response(WAIT)) == "lost it"  # well before the call's timeout
            [lost] = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
            assert lost.is_error and "the next call reconnects" in lost.content[0].text  # type: ignore[union-attr]

            with pytest.raises(McpToolError, match="could not connect"):  # down: fails, does not hang
                store.tools["echo"].execute("c1", {"text": "anyone?"}, None, None)

            own_server.start()
            assert text(agent.prompt("again", timeout=WAIT)) == "back again"
            back = [m for m in agent.messages if isinstance(m, ToolResultMessage)][-1]
        assert not back.is_error and back.content == [TextContent("back")]


@pytest.mark.parametrize("mode", MODES)
def test_a_server_restarted_between_calls_is_reconnected(
    no_leaks: None, own_server: HttpServer, mode: Any
) -> None:
    with ToolStore() as store:
        load_mcp_tools(store, own_server.url, options=McpOptions(mode=mode))
        echo = store.tools["echo"]
        assert echo.execute("c1", {"text": "one"}, None, None).content == [TextContent("one")]
        own_server.kill()
        own_server.start()
        assert echo.execute("c2", {"text": "two"}, None, None).content == [TextContent("two")]


@pytest.mark.parametrize("mode", MODES)
def test_a_changed_tool_list_refreshes_the_store(http_server: HttpServer, mode: Any, no_leaks: None) -> None:
    name = f"double_{mode}"
    changes: list[list[str]] = []
    changed = threading.Event()

    def on_tools_changed(names: list[str]) -> None:
        changes.append(names)
        changed.set()

    with ToolStore() as store:
        load_mcp_tools(
            store,
            http_server.url,
            prefix="srv_",
            on_tools_changed=on_tools_changed,
            options=McpOptions(mode=mode),
        )
        assert f"srv_{name}" not in store.tools
        store.tools["srv_add_tool"].execute("c1", {"name": name}, None, None)
        assert changed.wait(WAIT)
        assert f"srv_{name}" in changes[-1] and f"srv_{name}" in store.tools
        doubled = store.tools[f"srv_{name}"].execute("c2", {"x": 21}, None, None)
        assert doubled.content == [TextContent("42")]

        changed.clear()
        store.tools["srv_remove_tool"].execute("c3", {"name": name}, None, None)
        assert changed.wait(WAIT)
        assert f"srv_{name}" not in store.tools and f"srv_{name}" not in changes[-1]


def test_closing_ends_the_calls_in_flight(http_server: HttpServer, no_leaks: None) -> None:
    started = threading.Event()
    outcome: list[BaseException] = []

    def slow_call(tool: Any) -> None:
        try:
            tool.execute("c1", {}, None, lambda _partial: started.set())
        except McpToolError as exc:
            outcome.append(exc)

    with ToolStore() as store:
        connection = load_mcp_tools(store, http_server.url)
        cancelled = slow_state(store)["slow_cancelled"]
        caller = threading.Thread(target=slow_call, args=(store.tools["slow"],))
        caller.start()
        assert started.wait(WAIT)
        connection.close()
        caller.join(WAIT)
        assert not caller.is_alive()
        assert "was closed during the call" in str(outcome[0])
    with ToolStore() as other:  # the server saw the call cancelled
        load_mcp_tools(other, http_server.url)
        assert slow_state(other, cancelled + 1)["slow_cancelled"] == cancelled + 1


def test_names_the_store_already_uses_are_refused_unless_prefixed(
    http_server: HttpServer, tmp_path: Path, caplog: pytest.LogCaptureFixture, no_leaks: None
) -> None:
    store = ToolStore()
    hand = register_tool(store, echo_tool())
    with pytest.raises(McpToolError, match=r'"echo": the store already has a tool of that name') as info:
        load_mcp_tools(store, http_server.url)
    assert "prefix=" in str(info.value)
    assert list(store.tools) == ["echo"]  # nothing of the server's was left behind

    with load_mcp_tools(store, http_server.url, strict=False):
        assert store.tools["echo"] is hand and "progress" in store.tools
    assert "already has a tool" in caplog.text

    with load_mcp_tools(store, http_server.url, prefix="srv_") as connection:
        assert connection.tool_names[0] == "srv_echo" and store.tools["echo"] is hand
        # a tool file giving one of the server's names is refused, as for any tool registered by hand
        served = store.tools["srv_echo"]
        (tmp_path / "clash.py").write_text(
            "def get_tool():\n"
            "    return AgentTool('srv_echo', 'Echo', 'x', {'type': 'object'}, lambda *a: None)\n"
        )
        load_tools(store, tmp_path, strict=False)
        assert store.tools["srv_echo"] is served
        assert "already taken by a tool registered by hand" in caplog.text
    assert list(store.tools) == ["echo", "listTools"]


def test_servers_that_cannot_be_reached_fail_at_once(no_leaks: None) -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = ToolStore()
    with pytest.raises(McpToolError, match="could not connect to MCP server"):
        load_mcp_tools(store, f"http://127.0.0.1:{port}/mcp")
    with pytest.raises(McpToolError, match=r"could not connect.*FileNotFoundError"):
        load_mcp_tools(store, ["/nonexistent/mcp-server"])
    with pytest.raises(McpToolError, match="could not connect"):
        load_mcp_tools(store, [sys.executable, "-c", "pass"])  # exits at once
    with pytest.raises(McpToolError, match=r"within 0\.5 s"):  # never answers: stopped, not left behind
        load_mcp_tools(
            store,
            [sys.executable, "-c", "import time; time.sleep(60)"],
            options=McpOptions(connect_timeout_s=0.5),
        )
    assert store.tools == {}


def test_arguments_are_checked_before_anything_starts() -> None:
    store = ToolStore()
    with pytest.raises(ValueError, match="command line"):
        load_mcp_tools(store, [])
    with pytest.raises(ValueError, match="headers apply to an http"):
        load_mcp_tools(store, "some-server --flag", options=McpOptions(headers={"Authorization": "Bearer x"}))
    with pytest.raises(ValueError, match="env, cwd and errlog apply to a command"):
        load_mcp_tools(store, "http://127.0.0.1:9/mcp", options=McpOptions(env={"A": "1"}))
    with pytest.raises(ValueError, match="timeout_s"):
        load_mcp_tools(store, "http://127.0.0.1:9/mcp", options=McpOptions(timeout_s=0))
    with pytest.raises(ValueError, match="mode"):
        load_mcp_tools(store, "http://127.0.0.1:9/mcp", options=McpOptions(mode="newest"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolStore"):
        McpConnection({}, "http://127.0.0.1:9/mcp")  # type: ignore[arg-type]


def test_servers_are_named_without_their_credentials() -> None:
    assert _label_for("https://user:secret@tools.example.com:8443/mcp?token=abc") == (
        "https://tools.example.com:8443/mcp"
    )
    assert _label_for("/usr/bin/mcp-server-time --local-timezone UTC") == (
        "mcp-server-time --local-timezone UTC"
    )
    assert _label_for(["server", "x" * 80]).endswith("...")


def test_content_of_every_kind_becomes_text_or_images() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="plain"),
            mcp_types.ImageContent(data="iVBO", mime_type="image/png"),
            mcp_types.AudioContent(data="UklG", mime_type="audio/wav"),
            mcp_types.ResourceLink(name="notes", uri="file:///notes.txt", description="My notes"),
            mcp_types.EmbeddedResource(
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="A")
            ),
            mcp_types.EmbeddedResource(
                resource=mcp_types.BlobResourceContents(
                    uri="file:///b.png", blob="iVBO", mime_type="image/png"
                )
            ),
            mcp_types.EmbeddedResource(
                resource=mcp_types.BlobResourceContents(
                    uri="file:///c.bin", blob="AAAA", mime_type="application/zip"
                )
            ),
        ]
    )
    assert _content_blocks(result) == [
        TextContent("plain"),
        ImageContent("iVBO", "image/png"),
        TextContent("[audio (audio/wav) left out: only text and images are passed on]"),
        TextContent("[resource notes at file:///notes.txt: My notes]"),
        TextContent("[resource file:///a.txt]\nA"),
        ImageContent("iVBO", "image/png"),
        TextContent("[resource file:///c.bin (application/zip) left out: binary content]"),
    ]
    structured_only = mcp_types.CallToolResult(content=[], structured_content={"n": 1})
    assert _content_blocks(structured_only) == [TextContent('{"n": 1}')]


def test_import_yiemagent_does_not_import_the_sdk() -> None:
    code = (
        "import sys, yiemagent\n"
        "assert 'mcp' not in sys.modules, 'import yiemagent imported mcp'\n"
        "from yiemagent import *\n"
        "assert 'mcp' not in sys.modules, 'import * imported mcp'\n"
        "assert yiemagent.load_mcp_tools.__module__ == 'yiemagent.tools.mcp._connection'\n"
        "assert 'mcp' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=3 * WAIT)

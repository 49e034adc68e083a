"""A store's closers (what holds resources for its tools, such as MCP connections) and removing
one tool by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from agent_helpers import echo_tool

from yiemagent import AssistantMessage, TextContent, ToolStore, YiemAgent, load_tools, register_tool
from yiemagent.tools import unregister_tool


def test_close_runs_every_closer_once_last_added_first(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    def broken() -> None:
        ran.append("broken")
        raise RuntimeError("boom")

    with ToolStore("s") as store:
        store.add_closer(lambda: ran.append("first"))
        store.add_closer(broken)
        take_back = store.add_closer(lambda: ran.append("taken back"))
        store.add_closer(lambda: ran.append("last"))
        take_back()
        take_back()  # twice is harmless
    assert ran == ["last", "broken", "first"]  # the broken one did not stop the others
    assert "a closer of tool store 's' raised" in caplog.text
    store.close()  # closers run once
    assert ran == ["last", "broken", "first"]


def test_a_closer_that_raises_keyboard_interrupt_is_not_swallowed() -> None:
    store = ToolStore()

    def interrupted() -> None:
        raise KeyboardInterrupt

    store.add_closer(interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.close()


def test_unregister_removes_only_the_tool_asked_for() -> None:
    store = ToolStore()
    mine = register_tool(store, echo_tool("a"))
    register_tool(store, echo_tool("b"))
    assert not unregister_tool(store, "a", echo_tool("a"))  # another tool of that name: kept
    assert not unregister_tool(store, "missing")
    assert unregister_tool(store, "a", mine)
    assert list(store.tools) == ["b"]
    assert store.unregister("b") and store.tools == {}


def test_unregistering_a_file_tool_forgets_the_file(tmp_path: Path) -> None:
    (tmp_path / "shout.py").write_text(
        "def get_tool():\n    return AgentTool('shout', 'Shout', 'x', {'type': 'object'}, lambda *a: None)\n"
    )
    store = ToolStore()
    load_tools(store, tmp_path)
    assert unregister_tool(store, "shout")
    assert store.source_of("shout") is None
    load_tools(store, tmp_path)  # the file loads again, as a new file
    assert "shout" in store.tools
    assert store.source_of("shout") == os.path.realpath(tmp_path / "shout.py")


def test_an_agent_made_to_close_its_store_closes_it_at_shutdown() -> None:
    store = ToolStore("closing")
    closed: list[str] = []
    store.add_closer(lambda: closed.append("closed"))
    agent = YiemAgent(
        llm_call=lambda _req: AssistantMessage([TextContent("ok")]), tool_store=store, close_tool_store=True
    )
    agent.shutdown()
    assert closed == ["closed"]
    keeper = ToolStore("kept")
    keeper.add_closer(lambda: closed.append("wrongly closed"))
    YiemAgent(llm_call=lambda _req: AssistantMessage([TextContent("ok")]), tool_store=keeper).shutdown()
    assert closed == ["closed"]

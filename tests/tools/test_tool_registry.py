"""ToolStore, register_tool, get_tools, clear_tools and the listTools tool (spec sections 1 and 4)."""

from __future__ import annotations

from typing import Any

import pytest

from yiemagent.core._content import TextContent
from yiemagent.core._tools import AgentTool, AgentToolResult
from yiemagent.tools._store import (
    LIST_TOOLS_NAME,
    ToolLoadError,
    ToolStore,
    clear_tools,
    get_tools,
    list_tool,
    register_tool,
)


def make_tool(name: str, label: str | None = None, description: str | None = None) -> AgentTool:
    """A tool that answers ``"<name> ran"``."""

    def execute(_id: str, _args: dict[str, Any], _signal: Any, _on_partial: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(f"{name} ran")])

    return AgentTool(
        name=name,
        label=label or name.title(),
        description=description or f"Does {name}.",
        input_schema={"type": "object", "properties": {}},
        execute=execute,
    )


def listing(store: ToolStore) -> str:
    """The text the store's listTools tool returns right now."""
    result = list_tool(store).execute("call-1", {}, None, lambda _p: None)
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def test_register_get_and_clear() -> None:
    store = ToolStore("agent")
    a, b = make_tool("alpha"), make_tool("beta")
    assert register_tool(store, a) is a
    register_tool(store, b)
    assert get_tools(store) == {"alpha": a, "beta": b}
    clear_tools(store)
    assert get_tools(store) == {}


def test_get_tools_returns_the_store_mapping_itself() -> None:
    store = ToolStore("agent")
    tools = get_tools(store)
    register_tool(store, make_tool("alpha"))
    assert tools is store.tools
    assert "alpha" in tools
    tools.pop("alpha")
    assert "alpha" not in store.tools


def test_registration_order_and_replacement_keeps_position() -> None:
    store = ToolStore("agent")
    for name in ("c", "a", "b"):
        register_tool(store, make_tool(name))
    newer_a = make_tool("a", description="The new a.")
    register_tool(store, newer_a)
    assert list(store.tools) == ["c", "a", "b"]
    assert store.tools["a"] is newer_a


def test_stores_are_isolated() -> None:
    first, second = ToolStore("first"), ToolStore("second")
    register_tool(first, make_tool("only_first"))
    register_tool(second, make_tool("only_second"))
    assert list(first.tools) == ["only_first"]
    assert list(second.tools) == ["only_second"]
    clear_tools(first)
    assert list(second.tools) == ["only_second"]
    assert "only_second" not in listing(first)


def test_stores_with_the_same_name_are_still_isolated() -> None:
    first, second = ToolStore("same"), ToolStore("same")
    register_tool(first, make_tool("x"))
    assert second.tools == {}
    assert first.module_namespace() != second.module_namespace()


def test_register_tool_rejects_non_tools() -> None:
    with pytest.raises(TypeError, match="AgentTool"):
        register_tool(ToolStore("agent"), {"name": "fake"})  # type: ignore[arg-type]


def test_list_tool_lists_every_tool_in_registration_order() -> None:
    store = ToolStore("agent")
    register_tool(store, make_tool("getTime", "Time Lookup", "Get current local time."))
    register_tool(store, make_tool("getWeather", "Weather Lookup", "Fetch current weather."))
    register_tool(store, list_tool(store))
    assert listing(store) == (
        "Available tools:\n"
        "- getTime: Time Lookup — Get current local time.\n"
        "- getWeather: Weather Lookup — Fetch current weather.\n"
        "- listTools: List Tools — " + store.tools[LIST_TOOLS_NAME].description
    )


def test_list_tool_reads_the_store_at_call_time() -> None:
    store = ToolStore("agent")
    tool = list_tool(store)
    register_tool(store, make_tool("late", "Late", "Registered after listTools was built."))
    result = tool.execute("call-1", {}, None, lambda _p: None)
    assert "- late: Late — Registered after listTools was built." in result.content[0].text  # type: ignore[union-attr]
    assert result.details == {"tools": ["late"]}


def test_list_tool_flattens_multi_line_descriptions() -> None:
    store = ToolStore("agent")
    register_tool(store, make_tool("multi", "Multi", "First line.\n   Second line."))
    assert listing(store) == "Available tools:\n- multi: Multi — First line. Second line."


def test_list_tool_of_an_empty_store() -> None:
    assert listing(ToolStore("empty")) == "Available tools:\n(none)"


def test_list_tool_shape() -> None:
    tool = list_tool(ToolStore("agent"))
    assert tool.name == "listTools"
    assert tool.input_schema["type"] == "object"
    assert tool.parallel_tool_execute is True


def test_store_methods_match_the_functions(tmp_path: Any) -> None:
    store = ToolStore("agent")
    tool = store.register(make_tool("alpha"))
    assert store.get_tools() is store.tools
    assert store.tools == {"alpha": tool}
    assert store.list_tool().name == LIST_TOOLS_NAME
    (tmp_path / "beta.py").write_text(
        "def get_tool():\n    return AgentTool('beta', 'Beta', 'b', {'type': 'object'}, lambda *a: None)\n"
    )
    assert list(store.load(tmp_path)) == ["alpha", "beta", "listTools"]
    store.clear()
    assert store.tools == {}


def test_store_repr_names_the_tools() -> None:
    store = ToolStore("agent")
    register_tool(store, make_tool("alpha"))
    assert "alpha" in repr(store)
    assert "agent" in repr(store)


def test_tool_load_error_lists_every_problem() -> None:
    error = ToolLoadError([("/t/a.py", "syntax error at line 1"), ("/t/b.py", "no get_tool")])
    assert error.problems == [("/t/a.py", "syntax error at line 1"), ("/t/b.py", "no get_tool")]
    assert "2 tool files could not be loaded" in str(error)
    assert "/t/a.py: syntax error at line 1" in str(error)
    assert "/t/b.py: no get_tool" in str(error)

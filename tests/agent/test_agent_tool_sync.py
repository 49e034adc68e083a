"""An agent's tools and its tool store: reloads, removals and registrations reach the next turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_helpers import WAIT, ScriptedLLM, call, echo_tool, reply

from yiemagent import (
    AgentTool,
    ToolResultMessage,
    ToolStore,
    YiemAgent,
    get_tools,
    load_tools,
    register_tool,
)

TOOL_FILE = """
def execute_tool(tool_call_id, args, signal, on_partial_result):
    return AgentToolResult([TextContent("{name} says {word}")])

def get_tool():
    return AgentTool(name="{name}", label="{name}", description="says {word}",
                     input_schema={{"type": "object"}}, execute=execute_tool)
"""


def write_tool(folder: Path, name: str, word: str) -> None:
    (folder / f"{name}.py").write_text(TOOL_FILE.format(name=name, word=word))


def offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def last_result(agent: YiemAgent) -> ToolResultMessage:
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    return results[-1]


def result_text(msg: ToolResultMessage) -> str:
    return msg.content[0].text  # type: ignore[union-attr]


def ask(agent: YiemAgent, tool: str) -> ToolResultMessage:
    agent.prompt(f"use {tool}", timeout=WAIT)
    return last_result(agent)


def calling(tool: str) -> Any:
    """A model that calls ``tool`` when asked to, then answers."""

    def answer(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["role"] == "tool":
            return reply("done")
        return call(tool, {})

    return answer


def test_an_agent_given_its_stores_tools_follows_reloads_removals_and_registrations(tmp_path: Path) -> None:
    write_tool(tmp_path, "alpha", "one")
    store = ToolStore("live")
    load_tools(store, tmp_path)
    llm = ScriptedLLM(default=calling("alpha"))
    with YiemAgent(llm_call=llm, tools=get_tools(store), tool_store=store) as agent:
        assert result_text(ask(agent, "alpha")) == "alpha says one"
        write_tool(tmp_path, "alpha", "two")
        load_tools(store, tmp_path)
        assert result_text(ask(agent, "alpha")) == "alpha says two"  # the reload reached it
        register_tool(store, echo_tool("later"))
        agent.prompt("anything", timeout=WAIT)
        assert "later" in offered(llm.requests[-1])
        (tmp_path / "alpha.py").unlink()
        load_tools(store, tmp_path)
        gone = ask(agent, "alpha")
        assert gone.is_error and "not found" in result_text(gone)
        assert "alpha" not in offered(llm.requests[-1])


def test_an_agent_given_some_tools_refreshes_only_those_from_the_store(tmp_path: Path) -> None:
    write_tool(tmp_path, "alpha", "one")
    write_tool(tmp_path, "beta", "one")
    store = ToolStore("subset")
    load_tools(store, tmp_path)
    own = echo_tool("own")
    llm = ScriptedLLM(default=calling("alpha"))
    with YiemAgent(llm_call=llm, tools=[store.tools["alpha"], own], tool_store=store) as agent:
        assert result_text(ask(agent, "alpha")) == "alpha says one"
        assert offered(llm.requests[0]) == ["alpha", "own"]  # beta was not given
        write_tool(tmp_path, "alpha", "two")
        load_tools(store, tmp_path)
        assert result_text(ask(agent, "alpha")) == "alpha says two"
        assert offered(llm.requests[-1]) == ["alpha", "own"]
        (tmp_path / "alpha.py").unlink()
        load_tools(store, tmp_path)
        agent.prompt("anything", timeout=WAIT)
        assert offered(llm.requests[-1]) == ["own"]  # gone from the store, gone here


def test_tools_given_as_a_mapping_are_checked() -> None:
    tool = echo_tool("bar")
    with pytest.raises(ValueError, match=r"key 'foo'.*named 'bar'"):
        YiemAgent(llm_call=ScriptedLLM(), tools={"foo": tool})
    with pytest.raises(TypeError, match="AgentTool instances"):
        YiemAgent(llm_call=ScriptedLLM(), tools={"x": "not a tool"})  # type: ignore[dict-item]


def test_tools_are_copied_from_the_mapping_given() -> None:
    given: dict[str, AgentTool] = {"echo": echo_tool()}
    with YiemAgent(llm_call=ScriptedLLM(), tools=given) as agent:
        assert agent.tools == given and agent.tools is not given

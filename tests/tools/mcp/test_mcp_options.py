"""``McpOptions``: an MCP connection's settings in one checked value, shared by ``load_mcp_tools``
and ``McpConnection`` (issue 20).

The settings are proven on a real stdio server written with the SDK's own ``MCPServer`` (a
script the test writes), which reports the working directory and environment it was started
with; one options value starts two servers.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from tiers import absent

pytest.importorskip("mcp.types", reason=absent("mcp"))  # not "mcp": tests/tools/mcp is one too

from agent_helpers import WAIT
from mcp_helpers import nothing_left_behind

from yiemagent import ToolStore
from yiemagent.tools import McpOptions as McpOptionsFromTools
from yiemagent.tools.mcp import McpConnection, McpOptions, load_mcp_tools

# A server whose one tool says where it runs: its working directory and one variable.
WHERE_SERVER = textwrap.dedent("""
    import json, os
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("yiem-where", log_level="ERROR")

    @server.tool()
    def where() -> str:
        return json.dumps({"cwd": os.getcwd(), "var": os.environ.get("YIEM_OPTIONS_TEST")})

    server.run()
""")


@pytest.fixture
def no_leaks() -> Iterator[None]:
    with nothing_left_behind():
        yield


@pytest.fixture
def where_server(tmp_path: Path) -> list[str]:
    script = tmp_path / "where_server.py"
    script.write_text(WHERE_SERVER)
    return [sys.executable, str(script)]


def where(store: ToolStore, name: str = "where") -> dict[str, Any]:
    result = store.tools[name].execute("c1", {}, None, None)
    told: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return told


def test_one_options_value_starts_two_servers_as_it_says(
    where_server: list[str], tmp_path: Path, no_leaks: None
) -> None:
    home = tmp_path / "server home"
    home.mkdir()
    options = McpOptions(
        env={"YIEM_OPTIONS_TEST": "from the options"},
        cwd=home,
        parallel=False,
        timeout_s=3 * WAIT,
        connect_timeout_s=3 * WAIT,
    )
    with ToolStore() as store:
        first = load_mcp_tools(store, where_server, prefix="a_", options=options)
        second = McpConnection(store, where_server, prefix="b_", options=options)
        try:
            assert store.tools.keys() == {"a_where", "b_where"}
            for name in store.tools:
                assert where(store, name) == {"cwd": str(home), "var": "from the options"}
                assert store.tools[name].parallel_tool_execute is False
            assert first.options is second.options is options
            assert (first.timeout_s, first.connect_timeout_s) == (3 * WAIT, 3 * WAIT)
        finally:
            second.close()


def test_without_options_a_server_gets_the_defaults(
    where_server: list[str], no_leaks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YIEM_OPTIONS_TEST", "in this process only")
    with ToolStore() as store, load_mcp_tools(store, where_server) as connection:
        assert connection.options == McpOptions()
        assert where(store)["var"] is None  # the safe default environment, not os.environ's
        assert store.tools["where"].parallel_tool_execute is True


@pytest.mark.parametrize(
    ("field", "bad", "said"),
    [
        ("timeout_s", 0, "timeout_s must be a positive number of seconds or None, got 0"),
        ("connect_timeout_s", None, "connect_timeout_s must be a positive number of seconds, got None"),
        ("connect_timeout_s", -1, "connect_timeout_s must be a positive number of seconds, got -1"),
        ("max_result_bytes", 1.5, "max_result_bytes must be a positive whole number of bytes"),
        ("parallel", "yes", "parallel must be True or False, got 'yes'"),
        ("mode", "newest", "mode must be 'auto' or 'legacy', got 'newest'"),
        ("cwd", 3, "cwd must be a path (a str or os.PathLike) or None, got 3"),
        ("env", ["A=1"], "env must be a dict of names to strings, got a list"),
        (
            "headers",
            {"X-Retries": 3},
            "headers must map names to strings; the value of 'X-Retries' is of type int, not str",
        ),
    ],
)
def test_every_setting_is_checked_when_the_options_are_made(field: str, bad: Any, said: str) -> None:
    with pytest.raises(ValueError) as info:
        McpOptions(**{field: bad})
    assert str(info.value).startswith(said)


def test_secrets_in_env_and_headers_never_show() -> None:
    options = McpOptions(
        env={"API_KEY": "sk-env-secret"}, headers={"Authorization": "Bearer sk-header-secret"}
    )
    shown = repr(options)
    assert "sk-env-secret" not in shown and "sk-header-secret" not in shown
    assert "'API_KEY': '***'" in shown and "'Authorization': '***'" in shown
    with pytest.raises(ValueError) as info:
        McpOptions(headers={"Authorization": "Bearer sk-header-secret", "X-Bad": 3})
    assert "sk-header-secret" not in str(info.value)


def test_the_options_are_frozen_and_keep_their_own_copies() -> None:
    env = {"A": "1"}
    options = McpOptions(env=env)
    env["A"] = "changed"
    assert options.env == {"A": "1"}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        options.timeout_s = 5  # type: ignore[misc]


def test_settings_that_do_not_fit_the_server_are_refused_before_it_starts() -> None:
    store = ToolStore()
    with pytest.raises(ValueError, match="headers apply to an http"):
        load_mcp_tools(store, "some-server", options=McpOptions(headers={"A": "b"}))
    with pytest.raises(ValueError, match="env, cwd and errlog apply to a command"):
        load_mcp_tools(store, "http://127.0.0.1:9/mcp", options=McpOptions(cwd="/"))
    with pytest.raises(
        TypeError,
        match=r"options must be an McpOptions .*got dict; e\.g\. "
        r"options=McpOptions\(timeout_s=30\)",
    ):
        load_mcp_tools(store, "some-server", options={"timeout_s": 5})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timeout_s"):
        load_mcp_tools(store, "some-server", timeout_s=5)  # type: ignore[call-arg]
    assert store.tools == {}


def test_the_options_are_exported_where_the_connection_is() -> None:
    assert McpOptionsFromTools is McpOptions


def test_env_and_headers_are_read_only_copies_and_the_options_hash_and_pickle() -> None:
    """Options shared by several connections stay as they were made: changing the dict they were
    given, or trying to change theirs, changes nothing a later reconnect would send."""
    import copy
    import pickle

    given = {"TOKEN": "one"}
    options = McpOptions(env=given, headers={"Authorization": "Bearer x"}, timeout_s=5)
    given["TOKEN"] = "two"
    assert options.env == {"TOKEN": "one"}
    with pytest.raises(TypeError):
        options.env["TOKEN"] = "three"  # type: ignore[index]
    same = McpOptions(env={"TOKEN": "one"}, headers={"Authorization": "Bearer x"}, timeout_s=5)
    assert hash(options) == hash(same) and options == same
    assert pickle.loads(pickle.dumps(options)) == options == copy.deepcopy(options)


def test_needs_approval_reaches_every_tool_of_the_server_and_pauses_its_calls(
    where_server: list[str], no_leaks: None
) -> None:
    from agent_helpers import ScriptedLLM, call, reply

    from yiemagent import Approve, YiemAgent

    with ToolStore() as store, load_mcp_tools(store, where_server, needs_approval=True):
        assert store.tools["where"].needs_approval is True
        with YiemAgent(llm_call=ScriptedLLM(call("where", {}), reply("here")), tool_store=store) as agent:
            assert agent.prompt("where?", WAIT).stop_reason == "awaiting_approval"
            assert [p.tool_name for p in agent.pending_approvals] == ["where"]
            agent.resume(approvals={agent.pending_approvals[0].tool_call_id: Approve()})
            assert agent.take_response(timeout=WAIT).stop_reason == "stop"
            result = next(m for m in agent.messages if m.role == "toolResult")
            assert not result.is_error and "cwd" in result.content[0].text
    with ToolStore() as store, load_mcp_tools(store, where_server):
        assert store.tools["where"].needs_approval is False
    with pytest.raises(TypeError, match="needs_approval must be True, False or a function"):
        load_mcp_tools(ToolStore(), where_server, needs_approval="always")  # type: ignore[arg-type]

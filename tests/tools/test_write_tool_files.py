"""What ``writeTool`` writes and refuses on disk: never through a symbolic link, never a module name
that would shadow the standard library or an installed package; and a call a ``before_tool_call``
hook blocks runs none of a model-written tool's code."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT
from tool_file_helpers import SECRET, text_of

from yiemagent.core._content import AgentToolCall
from yiemagent.core._messages import AssistantMessage, ToolResultMessage
from yiemagent.core._pipeline import execute_tool_calls
from yiemagent.core._tools import (
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from yiemagent.tools._store import ToolStore, load_tools

# -- 15: writeTool and symbolic links -----------------------------------------------------------

REPO_TOOLS = ROOT / "tools"

ECHO_ARGS: dict[str, Any] = {
    "name": "innerA",
    "label": "Inner A",
    "description": "Say which version answered.",
    "inputSchema": {"type": "object", "properties": {}},
    "executeCode": "return 'version 1'",
}


@pytest.fixture
def writer_store(tools_dir: Path) -> ToolStore:
    shutil.copy(REPO_TOOLS / "writeTool.py", tools_dir / "writeTool.py")
    store = ToolStore("writer")
    load_tools(store, tools_dir)
    return store


def call_tool(
    store: ToolStore, name: str, args: dict[str, Any], config: AgentLoopConfig | None = None
) -> ToolResultMessage:
    """Run one call of ``name`` through the tool pipeline with the store's current tools."""
    call = AgentToolCall("call-1", name, args)
    context = AgentContext("", [], dict(store.tools))
    batch = execute_tool_calls(
        context, AssistantMessage(content=[call]), [call], config or AgentLoopConfig(), None, None
    )
    return batch.messages[0]


def test_write_tool_never_writes_through_a_link_inside_its_folder(
    writer_store: ToolStore, tools_dir: Path
) -> None:
    assert not call_tool(writer_store, "writeTool", ECHO_ARGS).is_error
    inner = tools_dir / "innerA.py"
    original = inner.read_bytes()
    (tools_dir / "aliasB.py").symlink_to("innerA.py")
    refused = call_tool(
        writer_store,
        "writeTool",
        {**ECHO_ARGS, "name": "aliasB", "executeCode": "return 'hijacked'", "overwrite": True},
    )
    assert refused.is_error
    assert (
        "aliasB.py is a symbolic link to innerA.py in the tool folder; writeTool never writes "
        "through a symbolic link. Choose another name."
    ) in text_of(refused)
    assert inner.read_bytes() == original
    assert (tools_dir / "aliasB.py").is_symlink()
    assert "aliasB" not in writer_store.tools
    assert text_of(call_tool(writer_store, "innerA", {})) == "version 1"


def test_write_tool_refuses_a_link_out_of_its_folder_without_showing_the_target(
    writer_store: ToolStore, tools_dir: Path, outside: Path
) -> None:
    (tools_dir / "leak.py").symlink_to(outside)
    refused = call_tool(writer_store, "writeTool", {**ECHO_ARGS, "name": "leak", "overwrite": True})
    assert refused.is_error and "leak.py is a symbolic link that leads outside" in text_of(refused)
    assert str(outside) not in text_of(refused) and "SECRET" not in text_of(refused)
    assert outside.read_text() == SECRET + "\n"


# -- 16: writeTool refuses names that shadow a module -------------------------------------------


def assert_name_refused(store: ToolStore, folder: Path, name: str, why: str) -> str:
    before = sorted(os.listdir(folder))
    refused = call_tool(store, "writeTool", {**ECHO_ARGS, "name": name})
    message = text_of(refused)
    assert refused.is_error, message
    assert f'"name" {name!r} is the name of {why}' in message
    assert "Choose another name" in message
    assert sorted(os.listdir(folder)) == before and name not in store.tools
    return message


@pytest.mark.parametrize("name", ["json", "os", "calendar", "time", "sys", "this"])
def test_write_tool_refuses_a_standard_library_module_name(
    writer_store: ToolStore, tools_dir: Path, name: str
) -> None:
    message = assert_name_refused(writer_store, tools_dir, name, "a module of Python's standard library")
    assert f'e.g. "{name}Tool"' in message


@pytest.mark.parametrize("name", ["yiemagent", "jsonschema", "attrs", "requests"])
def test_write_tool_refuses_an_installed_top_level_name(
    writer_store: ToolStore, tools_dir: Path, name: str
) -> None:
    assert_name_refused(writer_store, tools_dir, name, "a top-level module of the installed distribution")


def test_write_tool_refuses_a_module_only_find_spec_finds(
    writer_store: ToolStore, tools_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "localHelpers.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(site))
    assert_name_refused(writer_store, tools_dir, "localHelpers", "a module Python can import")


def test_write_tool_refuses_a_top_level_name_only_a_distribution_declares(
    writer_store: ToolStore, tools_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A distribution whose top-level module is not importable from here (as with a package
    # installed for another platform): only importlib.metadata knows the name.
    info = tmp_path / "site" / "phantom-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: phantom\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("phantomTop\n")
    monkeypatch.syspath_prepend(str(info.parent))
    assert_name_refused(
        writer_store, tools_dir, "phantomTop", "a top-level module of the installed distribution phantom"
    )


def test_a_tool_folder_on_the_import_path_does_not_make_a_written_tool_shadow_itself(
    writer_store: ToolStore, tools_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tools_dir))
    assert not call_tool(writer_store, "writeTool", ECHO_ARGS).is_error
    again = call_tool(
        writer_store, "writeTool", {**ECHO_ARGS, "executeCode": "return 'version 2'", "overwrite": True}
    )
    assert not again.is_error, text_of(again)
    assert text_of(call_tool(writer_store, "innerA", {})) == "version 2"


# -- 17: a blocking before_tool_call runs none of a model-written tool's code -------------------


def block_everything(_ctx: BeforeToolCallContext, _signal: AbortSignal | None) -> BeforeToolCallResult:
    return BeforeToolCallResult(block=True, reason="Not approved by the operator.")


def marker_code(marker: Path, then: str) -> str:
    """Code that leaves ``marker`` behind when it runs, then does ``then``."""
    return f"open({str(marker)!r}, 'w').close()\n{then}"


@pytest.mark.parametrize(
    "fields",
    [("prepareCode",), ("validateCode",), ("prepareCode", "validateCode")],
)
def test_a_blocked_call_runs_none_of_a_written_tools_code(
    writer_store: ToolStore, tmp_path: Path, fields: tuple[str, ...]
) -> None:
    markers = {field: tmp_path / f"{field}.ran" for field in fields}
    code = {"prepareCode": "return args", "validateCode": "return None"}
    args = {
        **ECHO_ARGS,
        "name": "gated",
        "executeCode": marker_code(tmp_path / "execute.ran", "return 'ran'"),
    }
    args.update({field: marker_code(markers[field], code[field]) for field in fields})
    assert not call_tool(writer_store, "writeTool", args).is_error

    blocked = call_tool(writer_store, "gated", {}, AgentLoopConfig(before_tool_call=block_everything))
    assert blocked.is_error and text_of(blocked) == "Not approved by the operator."
    assert sorted(p.name for p in tmp_path.glob("*.ran")) == []

    allowed = call_tool(writer_store, "gated", {})
    assert text_of(allowed) == "ran"  # the same code does run once the call is let through
    assert sorted(p.name for p in tmp_path.glob("*.ran")) == sorted(
        [*(f"{f}.ran" for f in fields), "execute.ran"]
    )


DIVIDE_ARGS: dict[str, Any] = {
    **ECHO_ARGS,
    "name": "divide",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    "executeCode": "return str(args['a'] / args['b'])",
    "prepareCode": (
        "if args.get('a') == 'boom':\n    raise ValueError('cannot prepare boom')\n"
        "return {k: float(v) if isinstance(v, str) else v for k, v in args.items()}"
    ),
    "validateCode": "if args['b'] == 0:\n    return 'b must not be zero'",
}


def test_a_written_tools_checks_give_the_same_errors_at_the_start_of_execute(
    writer_store: ToolStore,
) -> None:
    assert not call_tool(writer_store, "writeTool", DIVIDE_ARGS).is_error
    seen: list[dict[str, Any]] = []

    def record(ctx: BeforeToolCallContext, _signal: AbortSignal | None) -> None:
        seen.append(ctx.args)

    config = AgentLoopConfig(before_tool_call=record)
    assert text_of(call_tool(writer_store, "divide", {"a": "9", "b": "2"}, config)) == "4.5"
    assert seen == [{"a": "9", "b": "2"}]  # the hook saw the call before the tool's code ran

    zero = call_tool(writer_store, "divide", {"a": 1, "b": "0"}, config)
    assert zero.is_error
    assert (
        'Validation failed for tool "divide":\n  - b must not be zero\n\nReceived arguments:\n'
        '{\n  "a": 1,\n  "b": 0.0\n}'
    ) in text_of(zero)

    wrong_type = call_tool(writer_store, "divide", {"a": 1, "b": True}, config)
    assert wrong_type.is_error and "args.b: True is not of type 'number'" in text_of(wrong_type)

    boom = call_tool(writer_store, "divide", {"a": "boom", "b": 1}, config)
    assert boom.is_error
    assert 'Preparing the arguments for tool "divide" failed: ValueError: cannot prepare boom' in text_of(
        boom
    )

"""load_tools: tool files in a folder, module isolation, reloads and load errors (spec 1, 4, 17)."""

from __future__ import annotations

import gc
import logging
import os
import pickle
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from yiemagent.core._content import TextContent
from yiemagent.core._tools import AgentTool, AgentToolResult
from yiemagent.tools._store import (
    ToolLoadError,
    ToolStore,
    check_tool_file,
    clear_tools,
    load_tool_file,
    load_tools,
    register_tool,
)

REPO_TOOLS = ROOT / "tools"


def tool_file(name: str, reply: str | None = None, extra: str = "") -> str:
    """Source of a minimal tool file relying only on the injected core types."""
    reply = reply if reply is not None else f"{name} says hi"
    return (
        extra
        + "\n"
        + textwrap.dedent(
            f"""
        def execute_tool(tool_call_id, args, signal, on_partial_result):
            return AgentToolResult([TextContent({reply!r})])

        def get_tool():
            return AgentTool(
                name={name!r},
                label={name.title()!r},
                description="Tool {name}.",
                input_schema={{"type": "object", "properties": {{}}}},
                execute=execute_tool,
            )
        """
        )
    )


def write(folder: Path, filename: str, source: str) -> Path:
    path = folder / filename
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def run(tool: AgentTool, args: dict[str, Any] | None = None) -> str:
    result = tool.execute("call-1", args or {}, None, lambda _p: None)
    assert isinstance(result, AgentToolResult)
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def problems_of(store: ToolStore, folder: Path) -> dict[str, str]:
    """Load ``folder`` expecting a ToolLoadError; return ``{file name: message}``."""
    with pytest.raises(ToolLoadError) as info:
        load_tools(store, folder)
    return {os.path.basename(path): message for path, message in info.value.problems}


# -- loading ------------------------------------------------------------------------------------


def test_files_load_in_sorted_order_with_list_tools_last(tmp_path: Path) -> None:
    write(tmp_path, "c.py", tool_file("gamma"))
    write(tmp_path, "a.py", tool_file("zeta"))
    write(tmp_path, "b.py", tool_file("alpha"))
    store = ToolStore("agent")
    tools = load_tools(store, tmp_path)
    assert tools is store.tools
    assert list(tools) == ["zeta", "alpha", "gamma", "listTools"]
    assert store.folder == os.path.realpath(tmp_path)


def test_skips_private_registry_and_non_python_files(tmp_path: Path) -> None:
    write(tmp_path, "kept.py", tool_file("kept"))
    write(tmp_path, "_private.py", tool_file("private"))
    write(tmp_path, "toolregistry.py", tool_file("registry1"))
    write(tmp_path, "my_registry_helpers.py", tool_file("registry2"))
    write(tmp_path, "notes.txt", "not python")
    (tmp_path / "folder.py").mkdir()
    assert list(load_tools(ToolStore("agent"), tmp_path)) == ["kept", "listTools"]


def test_list_tools_lists_the_loaded_tools(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    tools = load_tools(ToolStore("agent"), tmp_path)
    assert run(tools["listTools"]).startswith("Available tools:\n- alpha: Alpha — Tool alpha.\n- listTools:")


def test_each_file_runs_in_its_own_module(tmp_path: Path) -> None:
    helper = "def helper():\n    return {!r}\n"
    for name in ("first", "second"):
        write(
            tmp_path,
            f"{name}.py",
            helper.format(f"helper of {name}")
            + textwrap.dedent(
                f"""
            def execute_tool(tool_call_id, args, signal, on_partial_result):
                return AgentToolResult([TextContent(helper())])

            def get_tool():
                return AgentTool({name!r}, {name!r}, "d", {{"type": "object"}}, execute_tool)
            """
            ),
        )
    tools = load_tools(ToolStore("agent"), tmp_path)
    assert run(tools["first"]) == "helper of first"
    assert run(tools["second"]) == "helper of second"


def test_modules_live_under_the_store_namespace(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    store = ToolStore("my agent")
    tools = load_tools(store, tmp_path)
    module_name = tools["alpha"].execute.__module__
    assert module_name == f"{store.module_namespace()}.a"
    assert module_name.startswith("yiemagent_tools.my_agent_")
    assert sys.modules[module_name].__file__ == os.path.realpath(tmp_path / "a.py")


def test_two_stores_loading_one_folder_get_separate_modules(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    first = load_tools(ToolStore("agent"), tmp_path)
    second = load_tools(ToolStore("agent"), tmp_path)
    assert first["alpha"] is not second["alpha"]
    assert first["alpha"].execute.__module__ != second["alpha"].execute.__module__


def test_only_core_types_are_injected(tmp_path: Path) -> None:
    write(tmp_path, "uses_os.py", tool_file("usesOs", extra="CWD = os.getcwd()"))
    problems = problems_of(ToolStore("agent"), tmp_path)
    assert "NameError at line 1" in problems["uses_os.py"]
    assert "'os' is not defined" in problems["uses_os.py"]


def test_a_file_imports_what_it_needs(tmp_path: Path) -> None:
    write(
        tmp_path,
        "imports.py",
        """
        import json

        def execute_tool(tool_call_id, args, signal, on_partial_result):
            return AgentToolResult([TextContent(json.dumps(args, sort_keys=True))])

        def get_tool():
            return AgentTool("dumps", "Dumps", "d", {"type": "object"}, execute_tool)
        """,
    )
    tools = load_tools(ToolStore("agent"), tmp_path)
    assert run(tools["dumps"], {"b": 1, "a": [2]}) == '{"a": [2], "b": 1}'


def test_dataclasses_work_in_tool_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        "dc.py",
        "from __future__ import annotations\nimport dataclasses\n"
        "@dataclasses.dataclass\nclass Point:\n    x: int\n    y: int = 0\n" + tool_file("dc"),
    )
    assert "dc" in load_tools(ToolStore("agent"), tmp_path)


def test_what_a_tool_file_defines_can_be_pickled(tmp_path: Path) -> None:
    write(
        tmp_path,
        "dc.py",
        """
        import dataclasses

        @dataclasses.dataclass
        class Point:
            x: int

        def execute_tool(tool_call_id, args, signal, on_partial_result):
            return AgentToolResult([TextContent("point")], {"point": Point(3)})

        def get_tool():
            return AgentTool("dc", "Dc", "d", {"type": "object"}, execute_tool)
        """,
    )
    store = ToolStore("agent")
    point = load_tools(store, tmp_path)["dc"].execute("c1", {}, None, None).details["point"]
    assert pickle.loads(pickle.dumps(point)) == point
    assert type(point).__module__ == f"{store.module_namespace()}.dc"


def test_a_dropped_store_takes_its_modules_out_of_sys_modules(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    store = ToolStore("agent")
    load_tools(store, tmp_path)
    namespace = store.module_namespace()
    assert f"{namespace}.a" in sys.modules
    del store
    gc.collect()  # listTools' closure and the store form a cycle
    assert [m for m in sys.modules if m == namespace or m.startswith(f"{namespace}.")] == []


def test_get_tool_with_a_parameter_receives_the_store(tmp_path: Path) -> None:
    write(
        tmp_path,
        "bound.py",
        """
        def get_tool(store):
            def execute(tool_call_id, args, signal, on_partial_result):
                return AgentToolResult([TextContent("store " + store.name)])
            return AgentTool("bound", "Bound", "d", {"type": "object"}, execute)
        """,
    )
    tools = load_tools(ToolStore("agentX"), tmp_path)
    assert run(tools["bound"]) == "store agentX"


def test_the_shipped_tools_folder_loads() -> None:
    store = ToolStore("shipped")
    tools = load_tools(store, REPO_TOOLS)
    assert list(tools) == ["getTime", "getWeather", "writeTool", "listTools"]
    assert tools["getWeather"].parallel_tool_execute is True
    clear_tools(store)


def test_missing_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="does not exist"):
        load_tools(ToolStore("agent"), tmp_path / "nope")


# -- reloading ----------------------------------------------------------------------------------


def test_reload_reexecutes_changed_files_only(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha", reply="version 1"))
    write(tmp_path, "b.py", tool_file("beta"))
    store = ToolStore("agent")
    before = dict(load_tools(store, tmp_path))
    write(tmp_path, "a.py", tool_file("alpha", reply="version 2"))
    after = load_tools(store, tmp_path)
    assert run(after["alpha"]) == "version 2"
    assert after["alpha"] is not before["alpha"]
    assert after["beta"] is before["beta"]
    assert list(after) == ["alpha", "beta", "listTools"]


def test_reload_with_the_same_size_and_mtime_still_sees_the_change(tmp_path: Path) -> None:
    path = write(tmp_path, "a.py", tool_file("alpha", reply="AAAA"))
    store = ToolStore("agent")
    load_tools(store, tmp_path)
    stat = path.stat()
    write(tmp_path, "a.py", tool_file("alpha", reply="BBBB"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert run(load_tools(store, tmp_path)["alpha"]) == "BBBB"


def test_reload_drops_tools_whose_file_is_gone(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    write(tmp_path, "b.py", tool_file("beta"))
    store = ToolStore("agent")
    module = load_tools(store, tmp_path)["alpha"].execute.__module__
    (tmp_path / "a.py").unlink()
    assert list(load_tools(store, tmp_path)) == ["beta", "listTools"]
    assert module not in sys.modules


def test_reload_adds_new_files_and_keeps_list_tools_last(tmp_path: Path) -> None:
    write(tmp_path, "b.py", tool_file("beta"))
    store = ToolStore("agent")
    load_tools(store, tmp_path)
    write(tmp_path, "a.py", tool_file("alpha"))
    tools = load_tools(store, tmp_path)
    assert list(tools) == ["beta", "alpha", "listTools"]
    assert "- alpha: Alpha" in run(tools["listTools"])


def test_reload_never_drops_tools_registered_by_hand(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    store = ToolStore("agent")
    load_tools(store, tmp_path)
    manual = AgentTool("manual", "Manual", "d", {"type": "object"}, lambda *a: None)
    register_tool(store, manual)
    (tmp_path / "a.py").unlink()
    assert load_tools(store, tmp_path)["manual"] is manual


def manual_tool(name: str) -> AgentTool:
    return AgentTool(name, f"Manual {name}", "d", {"type": "object"}, lambda *a: None)


def test_a_file_cannot_take_a_name_registered_by_hand(tmp_path: Path) -> None:
    store = ToolStore("agent")
    manual = register_tool(store, manual_tool("alpha"))
    write(tmp_path, "a.py", tool_file("alpha"))
    write(tmp_path, "b.py", tool_file("beta"))
    problems = problems_of(store, tmp_path)
    assert list(problems) == ["a.py"]
    assert '"alpha"' in problems["a.py"] and "registered by hand" in problems["a.py"]
    assert store.tools["alpha"] is manual
    assert list(store.tools) == ["alpha", "beta", "listTools"]
    assert not [m for m in sys.modules if m.startswith(f"{store.module_namespace()}.a")]
    write(tmp_path, "a.py", tool_file("alpha", reply="changed"))
    assert "registered by hand" in problems_of(store, tmp_path)["a.py"]
    (tmp_path / "a.py").unlink()
    assert load_tools(store, tmp_path)["alpha"] is manual


def test_a_hand_registered_replacement_of_a_file_tool_holds_its_name(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    write(tmp_path, "b.py", tool_file("beta"))
    store = ToolStore("agent")
    module = load_tools(store, tmp_path)["alpha"].execute.__module__
    manual = register_tool(store, manual_tool("alpha"))
    assert list(store.tools) == ["alpha", "beta", "listTools"]  # replaced in place
    assert store.source_of("alpha") is None and module not in sys.modules
    problems = problems_of(store, tmp_path)  # unchanged, yet reported: its name is taken
    assert list(problems) == ["a.py"] and "registered by hand" in problems["a.py"]
    assert store.tools["alpha"] is manual
    (tmp_path / "a.py").unlink()
    assert load_tools(store, tmp_path)["alpha"] is manual


def test_reload_follows_a_renamed_tool(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("oldName"))
    store = ToolStore("agent")
    load_tools(store, tmp_path)
    write(tmp_path, "a.py", tool_file("newName"))
    assert list(load_tools(store, tmp_path)) == ["newName", "listTools"]


def test_a_file_that_breaks_is_dropped_and_comes_back_when_fixed(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    store = ToolStore("agent")
    load_tools(store, tmp_path)
    write(tmp_path, "a.py", "def get_tool(:\n")
    assert "syntax error" in problems_of(store, tmp_path)["a.py"]
    assert "alpha" not in store.tools
    write(tmp_path, "a.py", tool_file("alpha"))
    assert "alpha" in load_tools(store, tmp_path)


def test_clear_tools_makes_the_next_load_reexecute(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    store = ToolStore("agent")
    first = load_tools(store, tmp_path)["alpha"]
    clear_tools(store)
    assert store.tools == {}
    assert load_tools(store, tmp_path)["alpha"] is not first


def test_loading_a_second_folder_keeps_the_first_folders_tools(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    write(one, "a.py", tool_file("alpha"))
    write(two, "b.py", tool_file("beta"))
    store = ToolStore("agent")
    load_tools(store, one)
    assert list(load_tools(store, two)) == ["alpha", "beta", "listTools"]
    assert store.folder == os.path.realpath(two)


# -- load errors --------------------------------------------------------------------------------


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    write(tmp_path, "broken.py", "x = 1\n\ndef get_tool(:\n    pass\n")
    message = problems_of(ToolStore("agent"), tmp_path)["broken.py"]
    assert message.startswith("syntax error at line 3")
    assert "def get_tool(:" in message


def test_import_error_names_the_module_and_line(tmp_path: Path) -> None:
    write(tmp_path, "needs.py", "import json\nimport surely_not_an_installed_module_xyz\n")
    message = problems_of(ToolStore("agent"), tmp_path)["needs.py"]
    assert message.startswith("import error at line 2")
    assert "surely_not_an_installed_module_xyz" in message


def test_missing_get_tool(tmp_path: Path) -> None:
    write(tmp_path, "empty.py", "X = 1\n")
    assert "defines no get_tool()" in problems_of(ToolStore("agent"), tmp_path)["empty.py"]


def test_get_tool_returning_the_wrong_type(tmp_path: Path) -> None:
    write(tmp_path, "wrong.py", "def get_tool():\n    return {'name': 'wrong'}\n")
    message = problems_of(ToolStore("agent"), tmp_path)["wrong.py"]
    assert message == "get_tool() returned dict; it must return an AgentTool"


def test_get_tool_raising(tmp_path: Path) -> None:
    write(tmp_path, "raises.py", "def get_tool():\n    raise RuntimeError('no config')\n")
    message = problems_of(ToolStore("agent"), tmp_path)["raises.py"]
    assert message == "RuntimeError at line 2 in get_tool(): no config"


def test_invalid_schema_is_reported(tmp_path: Path) -> None:
    write(
        tmp_path,
        "schema.py",
        """
        def get_tool():
            return AgentTool("bad", "Bad", "d", {"type": "nonsense"}, lambda *a: None)
        """,
    )
    message = problems_of(ToolStore("agent"), tmp_path)["schema.py"]
    assert "ValueError" in message and "not a valid JSON Schema" in message


def test_two_files_giving_one_name_name_both_files(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("same", reply="from a"))
    write(tmp_path, "b.py", tool_file("same", reply="from b"))
    store = ToolStore("agent")
    problems = problems_of(store, tmp_path)
    assert list(problems) == ["b.py"]
    assert "a.py" in problems["b.py"] and '"same"' in problems["b.py"]
    assert run(store.tools["same"]) == "from a"


def test_an_existing_owner_keeps_its_name_on_reload(tmp_path: Path) -> None:
    write(tmp_path, "b.py", tool_file("same", reply="from b"))
    store = ToolStore("agent")
    load_tools(store, tmp_path)
    write(tmp_path, "a.py", tool_file("same", reply="from a"))
    problems = problems_of(store, tmp_path)
    assert list(problems) == ["a.py"] and "b.py" in problems["a.py"]
    assert run(store.tools["same"]) == "from b"


def test_the_list_tools_name_is_reserved(tmp_path: Path) -> None:
    write(tmp_path, "impostor.py", tool_file("listTools"))
    store = ToolStore("agent")
    assert "reserved" in problems_of(store, tmp_path)["impostor.py"]
    assert store.tools["listTools"].label == "List Tools"


def test_good_files_load_and_every_bad_file_is_reported_together(tmp_path: Path) -> None:
    write(tmp_path, "a_good.py", tool_file("good"))
    write(tmp_path, "b_syntax.py", "def (\n")
    write(tmp_path, "c_empty.py", "")
    write(tmp_path, "d_good.py", tool_file("alsoGood"))
    store = ToolStore("agent")
    with pytest.raises(ToolLoadError) as info:
        load_tools(store, tmp_path)
    assert [os.path.basename(p) for p, _ in info.value.problems] == ["b_syntax.py", "c_empty.py"]
    assert info.value.tools is store.tools
    assert list(store.tools) == ["good", "alsoGood", "listTools"]
    assert "b_syntax.py" in str(info.value) and "c_empty.py" in str(info.value)


def test_failed_files_leave_no_module_behind(tmp_path: Path) -> None:
    write(tmp_path, "bad.py", "raise ValueError('at import')\n")
    store = ToolStore("agent")
    problems_of(store, tmp_path)
    # The store's own package stays until the store goes; no file module is left in it.
    assert not [name for name in sys.modules if name.startswith(f"{store.module_namespace()}.")]


def test_not_strict_logs_problems_and_returns_what_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, "good.py", tool_file("good"))
    write(tmp_path, "bad.py", "import surely_not_an_installed_module_xyz\n")
    with caplog.at_level(logging.WARNING, logger="yiemagent"):
        tools = load_tools(ToolStore("agent"), tmp_path, strict=False)
    assert list(tools) == ["good", "listTools"]
    assert any("bad.py" in r.getMessage() and "import error" in r.getMessage() for r in caplog.records)


# -- single files -------------------------------------------------------------------------------


def test_check_tool_file_registers_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, "_candidate.py", tool_file("candidate"))
    store = ToolStore("agent")
    before = set(sys.modules)
    tool = check_tool_file(path, store)
    assert tool.name == "candidate" and run(tool) == "candidate says hi"
    assert store.tools == {}
    assert set(sys.modules) == before


def test_check_tool_file_reports_the_problem(tmp_path: Path) -> None:
    path = write(tmp_path, "_candidate.py", "def get_tool():\n    return 42\n")
    with pytest.raises(ToolLoadError) as info:
        check_tool_file(path)
    assert info.value.problems == [(str(path), "get_tool() returned int; it must return an AgentTool")]


def test_load_tool_file_is_tracked_like_a_folder_load(tmp_path: Path) -> None:
    write(tmp_path, "a.py", tool_file("alpha"))
    store = ToolStore("agent")
    load_tools(store, tmp_path)
    path = write(tmp_path, "b.py", tool_file("beta"))
    beta = load_tool_file(store, path)
    assert store.tools["beta"] is beta
    assert load_tools(store, tmp_path)["beta"] is beta  # unchanged, so not re-executed
    assert store.source_of("beta") == os.path.realpath(path)

"""Issue 10 ("Hardening"), the file-facing items: tool files that exit at import (14), symbolic
links in a tools folder (15), module names writeTool must refuse (16), approval hooks and
model-written code (17), damaged session files and stale temporary files (18), async tools (21)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from yiemagent.agent._agent import YiemAgent
from yiemagent.agent._session import SessionData, load_session, save_session, session_from_dict
from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._pipeline import execute_tool_calls
from yiemagent.core._tools import (
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from yiemagent.errors import SessionError
from yiemagent.tools._function_tool import function_tool
from yiemagent.tools._store import ToolLoadError, ToolStore, check_tool_file, load_tools

GOOD_TOOL = textwrap.dedent(
    """
    def get_tool():
        return AgentTool("good", "Good", "A tool that loads.", {"type": "object"},
                         lambda *_: AgentToolResult("fine"))
    """
)


def put(folder: Path, filename: str, source: str) -> Path:
    path = folder / filename
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def load_problems(store: ToolStore, folder: Path) -> dict[str, str]:
    """Load ``folder`` expecting a ``ToolLoadError``; return ``{file name: message}``."""
    with pytest.raises(ToolLoadError) as info:
        load_tools(store, folder)
    return {os.path.basename(path): message for path, message in info.value.problems}


def namespace_modules(store: ToolStore) -> list[str]:
    prefix = store.module_namespace() + "."
    return sorted(name for name in sys.modules if name.startswith(prefix))


# -- 14: BaseExceptions raised by a tool file --------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("import sys\nsys.exit(3)\n", "SystemExit at line 2 while running the file: 3"),
        ("exit()\n", "SystemExit at line 1 while running the file"),
        ("raise GeneratorExit\n", "GeneratorExit at line 1 while running the file"),
        ("import asyncio\nraise asyncio.CancelledError('stop')\n",
         "CancelledError at line 2 while running the file: stop"),
        ("class Custom(BaseException):\n    pass\nraise Custom('odd')\n",
         "Custom at line 3 while running the file: odd"),
        ("def get_tool():\n    raise SystemExit('from get_tool')\n",
         "SystemExit at line 2 in get_tool(): from get_tool"),
    ],
)
def test_a_base_exception_from_a_tool_file_is_a_load_problem_of_that_file(
    tmp_path: Path, code: str, expected: str
) -> None:
    put(tmp_path, "a_bad.py", code)
    put(tmp_path, "b_good.py", GOOD_TOOL)
    store = ToolStore("agent")
    problems = load_problems(store, tmp_path)
    assert list(problems) == ["a_bad.py"]
    assert problems["a_bad.py"].startswith(expected)
    assert list(store.tools) == ["good", "listTools"]
    assert namespace_modules(store) == [f"{store.module_namespace()}.b_good"]


def test_a_system_exit_problem_says_what_to_do(tmp_path: Path) -> None:
    put(tmp_path, "quits.py", "import sys\nsys.exit(0)\n")
    message = load_problems(ToolStore("agent"), tmp_path)["quits.py"]
    assert "a tool file must not call sys.exit() or exit()" in message


def test_check_tool_file_reports_a_system_exit(tmp_path: Path) -> None:
    path = put(tmp_path, "quits.py", "raise SystemExit(2)\n")
    with pytest.raises(ToolLoadError) as info:
        check_tool_file(path)
    assert info.value.problems == [(str(path), info.value.problems[0][1])]
    assert info.value.problems[0][1].startswith("SystemExit at line 1 while running the file: 2")


def test_code_too_deeply_nested_to_compile_is_a_load_problem(tmp_path: Path) -> None:
    put(tmp_path, "a_deep.py", "x = 1" + " + 1" * 100_000 + "\n")
    put(tmp_path, "b_good.py", GOOD_TOOL)
    store = ToolStore("agent")
    problems = load_problems(store, tmp_path)
    assert problems["a_deep.py"].startswith("cannot be compiled: RecursionError")
    assert "good" in store.tools


def test_keyboard_interrupt_from_a_tool_file_still_propagates(tmp_path: Path) -> None:
    put(tmp_path, "b_good.py", GOOD_TOOL)
    store = ToolStore("agent")
    good = load_tools(store, tmp_path)["good"]
    old_module = sys.modules[good.execute.__module__]
    put(tmp_path, "a_new.py", GOOD_TOOL.replace('"good"', '"fresh"'))
    put(tmp_path, "b_good.py", GOOD_TOOL + "CHANGED = True\n")
    put(tmp_path, "c_interrupt.py", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        load_tools(store, tmp_path)
    # The interrupted load changed nothing: no half-loaded module is left, and the changed
    # file's old module (whose tool is still registered) is back in place.
    assert list(store.tools) == ["good", "listTools"] and store.tools["good"] is good
    assert namespace_modules(store) == [f"{store.module_namespace()}.b_good"]
    assert sys.modules[good.execute.__module__] is old_module


def test_a_changed_file_that_raises_keyboard_interrupt_leaves_its_old_module_in_place(
    tmp_path: Path,
) -> None:
    put(tmp_path, "good.py", GOOD_TOOL)
    store = ToolStore("agent")
    good = load_tools(store, tmp_path)["good"]
    old_module = sys.modules[good.execute.__module__]
    put(tmp_path, "good.py", GOOD_TOOL + "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        load_tools(store, tmp_path)
    assert store.tools["good"] is good
    assert sys.modules[good.execute.__module__] is old_module


# -- 15: symbolic links in a tools folder -------------------------------------------------------

SECRET = "SECRET-FIRST-LINE: not python at all"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the tool folder whose content must never show up in a message."""
    path = tmp_path / "outside" / "private.py"
    path.parent.mkdir()
    path.write_text(SECRET + "\n", encoding="utf-8")
    return path


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tools"
    folder.mkdir()
    return folder


def test_a_link_leading_out_of_the_folder_is_a_problem_and_its_target_is_never_read(
    tools_dir: Path, outside: Path
) -> None:
    (tools_dir / "a_leak.py").symlink_to(outside)
    (tools_dir / "b_dir.py").symlink_to(outside.parent, target_is_directory=True)
    (tools_dir / "c_dangling.py").symlink_to(outside.parent / "missing.py")
    put(tools_dir, "d_good.py", GOOD_TOOL)
    store = ToolStore("agent")
    with pytest.raises(ToolLoadError) as info:
        load_tools(store, tools_dir)
    problems = {os.path.basename(path): message for path, message in info.value.problems}
    assert sorted(problems) == ["a_leak.py", "b_dir.py", "c_dangling.py"]
    for message in problems.values():
        assert message.startswith("is a symbolic link that leads outside the tool folder")
    assert "SECRET" not in str(info.value) and str(outside.parent) not in str(info.value)
    assert list(store.tools) == ["good", "listTools"]


@pytest.mark.skipif(not os.path.isfile("/etc/passwd"), reason="needs /etc/passwd")
def test_a_link_to_etc_passwd_shows_nothing_of_it(tools_dir: Path) -> None:
    (tools_dir / "passwd.py").symlink_to("/etc/passwd")
    with pytest.raises(ToolLoadError) as info:
        load_tools(ToolStore("agent"), tools_dir)
    first_line = Path("/etc/passwd").read_text(errors="replace").splitlines()[0]
    assert first_line not in str(info.value)
    assert "is a symbolic link that leads outside the tool folder" in str(info.value)


def test_a_loaded_file_replaced_by_a_link_out_of_the_folder_is_dropped(
    tools_dir: Path, outside: Path
) -> None:
    put(tools_dir, "good.py", GOOD_TOOL)
    store = ToolStore("agent")
    load_tools(store, tools_dir)
    (tools_dir / "good.py").unlink()
    (tools_dir / "good.py").symlink_to(outside)
    problems = load_problems(store, tools_dir)
    assert list(problems) == ["good.py"] and "SECRET" not in problems["good.py"]
    assert list(store.tools) == ["listTools"]


def test_a_link_to_a_file_inside_the_folder_is_skipped(tools_dir: Path) -> None:
    inner = put(tools_dir, "innerA.py", GOOD_TOOL)
    (tools_dir / "aliasB.py").symlink_to("innerA.py")
    (tools_dir / "lib").mkdir()
    put(tools_dir / "lib", "helper.py", GOOD_TOOL.replace('"good"', '"helper"'))
    (tools_dir / "helperLink.py").symlink_to(tools_dir / "lib" / "helper.py")
    store = ToolStore("agent")
    # No problem is raised: the alias is not loaded a second time (which would define "good"
    # twice), and a file of a subfolder is not loaded through a link either.
    assert list(load_tools(store, tools_dir)) == ["good", "listTools"]
    assert store.source_of("good") == str(inner.resolve())


def test_a_file_swapped_for_a_link_after_listing_is_not_read(tools_dir: Path, outside: Path) -> None:
    # The swap between listing the folder and opening the file cannot be staged from outside
    # load_tools, so the reader it uses is checked directly: the refusal is part of the open.
    from yiemagent.tools._store import _FileProblem, _read

    link = tools_dir / "swapped.py"
    link.symlink_to(outside)
    with pytest.raises(_FileProblem, match="is a symbolic link") as info:
        _read(str(link), follow_symlinks=False)
    assert "SECRET" not in str(info.value)
    assert _read(str(link)) == (SECRET + "\n").encode()  # check_tool_file's explicit path follows


# -- 15: writeTool and symbolic links -----------------------------------------------------------

REPO_TOOLS = Path(__file__).resolve().parent.parent / "tools"

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


def call_tool(store: ToolStore, name: str, args: dict[str, Any],
              config: AgentLoopConfig | None = None) -> ToolResultMessage:
    """Run one call of ``name`` through the tool pipeline with the store's current tools."""
    call = AgentToolCall("call-1", name, args)
    context = AgentContext("", [], dict(store.tools))
    batch = execute_tool_calls(context, AssistantMessage(content=[call]), [call],
                               config or AgentLoopConfig(), None, None)
    return batch.messages[0]


def text_of(message: ToolResultMessage) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


def test_write_tool_never_writes_through_a_link_inside_its_folder(
    writer_store: ToolStore, tools_dir: Path
) -> None:
    assert not call_tool(writer_store, "writeTool", ECHO_ARGS).is_error
    inner = tools_dir / "innerA.py"
    original = inner.read_bytes()
    (tools_dir / "aliasB.py").symlink_to("innerA.py")
    refused = call_tool(writer_store, "writeTool",
                        {**ECHO_ARGS, "name": "aliasB", "executeCode": "return 'hijacked'",
                         "overwrite": True})
    assert refused.is_error
    assert ("aliasB.py is a symbolic link to innerA.py in the tool folder; writeTool never writes "
            "through a symbolic link. Choose another name.") in text_of(refused)
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
    message = assert_name_refused(writer_store, tools_dir, name,
                                  "a module of Python's standard library")
    assert f'e.g. "{name}Tool"' in message


@pytest.mark.parametrize("name", ["yiemagent", "jsonschema", "attrs", "requests"])
def test_write_tool_refuses_an_installed_top_level_name(
    writer_store: ToolStore, tools_dir: Path, name: str
) -> None:
    assert_name_refused(writer_store, tools_dir, name,
                        "a top-level module of the installed distribution")


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
    assert_name_refused(writer_store, tools_dir, "phantomTop",
                        "a top-level module of the installed distribution phantom")


def test_a_tool_folder_on_the_import_path_does_not_make_a_written_tool_shadow_itself(
    writer_store: ToolStore, tools_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tools_dir))
    assert not call_tool(writer_store, "writeTool", ECHO_ARGS).is_error
    again = call_tool(writer_store, "writeTool",
                      {**ECHO_ARGS, "executeCode": "return 'version 2'", "overwrite": True})
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
    args = {**ECHO_ARGS, "name": "gated",
            "executeCode": marker_code(tmp_path / "execute.ran", "return 'ran'")}
    args.update({field: marker_code(markers[field], code[field]) for field in fields})
    assert not call_tool(writer_store, "writeTool", args).is_error

    blocked = call_tool(writer_store, "gated", {}, AgentLoopConfig(before_tool_call=block_everything))
    assert blocked.is_error and text_of(blocked) == "Not approved by the operator."
    assert sorted(p.name for p in tmp_path.glob("*.ran")) == []

    allowed = call_tool(writer_store, "gated", {})
    assert text_of(allowed) == "ran"  # the same code does run once the call is let through
    assert sorted(p.name for p in tmp_path.glob("*.ran")) == sorted(
        [*(f"{f}.ran" for f in fields), "execute.ran"])


DIVIDE_ARGS: dict[str, Any] = {
    **ECHO_ARGS,
    "name": "divide",
    "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"]},
    "executeCode": "return str(args['a'] / args['b'])",
    "prepareCode": ("if args.get('a') == 'boom':\n    raise ValueError('cannot prepare boom')\n"
                    "return {k: float(v) if isinstance(v, str) else v for k, v in args.items()}"),
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
    assert ('Validation failed for tool "divide":\n  - b must not be zero\n\nReceived arguments:\n'
            '{\n  "a": 1,\n  "b": 0.0\n}') in text_of(zero)

    wrong_type = call_tool(writer_store, "divide", {"a": 1, "b": True}, config)
    assert wrong_type.is_error and "args.b: True is not of type 'number'" in text_of(wrong_type)

    boom = call_tool(writer_store, "divide", {"a": "boom", "b": 1}, config)
    assert boom.is_error
    assert ('Preparing the arguments for tool "divide" failed: ValueError: cannot prepare boom'
            in text_of(boom))


# -- 18: session files --------------------------------------------------------------------------


def session_text(timestamp: str = "1", details: str = "{}") -> str:
    return (
        '{"format": "yiemagent.session", "version": 1, "session_id": "s", "system_prompt": "",'
        ' "model": null, "messages": [{"role": "toolResult", "tool_call_id": "c", "tool_name": "t",'
        f' "content": [], "details": {details}, "timestamp": {timestamp}}}]}}'
    )


def test_session_text_helper_gives_a_loadable_session(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_text(session_text("7"))
    assert load_session(path).messages[0].timestamp == 7


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (session_text("Infinity"), "Infinity is not a JSON value"),
        (session_text("-Infinity"), "-Infinity is not a JSON value"),
        (session_text("NaN"), "NaN is not a JSON value"),
        (session_text("1e400"), "OverflowError"),
        (session_text(details="[" * 100_000 + "]" * 100_000), "nested too deeply"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": ' * 50_000 + "1" + "}" * 50_000, "nested too deeply"),
    ],
)
def test_every_bad_session_file_raises_session_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SessionError) as info:
        load_session(path)
    assert str(info.value).startswith(f"{path}: damaged session file")
    assert fragment in str(info.value)


def test_session_from_dict_raises_session_error_for_an_infinite_timestamp() -> None:
    document = json.loads(session_text("1"))
    document["messages"][0]["timestamp"] = float("inf")
    with pytest.raises(SessionError, match=r"^memo: damaged session file \(OverflowError"):
        session_from_dict(document, "memo")


SESSION = SessionData("s", "Be brief.", None, [UserMessage([TextContent("hello")], timestamp=5)])


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def killed_save(path: Path) -> None:
    """Run save_session in a child process that is killed (SIGKILL) just before the rename."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from yiemagent.core._content import TextContent
        from yiemagent.core._messages import UserMessage
        from yiemagent.agent._session import SessionData, save_session
        os.replace = lambda *_: os.kill(os.getpid(), signal.SIGKILL)
        save_session(SessionData("s", "", None, [UserMessage([TextContent("lost")])]), {str(path)!r})
        """
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_saves_temporary_file_is_removed_by_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    save_session(SESSION, path)
    killed_save(path)
    [left] = temp_files(tmp_path)
    assert re.fullmatch(r"\.chat\.json\.[0-9a-f]{32}\.tmp", left)  # named after its target
    assert load_session(path) == SESSION  # the killed save changed nothing

    stale = time.time() - 3600  # as after a restart an hour later
    os.utime(tmp_path / left, (stale, stale))
    save_session(SESSION, path)
    assert temp_files(tmp_path) == []
    assert load_session(path) == SESSION


def test_a_save_keeps_fresh_temporary_files_and_those_of_other_targets(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    live = tmp_path / f".chat.json.{'a' * 32}.tmp"  # what a save still running has on disk
    live.write_text("{}")
    other = tmp_path / f".other.json.{'b' * 32}.tmp"
    other.write_text("{}")
    unrelated = tmp_path / f".chat.json.{'c' * 32}.tmp.bak"
    unrelated.write_text("{}")
    stale = time.time() - 3600
    for old in (other, unrelated):
        os.utime(old, (stale, stale))
    save_session(SESSION, path)
    assert temp_files(tmp_path) == sorted([live.name, other.name])
    assert unrelated.exists()


def test_concurrent_saves_to_one_path_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    workers = 8
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def save_many(n: int) -> None:
        barrier.wait(timeout=30)
        data = SessionData(f"s{n}", "", None, [])
        for _ in range(20):
            try:
                save_session(data, path)
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=save_many, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and errors == []
    assert load_session(path).session_id in {f"s{n}" for n in range(workers)}
    assert temp_files(tmp_path) == []


def test_a_long_file_name_still_gets_a_temporary_file_of_a_valid_length(tmp_path: Path) -> None:
    path = tmp_path / ("é" * 120 + ".json")  # 241 bytes in UTF-8: the name alone nearly fills NAME_MAX
    save_session(SESSION, path)
    assert load_session(path) == SESSION


# -- 21: @function_tool on an async def ---------------------------------------------------------

WAIT = 10.0  # seconds any wait in these tests may take before the test fails


def run_calls(tools: list[AgentTool], *calls: AgentToolCall,
              signal: AbortSignal | None = None) -> list[ToolResultMessage]:
    context = AgentContext("", [], tools)
    batch = execute_tool_calls(context, AssistantMessage(content=list(calls)), list(calls),
                               AgentLoopConfig(), signal, None)
    return batch.messages


@function_tool
async def add_later(a: int, b: int) -> dict[str, Any]:
    """Add two numbers after yielding to the event loop.

    Args:
        a: The first number.
        b: The second number.
    """
    await asyncio.sleep(0)
    return {"sum": a + b, "thread": threading.current_thread().name}


def test_an_async_tool_returns_its_value_through_the_pipeline() -> None:
    assert add_later.input_schema["required"] == ["a", "b"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        [message] = run_calls([add_later], AgentToolCall("c1", "add_later", {"a": 2, "b": 40}))
        gc.collect()  # a coroutine never awaited warns when it is collected
    assert not message.is_error, text_of(message)
    assert message.details["result"]["sum"] == 42
    assert message.details["result"]["thread"] == threading.current_thread().name  # the tool's thread
    assert [w for w in caught if "never awaited" in str(w.message)] == []


def test_an_async_tool_answers_through_a_real_agent() -> None:
    def llm_call(request: dict[str, Any]) -> AssistantMessage:
        last = request["messages"][-1]
        if last["role"] != "tool":
            return AssistantMessage(content=[AgentToolCall("c1", "add_later", {"a": 1, "b": 2})])
        content = last["content"]
        said = content if isinstance(content, str) else "".join(p["text"] for p in content)
        return AssistantMessage(content=[TextContent(f"tool said {said}")])

    with YiemAgent(llm_call=llm_call, tools=[add_later]) as agent:
        reply = agent.prompt("add 1 and 2", timeout=WAIT)
    said = "".join(b.text for b in reply.content if isinstance(b, TextContent))
    assert said.startswith('tool said {"sum": 3, "thread": ')


def test_aborting_the_signal_cancels_an_async_tool() -> None:
    started, cancelled = threading.Event(), threading.Event()

    @function_tool
    async def wait_long() -> str:
        """Wait far longer than any test."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "slept"

    signal = AbortSignal()
    results: list[ToolResultMessage] = []
    runner = threading.Thread(
        target=lambda: results.extend(run_calls([wait_long], AgentToolCall("c1", "wait_long", {}),
                                                signal=signal)))
    runner.start()
    assert started.wait(WAIT)
    signal.abort("user pressed stop")
    runner.join(WAIT)
    assert not runner.is_alive()
    assert cancelled.is_set()
    [message] = results
    assert message.is_error
    assert text_of(message) == ('Tool "wait_long" failed: CancelledError: the operation was aborted '
                                "(user pressed stop)")


def test_an_async_tool_that_handles_its_cancellation_keeps_its_answer() -> None:
    started = threading.Event()

    @function_tool
    async def tidy(signal: AbortSignal) -> str:
        """Stop cleanly when aborted."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return f"stopped cleanly, aborted={signal.aborted}"
        return "slept"

    signal = AbortSignal()
    box: list[Any] = []
    runner = threading.Thread(target=lambda: box.append(tidy.execute("c1", {}, signal, None)))
    runner.start()
    assert started.wait(WAIT)
    signal.abort()
    runner.join(WAIT)
    assert not runner.is_alive()
    assert [b.text for b in box[0].content] == ["stopped cleanly, aborted=True"]


def test_an_async_tool_whose_timeout_passes_is_cancelled() -> None:
    cancelled = threading.Event()

    @function_tool(timeout_s=0.05)
    async def too_slow() -> str:
        """Outlast the timeout."""
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "slept"

    [message] = run_calls([too_slow], AgentToolCall("c1", "too_slow", {}))
    assert message.is_error and text_of(message) == 'Tool "too_slow" timed out after 0.05 s.'
    assert cancelled.wait(WAIT)  # the tool's own thread cancelled the coroutine, it did not linger


def test_an_async_tool_runs_when_called_from_a_thread_running_an_event_loop() -> None:
    async def caller() -> AgentToolResult:
        result: AgentToolResult = add_later.execute("c1", {"a": 5, "b": 6}, None, None)
        return result

    result = asyncio.run(caller())
    assert result.details["result"]["sum"] == 11


def test_an_async_generator_is_refused_at_decoration() -> None:
    async def numbers() -> AsyncIterator[int]:
        yield 1

    with pytest.raises(TypeError, match="is an async generator"):
        function_tool(numbers)

"""Tool files that misbehave: a ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``, ...) at
import or in ``get_tool()``, code too deep to compile, and symbolic links in a tools folder,
whose targets are never read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tool_file_helpers import GOOD_TOOL, SECRET, load_problems, namespace_modules, put

from yiemagent.tools._store import ToolLoadError, ToolStore, check_tool_file, load_tools

# -- 14: BaseExceptions raised by a tool file --------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("import sys\nsys.exit(3)\n", "SystemExit at line 2 while running the file: 3"),
        ("exit()\n", "SystemExit at line 1 while running the file"),
        ("raise GeneratorExit\n", "GeneratorExit at line 1 while running the file"),
        (
            "import asyncio\nraise asyncio.CancelledError('stop')\n",
            "CancelledError at line 2 while running the file: stop",
        ),
        (
            "class Custom(BaseException):\n    pass\nraise Custom('odd')\n",
            "Custom at line 3 while running the file: odd",
        ),
        (
            "def get_tool():\n    raise SystemExit('from get_tool')\n",
            "SystemExit at line 2 in get_tool(): from get_tool",
        ),
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

"""Issue 10 ("Hardening"), the file-facing items: tool files that exit at import (14)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from yiemagent.tool_registry import ToolLoadError, ToolStore, check_tool_file, load_tools

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

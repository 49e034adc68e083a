"""Helpers for the tests of tool files: a file that loads, writing one, the problems a load reports."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from yiemagent.core._content import TextContent
from yiemagent.core._messages import ToolResultMessage
from yiemagent.tools._store import ToolLoadError, ToolStore, load_tools

SECRET = "SECRET-FIRST-LINE: not python at all"  # must never show up in a message

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


def text_of(message: ToolResultMessage) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))

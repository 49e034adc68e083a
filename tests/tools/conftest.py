"""Fixtures of the tool tests: an empty tools folder, and a file outside it whose content is secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from tool_file_helpers import SECRET


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

"""Where the example tool files are: the ones the ``yiemagent`` command offers (getTime,
getWeather, writeTool), shipped in the package and kept once, in ``tools/``, in the repository."""

from __future__ import annotations

from pathlib import Path

__all__ = ["EXAMPLE_TOOL", "example_tools_folder"]

EXAMPLE_TOOL = "writeTool.py"  # a file every example tools folder has: tells it from others


def example_tools_folder() -> Path:
    """The example tools: ``yiemagent/example_tools`` in an installed package (setuptools copies
    ``tools/`` there), else ``tools/`` next to the package in a checkout or editable install.
    Raises ``FileNotFoundError`` when neither is there."""
    package = Path(__file__).resolve().parent.parent  # yiemagent/, above tools/
    for folder in (package / "example_tools", package.parent / "tools"):
        if (folder / EXAMPLE_TOOL).is_file():
            return folder
    raise FileNotFoundError(
        "the example tools are not installed with this copy of yiemagent; give a folder of tool "
        "files with --tools FOLDER"
    )

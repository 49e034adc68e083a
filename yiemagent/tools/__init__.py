"""Where tools come from: per-agent tool stores and the tool-file loader (``load_tools``),
``@function_tool`` for plain functions, and (``yiemagent.tools.mcp``, the ``mcp`` extra) the
tools of MCP servers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_store": (
            "ToolStore",
            "check_tool_file",
            "clear_tools",
            "get_tools",
            "list_tool",
            "load_tool_file",
            "load_tools",
            "register_tool",
            "unregister_tool",
        ),
        "_function_tool": ("function_tool", "to_tool_result"),
        "mcp._connection": ("McpConnection", "load_mcp_tools"),
        "mcp._options": ("McpOptions",),
    },
    optional=("McpConnection", "McpOptions", "load_mcp_tools"),
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.tools._function_tool import function_tool as function_tool
    from yiemagent.tools._function_tool import to_tool_result as to_tool_result
    from yiemagent.tools._store import ToolStore as ToolStore
    from yiemagent.tools._store import check_tool_file as check_tool_file
    from yiemagent.tools._store import clear_tools as clear_tools
    from yiemagent.tools._store import get_tools as get_tools
    from yiemagent.tools._store import list_tool as list_tool
    from yiemagent.tools._store import load_tool_file as load_tool_file
    from yiemagent.tools._store import load_tools as load_tools
    from yiemagent.tools._store import register_tool as register_tool
    from yiemagent.tools._store import unregister_tool as unregister_tool
    from yiemagent.tools.mcp._connection import McpConnection as McpConnection
    from yiemagent.tools.mcp._connection import load_mcp_tools as load_mcp_tools
    from yiemagent.tools.mcp._options import McpOptions as McpOptions

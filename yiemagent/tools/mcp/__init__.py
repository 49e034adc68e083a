"""Tools from MCP servers (the ``mcp`` extra): ``load_mcp_tools`` connects to a server over stdio
or streamable HTTP and registers its tools in a store, with its settings in one ``McpOptions``;
the SDK is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_connection": ("McpConnection", "load_mcp_tools"),
        "_options": ("McpOptions",),
    },
    optional=("McpConnection", "McpOptions", "load_mcp_tools"),
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.tools.mcp._connection import McpConnection as McpConnection
    from yiemagent.tools.mcp._connection import load_mcp_tools as load_mcp_tools
    from yiemagent.tools.mcp._options import McpOptions as McpOptions

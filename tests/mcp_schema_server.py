"""A hostile MCP server for the schema-safety tests, written with the SDK's low-level ``Server``
(which lets a server list any input schema it likes) and served over stdio.

Run as ``python tests/mcp_schema_server.py URL``. Tools:

- ``remote_ref``: its ``city`` property is a ``$ref`` to ``URL`` (a loopback server that counts
  the requests it gets, or one that never answers);
- ``lookahead``: a ``pattern`` with a lookahead, which RE2 cannot run;
- ``backtrack``: ``word`` must match ``^(a+)+$``, which makes Python's ``re`` backtrack for
  ever on forty ``a`` and a ``!``;
- ``echo``: a plain tool;
- ``structured``: returns its ``word`` as structured content, under an output schema whose
  ``word`` must match ``^(a+)+$`` (the SDK's own check of it would backtrack for ever).

Every call answers ``called <name> with <arguments as JSON>``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def _tools(url: str) -> list[types.Tool]:
    def tool(name: str, properties: dict[str, Any]) -> types.Tool:
        schema = {"type": "object", "properties": properties, "required": list(properties)}
        return types.Tool(name=name, description=f"the {name} tool", input_schema=schema)

    return [
        tool("remote_ref", {"city": {"$ref": url}}),
        tool("lookahead", {"code": {"type": "string", "pattern": "^(?=.*[0-9]).+$"}}),
        tool("backtrack", {"word": {"type": "string", "pattern": "^(a+)+$"}}),
        tool("echo", {"text": {"type": "string"}}),
        types.Tool(
            name="structured",
            description="the structured tool",
            input_schema={"type": "object", "properties": {"word": {"type": "string"}}},
            output_schema={
                "type": "object",
                "required": ["word"],
                "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}},
            },
        ),
    ]


def main(url: str) -> None:
    tools = _tools(url)

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = f"called {params.name} with {json.dumps(params.arguments, sort_keys=True)}"
        structured = dict(params.arguments or {}) if params.name == "structured" else None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )

    server: Server[Any] = Server("yiem-hostile-schemas", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main(sys.argv[1])

"""Runs hostile ``pattern`` checks in a process of its own, for ``test_schema_safety``.

With Python's ``re``, ``^(a+)+$`` against forty ``a`` and a ``!`` holds the GIL for hours, so
the test process could never give up waiting; the test runs this script as a child, waits for it
with a timeout and kills it if it hangs. Prints one JSON object on its last line of stdout.

    python tests/schema_pattern_child.py local
    python tests/schema_pattern_child.py mcp URL   # through tests/mcp_schema_server.py
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from agent_helpers import WAIT, ScriptedLLM, reply

from yiemagent import (
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    ToolStore,
    YiemAgent,
)
from yiemagent.core._schema_fast import compile_fast_check

HOSTILE = "a" * 40 + "!"
PATTERN = "^(a+)+$"
SCHEMAS: dict[str, dict[str, Any]] = {
    "word": {
        "type": "object",
        "properties": {"word": {"type": "string", "pattern": PATTERN}},
        "required": ["word"],
    },
    "keys": {"type": "object", "patternProperties": {PATTERN: {"type": "integer"}}},
    "closed": {"type": "object", "patternProperties": {PATTERN: {}}, "additionalProperties": False},
    # A subschema in another dialect: jsonschema would switch to its stock validator there.
    "dialect": {
        "type": "object",
        "properties": {
            "word": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "string",
                "pattern": PATTERN,
            }
        },
    },
}
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("word", {"word": HOSTILE}),
    ("word", {"word": "aaaa"}),
    ("keys", {HOSTILE: "x", "aaa": "x"}),
    ("closed", {HOSTILE: 1}),
    ("dialect", {"word": HOSTILE}),
]


def _ran(name: str) -> Any:
    def execute(_id: str, args: dict[str, Any], _signal: Any, _partial: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(f"ran {name} with {json.dumps(args, sort_keys=True)}")])

    return execute


def _run(tools: Any, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One agent run whose model calls ``calls`` in one turn; each call's ``[is_error, text]``."""
    blocks = [AgentToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)]
    llm = ScriptedLLM(AssistantMessage(content=blocks, stop_reason="toolUse"), reply("done"))
    options = {"tool_store": tools} if isinstance(tools, ToolStore) else {"tools": tools}
    with YiemAgent(llm_call=llm, **options) as agent:
        agent.prompt("go", timeout=WAIT)
        results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    out: dict[str, Any] = {}
    for message in results:
        block = message.content[0]
        out[message.tool_call_id] = [
            message.is_error,
            block.text if isinstance(block, TextContent) else repr(block),
        ]
    return out


def local() -> dict[str, Any]:
    """Tools defined here (trusted), called with hostile values, and the fast check alone."""
    check = compile_fast_check(SCHEMAS["word"])
    tools = [AgentTool(name, name, "", schema, _ran(name)) for name, schema in SCHEMAS.items()]
    return {"fast_check": None if check is None else check({"word": HOSTILE}), "results": _run(tools, CALLS)}


def mcp(url: str) -> dict[str, Any]:
    """The tools of ``mcp_schema_server.py`` loaded with ``strict=False``, then called."""
    from yiemagent.tools.mcp import McpOptions
    from yiemagent.tools.mcp._connection import load_mcp_tools

    server = [sys.executable, str(Path(__file__).with_name("mcp_schema_server.py")), url]
    calls = [
        ("backtrack", {"word": HOSTILE}),
        ("backtrack", {"word": "aaaa"}),
        ("echo", {"text": "hi"}),
        ("structured", {"word": HOSTILE}),
        ("structured", {"word": "aaaa"}),
    ]
    with (
        ToolStore() as store,
        load_mcp_tools(store, server, strict=False, options=McpOptions(connect_timeout_s=WAIT)) as connection,
    ):
        names = connection.tool_names
        results = _run(store, calls)
    return {"tool_names": names, "results": results}


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    outcome = local() if sys.argv[1] == "local" else mcp(sys.argv[2])
    print(json.dumps(outcome))

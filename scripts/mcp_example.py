"""Ask an agent about the time in Tokyo with the tools of an MCP server, printing each tool call.

Starts the reference MCP time server (``mcp-server-time``, from PyPI) as a child process spoken to
over stdio, registers its two tools in a store with the prefix ``time_`` and asks one question.
Without ``--model`` the model is ``scripted_llm_call``: a stand-in written for this example that
runs offline, calls ``time_get_current_time`` and ``time_convert_time`` and reports what they
returned. With ``--model openai:gpt-4o-mini`` (``OPENAI_API_KEY`` set) a real model decides.
Leaving the ``with`` blocks shuts the agent down, then closes the store, which stops the server.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from yiemagent import (
    AgentEvent,
    AgentToolCall,
    AssistantMessage,
    TextContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolStore,
    YiemAgent,
    create_llm_call,
    load_mcp_tools,
)

# The server runs under this Python, so it only needs to be installed here (no PATH lookup).
TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def _tool_texts(request: dict[str, Any]) -> list[str]:
    """The text of every tool result in the request, oldest first."""
    texts = []
    for message in request["messages"]:
        if message["role"] == "tool":
            content = message["content"]
            parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
            texts.append("".join(parts))
    return texts


def scripted_llm_call(request: dict[str, Any]) -> AssistantMessage:
    """A scripted stand-in for a model (no LLM is involved): ask for the time in Tokyo, then for
    09:30 London time in Tokyo, then answer from the two results."""
    results = _tool_texts(request)
    if not results:
        return AssistantMessage(
            content=[AgentToolCall("call_1", "time_get_current_time", {"timezone": "Asia/Tokyo"})],
            model="scripted",
            stop_reason="toolUse",
        )
    if len(results) == 1:
        return AssistantMessage(
            content=[
                AgentToolCall(
                    "call_2",
                    "time_convert_time",
                    {"source_timezone": "Europe/London", "time": "09:30", "target_timezone": "Asia/Tokyo"},
                )
            ],
            model="scripted",
            stop_reason="toolUse",
        )
    now, converted = json.loads(results[0]), json.loads(results[1])
    answer = (
        f"In Tokyo it is {now['datetime'][11:16]} on {now['day_of_week']}; 09:30 in London "
        f"is {converted['target']['datetime'][11:16]} there ({converted['time_difference']})."
    )
    return AssistantMessage(content=[TextContent(answer)], model="scripted")


def show(event: AgentEvent) -> None:
    """Print each tool call and its result as a line of the run's log."""
    if isinstance(event, ToolExecStartEvent):
        print(f"  -> {event.tool_name}({json.dumps(event.arguments)})")
    elif isinstance(event, ToolExecEndEvent):
        status = "error" if event.is_error else "ok"
        text = " ".join(b.text for b in event.result.content if isinstance(b, TextContent))
        print(f"  <- {event.tool_name} [{status}]: {' '.join(text.split())}")  # JSON on one line


def main(argv: list[str] | None = None) -> int:
    """Run the example; return the process exit code (1 when the run ended in an error)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "question", nargs="?", default="What time is it in Tokyo, and what is 9:30 London time there?"
    )
    parser.add_argument("--model", help="e.g. openai:gpt-4o-mini (default: scripted_llm_call, offline)")
    args = parser.parse_args(argv)
    llm_call = create_llm_call(args.model) if args.model else scripted_llm_call

    with ToolStore("mcp-example") as store:
        load_mcp_tools(store, TIME_SERVER, prefix="time_")
        print(f"tools: {', '.join(store.tools)}")
        with YiemAgent(
            llm_call=llm_call,
            tool_store=store,
            agent_event_sink=show,
            system_prompt="You are a helpful assistant. Use tools when they help.",
        ) as agent:
            reply = agent.prompt(args.question, timeout=120)
    print("answer:", "".join(b.text for b in reply.content if isinstance(b, TextContent)))
    if reply.stop_reason == "error":
        print(f"error: {reply.error_message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Ask an agent the time in a city, printing each turn and tool call of the run.

Loads the tools in ``tools/`` into a store, starts a ``YiemAgent`` and asks one question. Without
``--model`` it runs offline with a small scripted model that calls ``getTime`` and reports what
it returned; with ``--model openai:gpt-4o-mini`` (``OPENAI_API_KEY`` set),
``--model anthropic:claude-sonnet-4-5`` or ``--model ollama:qwen2.5`` it talks to a real model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from yiemagent import (
    AgentEvent,
    AgentToolCall,
    AssistantMessage,
    MessageUpdateEvent,
    TextContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolStore,
    TurnStartEvent,
    YiemAgent,
    create_llm_call,
    load_tools,
)

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def scripted_model(request: dict[str, Any]) -> AssistantMessage:
    """A stand-in model: asks ``getTime`` for the city in the question, then reports the answer."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        answer = " ".join(part["text"] for part in last["content"])
        return AssistantMessage(content=[TextContent(f"Here you go: {answer}")], model="scripted")
    question = "".join(p["text"] for p in last["content"] if p["type"] == "text")
    city = question.rstrip("?").split(" in ")[-1] if " in " in question else "UTC"
    return AssistantMessage(
        content=[AgentToolCall("call_1", "getTime", {"city": city})], model="scripted", stop_reason="toolUse"
    )


def show(event: AgentEvent) -> None:
    """Print one event as a line of the run's log."""
    if isinstance(event, ToolExecStartEvent):
        print(f"  -> {event.tool_name}({json.dumps(event.arguments)})")
    elif isinstance(event, ToolExecEndEvent):
        status = "error" if event.is_error else "ok"
        texts = [b.text for b in event.result.content if isinstance(b, TextContent)]
        print(f"  <- {event.tool_name} [{status}]: {' '.join(texts)}")
    elif isinstance(event, MessageUpdateEvent):
        print(event.delta, end="", flush=True)
    elif isinstance(event, TurnStartEvent):
        print(f"[turn {event.turn}]")


def main(argv: list[str] | None = None) -> int:
    """Run the example; return the process exit code (1 when the run ended in an error)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="What time is it in Tokyo?")
    parser.add_argument("--model", help="e.g. openai:gpt-4o-mini (default: an offline script)")
    args = parser.parse_args(argv)

    store = ToolStore("example")
    load_tools(store, TOOLS)
    llm_call = create_llm_call(args.model) if args.model else scripted_model
    print(f"tools: {', '.join(store.tools)}")
    with YiemAgent(
        llm_call=llm_call,
        tools=store.tools,
        tool_store=store,
        system_prompt="You are a helpful assistant. Use tools when they help.",
        agent_event_sink=show,
    ) as agent:
        reply = agent.prompt(args.question, timeout=120)
    print("\nanswer:", "".join(b.text for b in reply.content if isinstance(b, TextContent)))
    if reply.stop_reason == "error":
        print(f"error: {reply.error_message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the example scripts share: a scripted stand-in for the model, and a printer of events.

``ScriptedModel`` (from ``yiemagent.testing``) is not a model: it answers from the list of
replies written in each script, one reply per call, whatever it is asked. That keeps every
example offline and its story the same on every run. To try an example's code against a real
model, pass ``create_llm_call("openai:gpt-4o-mini")`` (or another spec) as ``llm_call`` instead;
the model then decides what to do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from yiemagent import (
    AgentEvent,
    AgentToolResult,
    AssistantMessage,
    MessageEndEvent,
    TextContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    TurnStartEvent,
)
from yiemagent.testing._scripted import ScriptedModel

__all__ = ["EXAMPLE_TOOLS", "ScriptedModel", "answer", "calls", "clip", "copy_example_tools", "show", "use"]

EXAMPLE_TOOLS = Path(__file__).resolve().parent.parent / "tools"


def use(tool: str, /, **arguments: Any) -> dict[str, Any]:
    """One tool call of a scripted reply: ``use("add", a=2, b=40)`` (the scripted model gives
    it the id ``call_<reply>_<n>``)."""
    return {"name": tool, "arguments": arguments}


def calls(*tool_calls: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    """A scripted reply that calls tools (all of them in one reply), with optional text."""
    reply: dict[str, Any] = {"tool_calls": list(tool_calls)}
    if text is not None:
        reply["text"] = text
    return reply


def answer(message: AssistantMessage) -> str:
    """The text of a reply."""
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def clip(text: str, limit: int = 100) -> str:
    """``text`` cut to ``limit`` characters, marked when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text(result: Any) -> str:
    """The text of a tool result (or of anything a tool reported)."""
    if isinstance(result, AgentToolResult):
        return " ".join(b.text for b in result.content if isinstance(b, TextContent))
    return str(result)


def show(event: AgentEvent) -> None:
    """Print one event of a run as a line of its story (an ``agent_event_sink``)."""
    if isinstance(event, TurnStartEvent):
        print(f"[turn {event.turn}]")
    elif isinstance(event, ToolExecStartEvent):
        print(f"  -> {event.tool_name}({clip(json.dumps(event.arguments))})")
    elif isinstance(event, ToolExecUpdateEvent):
        print(f"  .. {event.tool_name}: {_text(event.partial_result)}")
    elif isinstance(event, ToolExecEndEvent):
        status = "error" if event.is_error else "ok"
        print(f"  <- {event.tool_name} [{status}]: {_text(event.result)}")
    elif isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
        text = answer(event.message)
        if text:
            print(f"  model: {text}")


def copy_example_tools(folder: Path) -> Path:
    """Copy the example tool files (``tools/*.py``) into ``folder`` and return it: examples that
    let the model write tools work on a copy, never on the repository's own folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(EXAMPLE_TOOLS.glob("*.py")):
        shutil.copy2(path, folder)
    return folder

"""Shared helpers for the runtime tests: scripted models and small tools."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from yiemagent import AgentTool, AgentToolCall, AgentToolResult, AssistantMessage, TextContent

WAIT = 10.0  # seconds any test waits for an event before failing


def text(msg: AssistantMessage) -> str:
    """The text blocks of a reply, joined."""
    return "".join(b.text for b in msg.content if isinstance(b, TextContent))


def reply(content: str) -> AssistantMessage:
    """A final answer."""
    return AssistantMessage(content=[TextContent(content)])


def call(name: str, args: dict[str, Any], call_id: str = "call_1") -> AssistantMessage:
    """A reply that calls one tool."""
    return AssistantMessage(content=[AgentToolCall(call_id, name, args)])


def last_user_text(request: dict[str, Any]) -> str:
    """The text of the last user message in an OpenAI-format request."""
    for msg in reversed(request["messages"]):
        if msg["role"] == "user":
            return "".join(p["text"] for p in msg["content"] if p["type"] == "text")
    raise AssertionError("no user message in request")


class ScriptedLLM:
    """An ``llm_call`` that answers from a script and records every request it is given.

    Each script entry is an ``AssistantMessage`` or a function of the request returning one
    (or raising). Past the end of the script, ``default`` answers.
    """

    def __init__(
        self,
        *script: AssistantMessage | Callable[[dict[str, Any]], AssistantMessage],
        default: Callable[[dict[str, Any]], AssistantMessage] | None = None,
    ) -> None:
        self.script = list(script)
        self.default = default or (lambda req: reply(f"echo: {last_user_text(req)}"))
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> AssistantMessage:
        with self.lock:
            index = len(self.requests)
            self.requests.append(request)
        step = self.script[index] if index < len(self.script) else self.default
        return step if isinstance(step, AssistantMessage) else step(request)


def echo_tool(name: str = "echo", parallel: bool = False) -> AgentTool:
    """A tool returning ``"<name>: <text>"`` for its ``text`` argument."""
    return AgentTool(
        name,
        name.title(),
        f"Echoes its text ({name})",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        lambda _id, args, _sig, _p: AgentToolResult([TextContent(f"{name}: {args['text']}")]),
        parallel_tool_execute=parallel,
    )


def gated_tool(started: threading.Event, release: threading.Event, name: str = "slow") -> AgentTool:
    """A tool that sets ``started`` then waits for ``release`` or an abort of its signal."""

    def run(_id: str, _args: dict[str, Any], signal: Any, _p: Any) -> AgentToolResult:
        if signal is not None:
            signal.on_abort(release.set)  # an abort wakes the tool like a release does
        started.set()
        if not release.wait(WAIT):
            raise TimeoutError("gated tool was never released")
        if signal is not None and signal.aborted:
            return AgentToolResult([TextContent("stopped: aborted")])
        return AgentToolResult([TextContent("slow done")])

    return AgentTool(name, name.title(), "Waits until released", {"type": "object"}, run)

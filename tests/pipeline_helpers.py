"""Shared builders and checks for the tool-pipeline tests (not a conftest: imported explicitly)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from yiemagent import (
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolCall,
    AgentToolCallBatch,
    AgentToolResult,
    AssistantMessage,
    TextContent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    execute_tool_calls,
)

#: How long any synchronisation primitive in a test may wait before the test fails.
WAIT_S = 10.0

OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "units": {"type": "string", "enum": ["metric", "imperial"]},
        "days": {"type": "integer", "minimum": 1},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def text(result_or_message: Any) -> str:
    """The joined text of a result, message or event result's content."""
    content = getattr(result_or_message, "content", result_or_message)
    return "\n".join(b.text if isinstance(b, TextContent) else str(b.get("text", "")) for b in content)


def ok_execute(reply: str = "ok", **result_kw: Any) -> Callable[..., AgentToolResult]:
    """An ``execute`` that returns ``reply`` (plus any ``AgentToolResult`` fields given)."""

    def execute(_id: str, _args: dict[str, Any], _signal: Any, _on_partial: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(reply)], **result_kw)

    return execute


def echo_execute(_id: str, args: dict[str, Any], _signal: Any, _on_partial: Any) -> AgentToolResult:
    """An ``execute`` that returns its call id and sorted arguments as text."""
    return AgentToolResult([TextContent(f"{_id}:{sorted(args.items())}")], {"args": args})


def make_tool(
    name: str,
    execute: Callable[..., Any] | None = None,
    schema: dict[str, Any] | None = None,
    *,
    parallel: bool = False,
    **kw: Any,
) -> AgentTool:
    """An ``AgentTool`` with a label and description derived from ``name``."""
    return AgentTool(
        name=name,
        label=name.title(),
        description=f"The {name} tool.",
        input_schema=OBJECT_SCHEMA if schema is None else schema,
        execute=ok_execute(name) if execute is None else execute,
        parallel_tool_execute=parallel,
        **kw,
    )


def call(call_id: str, name: str, arguments: Any = None) -> AgentToolCall:
    return AgentToolCall(call_id, name, {} if arguments is None else arguments)


class Recorder:
    """An event sink that records events and fails loudly if two threads enter it at once."""

    def __init__(self, on_event: Callable[[Any], None] | None = None) -> None:
        self.events: list[Any] = []
        self.overlaps = 0
        self._inside = threading.Lock()
        self._on_event = on_event

    def __call__(self, event: Any) -> None:
        if not self._inside.acquire(blocking=False):
            self.overlaps += 1
            self._inside.acquire()
        try:
            self.events.append(event)
            if self._on_event is not None:
                self._on_event(event)
        finally:
            self._inside.release()

    def of(self, kind: type, call_id: str | None = None) -> list[Any]:
        return [
            e for e in self.events if isinstance(e, kind) and (call_id is None or e.tool_call_id == call_id)
        ]


def run(
    tools: Iterable[AgentTool],
    calls: Sequence[AgentToolCall],
    config: AgentLoopConfig | None = None,
    signal: AbortSignal | None = None,
    sink: Any = None,
    runner: Callable[..., AgentToolCallBatch] = execute_tool_calls,
) -> tuple[AgentToolCallBatch, Recorder]:
    """Run ``calls`` through ``runner`` with a fresh context; return the batch and the recorder."""
    tools = list(tools)
    context = AgentContext("system", [], tools)
    config = AgentLoopConfig(tools) if config is None else config
    recorder = Recorder() if sink is None else sink
    batch = runner(context, AssistantMessage(list(calls)), list(calls), config, signal, recorder)
    return batch, recorder


def assert_batch_well_formed(
    calls: Sequence[AgentToolCall], batch: AgentToolCallBatch, events: Sequence[Any]
) -> None:
    """Every call has one result in call order, and one start and one end event, start before
    updates before end."""
    assert [m.tool_call_id for m in batch.messages] == [c.id for c in calls]
    assert [m.tool_name for m in batch.messages] == [c.name for c in calls]
    for c in calls:
        own = [(i, e) for i, e in enumerate(events) if getattr(e, "tool_call_id", None) == c.id]
        starts = [i for i, e in own if isinstance(e, ToolExecStartEvent)]
        ends = [i for i, e in own if isinstance(e, ToolExecEndEvent)]
        updates = [i for i, e in own if isinstance(e, ToolExecUpdateEvent)]
        assert len(starts) == 1, f"{c.id}: {len(starts)} start events"
        assert len(ends) == 1, f"{c.id}: {len(ends)} end events"
        assert all(starts[0] < u < ends[0] for u in updates), f"{c.id}: update outside start..end"
    ends_by_id = {e.tool_call_id: e for e in events if isinstance(e, ToolExecEndEvent)}
    for m in batch.messages:
        end = ends_by_id[m.tool_call_id]
        assert end.is_error == m.is_error
        assert list(end.result.content) == list(m.content)

"""Events as plain JSON-ready dicts and back, so they can cross a process or machine boundary.

``event_to_dict`` is the event's own ``to_dict()`` (messages in their ``to_dict`` form, values a
tool chose freely made JSON-ready), plus what reading it back needs. ``event_from_dict``
rebuilds the event, so a listener far from the agent receives the same classes as one beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from yiemagent.core._content import content_from_dict
from yiemagent.core._events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecEndEvent,
    ToolExecStartEvent,
    ToolExecUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from yiemagent.core._json_safety import json_ready
from yiemagent.core._messages import AgentMessage, AssistantMessage, LlmUsage, ToolResultMessage
from yiemagent.core._tools import AgentToolResult
from yiemagent.core._usage import RunUsage

__all__ = ["event_from_dict", "event_to_dict"]

_RESULT_TAG = "__agent_tool_result__"  # marks a partial result that was an AgentToolResult


def _result_from_dict(data: Mapping[str, Any]) -> AgentToolResult:
    usage = data.get("usage")
    return AgentToolResult(
        [content_from_dict(b) for b in data.get("content") or []],
        dict(data.get("details") or {}),
        None if usage is None else LlmUsage.from_dict(usage),
        bool(data.get("terminate", False)),
    )


def _value_from_dict(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {_RESULT_TAG}:
        return _result_from_dict(value[_RESULT_TAG])
    return value


def _message(data: Any) -> Any:
    return None if data is None else AgentMessage.from_dict(data)


def event_to_dict(event: AgentEvent) -> dict[str, Any]:
    """The JSON-ready dict of ``event``: its own ``to_dict()``, with a partial result that was an
    ``AgentToolResult`` tagged so that it reads back as one. An event class this module does not
    know is given by its ``event_type`` and its fields made JSON-ready (it reads back as a plain
    ``AgentEvent``)."""
    out = event.to_dict()
    if isinstance(event, ToolExecUpdateEvent) and isinstance(event.partial_result, AgentToolResult):
        out["partial_result"] = {_RESULT_TAG: event.partial_result.to_dict()}
    elif type(event) not in _KNOWN:
        out["fields"] = json_ready({f.name: getattr(event, f.name) for f in attrs.fields(type(event))})
    return out


_KNOWN = frozenset(
    {
        AgentStartEvent,
        AgentEndEvent,
        TurnStartEvent,
        TurnEndEvent,
        MessageStartEvent,
        MessageUpdateEvent,
        MessageEndEvent,
        ToolExecStartEvent,
        ToolExecUpdateEvent,
        ToolExecEndEvent,
    }
)


def _agent_end(data: Mapping[str, Any]) -> AgentEndEvent:
    """The ``AgentEndEvent`` of ``data``, its response given back the run's usage it carried."""
    raw = data.get("response")
    response = None if raw is None else _typed(AssistantMessage, raw)
    usage = data.get("run_usage")
    if response is not None and usage is not None:
        object.__setattr__(response, "run_usage", RunUsage.from_dict(usage))
    return AgentEndEvent([AgentMessage.from_dict(m) for m in data["messages"]], response=response)


def event_from_dict(data: Mapping[str, Any]) -> AgentEvent:
    """The event that ``event_to_dict`` gave ``data`` for; ``ValueError`` when ``data`` is not one."""
    kind = data.get("type")
    try:
        if kind == ToolExecStartEvent.event_type:
            return ToolExecStartEvent(data["tool_call_id"], data["tool_name"], data["arguments"])
        if kind == ToolExecUpdateEvent.event_type:
            return ToolExecUpdateEvent(
                data["tool_call_id"],
                data["tool_name"],
                data["arguments"],
                _value_from_dict(data["partial_result"]),
            )
        if kind == ToolExecEndEvent.event_type:
            return ToolExecEndEvent(
                data["tool_call_id"],
                data["tool_name"],
                _result_from_dict(data["result"]),
                bool(data["is_error"]),
            )
        if kind == AgentStartEvent.event_type:
            return AgentStartEvent()
        if kind == AgentEndEvent.event_type:
            return _agent_end(data)
        if kind == TurnStartEvent.event_type:
            return TurnStartEvent(int(data["turn"]))
        if kind == TurnEndEvent.event_type:
            results = [_typed(ToolResultMessage, m) for m in data["tool_results"]]
            return TurnEndEvent(_typed(AssistantMessage, data["message"]), results)
        if kind == MessageStartEvent.event_type:
            return MessageStartEvent(_message(data.get("message")))
        if kind == MessageEndEvent.event_type:
            return MessageEndEvent(AgentMessage.from_dict(data["message"]))
        if kind == MessageUpdateEvent.event_type:
            return MessageUpdateEvent(
                data["kind"],
                data["delta"],
                int(data["content_index"]),
                data.get("tool_call_id"),
                data.get("tool_name"),
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a {kind!r} event dict: {type(exc).__name__}: {exc}") from exc
    if isinstance(kind, str) and "fields" in data:
        return AgentEvent()
    raise ValueError(f"not an event dict: type {kind!r}")


_M = TypeVar("_M", bound=AgentMessage)


def _typed(cls: type[_M], data: Mapping[str, Any]) -> _M:
    """The message of class ``cls`` in ``data``; ``ValueError`` for another role."""
    message = cls.from_dict(data)
    if not isinstance(message, cls):
        raise ValueError(f"expected a {cls.__name__}, got {type(message).__name__}")
    return message

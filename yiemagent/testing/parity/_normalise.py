"""Turning events and messages (their ``to_dict()`` forms) into the normalised trace format.

The normalised form keeps what every implementation of the design must agree on and replaces
what legitimately differs: tool-call ids the scenario did not give become ``<id:N>`` (N counts
from 1 in order of first appearance), timestamps are left out, an ``error_message`` becomes
``"<message>"``, arguments that are not a JSON object become ``"<unusable>"``, and each event
gets the run and turn it belongs to. docs/PARITY.md states the same rules for other languages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "ERROR_MESSAGE",
    "UNUSABLE",
    "Normaliser",
    "canonical_json",
    "generated_id",
]

UNUSABLE = "<unusable>"
ERROR_MESSAGE = "<message>"


def generated_id(number: int) -> str:
    """The placeholder of the ``number``-th id the scenario did not give."""
    return f"<id:{number}>"


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: keys sorted, no spaces, non-ASCII kept (what ``echo``
    tools return and what comparisons print)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _text(blocks: Iterable[Any]) -> str:
    return "\n".join(
        b["text"]
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


class Normaliser:
    """Normalises one trace: events in emission order, then responses, then the history.

    ``known_ids`` are the tool-call ids the scenario gives (in its replies and history); they are
    kept, every other id is replaced consistently throughout the trace. Not thread-safe: feed it
    from one place (the driver calls it from its serialised event sink).
    """

    def __init__(self, known_ids: Iterable[str]) -> None:
        self.known = frozenset(known_ids)
        self.ids: dict[str, str] = {}
        self.run = 0
        self.turn = 0

    def call_id(self, raw: Any) -> str:
        """The normalised form of a tool-call id."""
        value = str(raw)
        if value in self.known:
            return value
        if value not in self.ids:
            self.ids[value] = generated_id(len(self.ids) + 1)
        return self.ids[value]

    def arguments(self, raw: Any) -> Any:
        """Arguments as compared: the object itself, or ``<unusable>`` for anything else."""
        return raw if isinstance(raw, Mapping) else UNUSABLE

    def message(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """A message's normalised form, from its ``to_dict()``."""
        role = raw.get("role")
        content = raw.get("content") or []
        if role == "user":
            return {"role": "user", "text": _text(content)}
        if role == "assistant":
            calls = [
                {
                    "id": self.call_id(b.get("id")),
                    "name": str(b.get("name", "")),
                    "arguments": self.arguments(b.get("arguments")),
                }
                for b in content
                if isinstance(b, Mapping) and b.get("type") == "toolCall"
            ]
            return {
                "role": "assistant",
                "text": _text(content),
                "tool_calls": calls,
                "stop_reason": str(raw.get("stop_reason")),
                "error_message": None if raw.get("error_message") is None else ERROR_MESSAGE,
            }
        details = dict(raw.get("details") or {})
        kind = details.pop("error_kind", None)
        return {
            "role": "toolResult",
            "tool_call_id": self.call_id(raw.get("tool_call_id")),
            "tool_name": str(raw.get("tool_name", "")),
            "is_error": bool(raw.get("is_error")),
            "error_kind": kind if isinstance(kind, str) else None,
            "text": _text(content),
            "details": details,
            "added_tool_names": list(raw.get("added_tool_names") or []),
        }

    def event(self, raw: Mapping[str, Any]) -> dict[str, Any] | None:
        """An event's normalised form, from its ``to_dict()``; ``None`` for ``message_update``
        (scripted replies are not streamed, and streamed pieces differ by design)."""
        kind = raw["type"]
        if kind == "message_update":
            return None
        if kind == "agent_start":
            self.run += 1
            self.turn = 0
        elif kind == "turn_start":
            self.turn += 1
        out: dict[str, Any] = {"type": kind, "run": max(self.run, 1), "turn": self.turn}
        if kind == "agent_end":
            out["messages"] = len(raw.get("messages") or [])
        elif kind == "turn_end":
            out["stop_reason"] = str(raw["message"].get("stop_reason"))
            out["tool_results"] = [self.call_id(m.get("tool_call_id")) for m in raw.get("tool_results") or []]
        elif kind == "message_start":
            message = raw.get("message")
            out["role"] = message.get("role") if isinstance(message, Mapping) else "assistant"
        elif kind == "message_end":
            out["message"] = self.message(raw["message"])
        elif kind.startswith("tool_execution_"):
            out["tool_call_id"] = self.call_id(raw["tool_call_id"])
            out["tool_name"] = str(raw["tool_name"])
            if kind == "tool_execution_start":
                out["arguments"] = self.arguments(raw.get("arguments"))
            elif kind == "tool_execution_update":
                out["text"] = str(raw.get("text", ""))
            else:
                result = raw.get("result") or {}
                details = dict(result.get("details") or {})
                details.pop("error_kind", None)
                out.update(
                    is_error=bool(raw["is_error"]),
                    error_kind=raw.get("error_kind"),
                    text=str(raw.get("text", "")),
                    details=details,
                    terminate=bool(result.get("terminate")),
                )
        return out

"""Turning events and messages (their ``to_dict()`` forms) into the normalised trace format.

The normalised form keeps what every implementation of the design must agree on and replaces
what legitimately differs: tool-call ids the scenario did not give become ``<id:N>`` (N counts
from 1 in order of first appearance), timestamps are left out, an ``error_message`` becomes
``"<message>"``, arguments that are not a JSON object become ``"<unusable>"``, a capped tool
result's text becomes its kept start and ``<cut>``, and each event gets the run and turn it
belongs to. docs/PARITY.md states the same rules for other languages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "ERROR_MESSAGE",
    "UNUSABLE",
    "Normaliser",
    "asked_output",
    "canonical_json",
    "cut_text",
    "generated_id",
]

UNUSABLE = "<unusable>"
ERROR_MESSAGE = "<message>"
BUILTIN = "<builtin>"
WRITTEN = "<written>"
# The tools every implementation brings itself (spec sections 4 and 15): their descriptions,
# schemas and writeTool's wording and paths are each implementation's own.
BUILTIN_TOOLS = ("listTools", "writeTool")
OUTPUT_TOOL = "final_answer"  # the output profile's final-answer tool
ACCEPTED = "<accepted>"
# A tool result capped by max_tool_result_chars (the budgets profile) keeps its whole text
# (yiemagent in the message's full_text, beside the tool's details); the trace shows it as
# details["full_result"]. The note of the cut is each implementation's own wording.
FULL_RESULT = "full_result"
CUT = "<cut>"


def _builtin_lines(text: str) -> str:
    """A listTools listing with the lines of the built-in tools reduced to their names."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        for name in BUILTIN_TOOLS:
            if line.startswith(f"- {name}:"):
                lines[i] = f"- {name}: {BUILTIN}"
    return "\n".join(lines)


def builtin_result(
    tool_name: str, is_error: bool, text: str, details: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The text and details of a built-in tool's result as compared: a listTools listing keeps
    every line but the built-in tools' own (their descriptions are each implementation's), and
    no details (what they hold is each implementation's own); a
    successful writeTool result is ``<written>`` with only ``addedToolNames`` in its details
    (its wording and the file's path are the implementation's own), and a successful call of
    the output tool is ``<accepted>`` with no details."""
    if tool_name == "listTools" and not is_error:
        return _builtin_lines(text), {}
    if tool_name == "writeTool" and not is_error:
        return WRITTEN, {k: v for k, v in details.items() if k == "addedToolNames"}
    if tool_name == OUTPUT_TOOL and not is_error:
        return ACCEPTED, {}
    return text, details


def result_details(message: Mapping[str, Any]) -> dict[str, Any]:
    """A tool result message's details as the trace shows them: the tool's own, with the whole
    text of a capped result (the message's ``full_text``) as ``full_result``."""
    details = dict(message.get("details") or {})
    whole = message.get("full_text")
    if isinstance(whole, str):
        details[FULL_RESULT] = whole
    return details


def cut_text(text: str, details: Mapping[str, Any] | None) -> str:
    """A capped tool result's text as compared: when ``details`` keeps the whole text
    (``full_result``) and ``text`` is not it, the start ``text`` shares with the whole text,
    then ``<cut>`` (the note an implementation adds about the cut is its own wording)."""
    whole = (details or {}).get(FULL_RESULT)
    if not isinstance(whole, str) or text == whole:
        return text
    shared = 0
    for mine, theirs in zip(text, whole, strict=False):
        if mine != theirs:
            break
        shared += 1
    return whole[:shared] + CUT


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


USAGE_FIELDS = ("input", "output", "cache_read", "cache_write")


def usage_counts(raw: Any) -> dict[str, int] | None:
    """The token counts of a message's usage, or ``None`` when every one is 0 (or there is no
    usage): a trace shows usage only where the model reported some."""
    if not isinstance(raw, Mapping):
        return None
    counts = {k: int(raw.get(k) or 0) for k in USAGE_FIELDS}
    return counts if any(counts.values()) else None


def asked_output(response_format: Any) -> dict[str, Any] | None:
    """The output a request asks for in its ``response_format`` (OpenAI's ``json_schema``
    form), as ``{"name", "schema"}``, or ``None``."""
    inner = response_format.get("json_schema") if isinstance(response_format, Mapping) else None
    if not isinstance(inner, Mapping) or not isinstance(inner.get("schema"), Mapping):
        return None
    return {"name": str(inner.get("name", "")), "schema": dict(inner["schema"])}


def _spec_text(content: Any) -> str:
    """The text of a spec-view message's content: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    return _text(content) if isinstance(content, list) else ""


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _spec_arguments(raw: Any) -> Any:
    """A spec-view call's arguments (a JSON text) as compared: the object, or ``<unusable>``."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw, parse_constant=_refuse)
        except ValueError:
            return UNUSABLE
    return raw if isinstance(raw, Mapping) else UNUSABLE


class Normaliser:
    """Normalises one trace: events in emission order, then responses, then the history.

    ``known_ids`` are the tool-call ids the scenario gives (in its replies and history); they are
    kept, every other id is replaced consistently throughout the trace. Not thread-safe: feed it
    from one place (the driver calls it from its serialised event sink).
    """

    def __init__(self, known_ids: Iterable[str], restore: Callable[[Any], Any] | None = None) -> None:
        self.known = frozenset(known_ids)
        # Turns writeTool code this implementation made from a placeholder back into it.
        self.restore: Callable[[Any], Any] = restore if restore is not None else (lambda args: args)
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
        return self.restore(raw) if isinstance(raw, Mapping) else UNUSABLE

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
            out: dict[str, Any] = {
                "role": "assistant",
                "text": _text(content),
                "tool_calls": calls,
                "stop_reason": str(raw.get("stop_reason")),
                "error_message": None if raw.get("error_message") is None else ERROR_MESSAGE,
            }
            usage = usage_counts(raw.get("usage"))
            if usage is not None:
                out["usage"] = usage
            if raw.get("output") is not None:
                out["output"] = raw["output"]
            return out
        details = result_details(raw)
        kind = details.pop("error_kind", None)
        tool_name = str(raw.get("tool_name", ""))
        text, details = builtin_result(tool_name, bool(raw.get("is_error")), _text(content), details)
        text = cut_text(text, details)
        return {
            "role": "toolResult",
            "tool_call_id": self.call_id(raw.get("tool_call_id")),
            "tool_name": tool_name,
            "is_error": bool(raw.get("is_error")),
            "error_kind": kind if isinstance(kind, str) else None,
            "text": text,
            "details": details,
            "added_tool_names": list(raw.get("added_tool_names") or []),
        }

    def _restored(self, args: Any) -> Any:
        return self.restore(args) if isinstance(args, Mapping) else args

    def _spec_message(
        self, raw: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        role = raw.get("role")
        text = _spec_text(raw.get("content"))
        if role == "assistant":
            calls = [
                {
                    "id": self.call_id(c.get("id")),
                    "name": str((c.get("function") or {}).get("name", "")),
                    "arguments": self._restored(_spec_arguments((c.get("function") or {}).get("arguments"))),
                }
                for c in raw.get("tool_calls") or []
                if isinstance(c, Mapping)
            ]
            return {"role": "assistant", "text": text, "tool_calls": calls}
        if role == "tool":
            raw_id = str(raw.get("tool_call_id"))
            typed = results.get(raw_id, {})
            kind = (typed.get("details") or {}).get("error_kind")
            text, _ = builtin_result(str(typed.get("tool_name", "")), bool(typed.get("is_error")), text, {})
            text = cut_text(text, result_details(typed))
            return {
                "role": "toolResult",
                "tool_call_id": self.call_id(raw_id),
                "text": text,
                "is_error": bool(typed.get("is_error")),
                "error_kind": kind if isinstance(kind, str) else None,
            }
        return {"role": "user", "text": text}

    def request(
        self, spec: Mapping[str, Any], typed_messages: Iterable[Mapping[str, Any]], session_id: Any
    ) -> dict[str, Any]:
        """A request's normalised form, from its spec view (``{"messages": [...], "tools":
        [...]}`` in OpenAI's chat shape, the system prompt as its first message) and the typed
        messages' ``to_dict()`` (which say whether a tool result is an error, and its kind)."""
        results = {str(m.get("tool_call_id")): m for m in typed_messages if m.get("role") == "toolResult"}
        system = ""
        messages: list[dict[str, Any]] = []
        for raw in spec.get("messages") or []:
            if not isinstance(raw, Mapping):
                continue
            if raw.get("role") == "system":
                system = _spec_text(raw.get("content"))
                continue
            messages.append(self._spec_message(raw, results))
        tools: list[dict[str, Any]] = []
        for raw in spec.get("tools") or []:
            function = raw.get("function") if isinstance(raw, Mapping) else None
            if isinstance(function, Mapping):
                name = str(function.get("name", ""))
                builtin = name in BUILTIN_TOOLS
                # The output tool's description is each implementation's; its schema is the output's.
                described = builtin or name == OUTPUT_TOOL
                tools.append(
                    {
                        "name": name,
                        "description": BUILTIN if described else str(function.get("description") or ""),
                        "input_schema": {} if builtin else dict(function.get("parameters") or {}),
                    }
                )
        tools.sort(key=lambda t: str(t["name"]))
        request: dict[str, Any] = {
            "type": "llm_request",
            "run": max(self.run, 1),
            "turn": self.turn,
            "system_prompt": system,
            "messages": messages,
            "tools": tools,
            "session_id": None if session_id is None else str(session_id),
        }
        output = asked_output(spec.get("response_format"))
        if output is not None:
            request["output"] = output
        return request

    def hook(
        self,
        kind: str,
        call: Mapping[str, Any],
        args: Any,
        history: Iterable[Any],
        result: Mapping[str, Any] | None = None,
        is_error: bool = False,
    ) -> dict[str, Any]:
        """A hook call's normalised form: ``call`` is the tool call's ``to_dict()``, ``history``
        the context's messages (anything with a ``role``), ``result`` (after hooks) the
        result's ``to_dict()``."""
        out: dict[str, Any] = {
            "type": "hook",
            "run": max(self.run, 1),
            "turn": self.turn,
            "hook": kind,
            "tool_call_id": self.call_id(call.get("id")),
            "tool_name": str(call.get("name", "")),
            "arguments": self.arguments(args),
            "history": [str(getattr(m, "role", None) or m.get("role")) for m in history],
        }
        if result is not None:
            kind_of = (result.get("details") or {}).get("error_kind")
            text, _ = builtin_result(out["tool_name"], bool(is_error), _text(result.get("content") or []), {})
            text = cut_text(text, result.get("details"))
            out.update(
                is_error=bool(is_error),
                error_kind=kind_of if isinstance(kind_of, str) else None,
                text=text,
            )
        return out

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
        elif kind == "approval_requested":
            out["pending"] = [
                {
                    "tool_call_id": self.call_id(p.get("tool_call_id")),
                    "tool_name": str(p.get("tool_name", "")),
                    "arguments": self.arguments(self._restored(p.get("arguments"))),
                }
                for p in raw.get("pending") or []
            ]
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
                text, details = builtin_result(
                    out["tool_name"], bool(raw["is_error"]), str(raw.get("text", "")), details
                )
                text = cut_text(text, details)
                out.update(
                    is_error=bool(raw["is_error"]),
                    error_kind=raw.get("error_kind"),
                    text=text,
                    details=details,
                    terminate=bool(result.get("terminate")),
                )
        return out

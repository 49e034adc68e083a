"""The stable form of what passes through an ``llm_call``: requests, replies and streamed pieces
as a cassette holds them.

A request is written as the conformance trace's ``llm_request`` line (``testing.parity``'s
``Normaliser``) without its run and turn, which only the events know. Nothing in the form
changes between two recordings of the same run: tool-call ids become ``call_1``, ``call_2``, …
and session ids ``session_1``, … in order of first appearance (the requests of one cassette
share one numbering), and timestamps are left out. Recording and replaying a run see the ids
in the same order, so both sides number them alike.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

from yiemagent.core._chat_turns import NO_OUTPUT_RESULT, arguments_json
from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._json_safety import argument_problem, json_ready
from yiemagent.core._messages import AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._request import LlmRequest
from yiemagent.core._spec_format import response_format_view
from yiemagent.testing.parity._normalise import (
    UNUSABLE,
    Normaliser,
    _spec_arguments,
    _spec_text,
    asked_output,
    builtin_result,
)

__all__ = ["CassetteForm"]


class _StableIds(Normaliser):
    """The trace normaliser with the cassette's ids: ``call_N`` for every tool-call id, numbered
    in order of first appearance."""

    def __init__(self) -> None:
        super().__init__(())

    def call_id(self, raw: Any) -> str:
        value = str(raw)
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = f"call_{len(self.ids) + 1}"
        return found


def _tool_results(messages: Sequence[Any], wanted: set[str]) -> dict[str, dict[str, Any]]:
    """What the trace normaliser reads of the typed tool results ``wanted`` (whether one is an
    error, and its kind), looked up from the end of the history, where new results are."""
    found: dict[str, dict[str, Any]] = {}
    for m in reversed(messages):
        if len(found) == len(wanted):
            break
        if isinstance(m, ToolResultMessage) and m.tool_call_id in wanted:
            found[m.tool_call_id] = {"tool_name": m.tool_name, "is_error": m.is_error, "details": m.details}
    return found


def _common_prefix(new: Sequence[Any], old: Sequence[Any]) -> int:
    """How many leading items ``new`` shares with ``old`` (the same objects, not equal ones)."""
    same = list(map(operator.is_, new, old))  # at C speed: a turn compares the whole history
    try:
        return same.index(False)
    except ValueError:
        return len(same)


def _with_output(form: dict[str, Any], response_format: Any) -> dict[str, Any]:
    """``form`` with the output the request asks for in its text (``{"name", "schema"}``), as
    a trace's request shows it, when it asks for one."""
    output = asked_output(response_format)
    if output is not None:
        form["output"] = output
    return form


def _tool_dicts(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The spec view's ``tools`` entries for typed tools (what the trace normaliser reads)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for t in tools
    ]


class _NotPlain(Exception):
    """A typed message the direct reading does not cover: the spec view reads it instead."""


def _texts(blocks: Sequence[Any]) -> list[str] | None:
    """The texts of a user message or tool result as its spec view has them (typed text blocks
    only; ``None`` when a block is anything else, which the spec view reads its own way)."""
    texts = []
    for block in blocks:
        if not isinstance(block, TextContent):
            return None
        texts.append(block.text)
    return texts


def _typed_message(message: Any, ids: _StableIds) -> dict[str, Any] | None:
    """A typed message's form, equal to what its spec view gives (a property test holds the
    two together), read without building that view; ``None`` for a kind of message this does
    not cover (one with images, raw dict blocks or thinking), which the caller reads through
    the spec view; raises ``_NotPlain`` for a message the spec view leaves out."""
    if isinstance(message, UserMessage):
        texts = _texts(message.content)
        return None if texts is None else {"role": "user", "text": "\n".join(texts)}
    if isinstance(message, AssistantMessage):
        text: list[str] = []
        calls = []
        for block in message.content:
            if isinstance(block, TextContent):
                text.append(block.text)
            elif isinstance(block, AgentToolCall):
                arguments = _spec_arguments(arguments_json(block.arguments))
                calls.append({"id": ids.call_id(block.id), "name": block.name, "arguments": arguments})
            else:
                return None
        return {"role": "assistant", "text": "".join(text), "tool_calls": calls}
    if isinstance(message, ToolResultMessage):
        texts = _texts(message.content)
        if texts is None:
            return None
        kind = message.details.get("error_kind")
        shown, _ = builtin_result(
            message.tool_name, message.is_error, "\n".join(texts) if texts else NO_OUTPUT_RESULT, {}
        )
        return {
            "role": "toolResult",
            "tool_call_id": ids.call_id(message.tool_call_id),
            "text": shown,
            "is_error": bool(message.is_error),
            "error_kind": kind if isinstance(kind, str) else None,
        }
    raise _NotPlain


class CassetteForm:
    """Turns one run's requests, replies and deltas into the cassette's form, numbering ids as
    it goes. Not thread-safe: a recorder or replayer calls it under its own lock, in call order
    (the request, then the deltas, then the reply)."""

    def __init__(self) -> None:
        self._ids = _StableIds()
        self._sessions: dict[str, str] = {}
        # The previous request's message dicts, the forms of its messages (the system prompt's
        # aside), how many of those forms the first i dicts gave, and its system prompts.
        self._raws: list[Any] = []
        self._messages: list[dict[str, Any]] = []
        self._counts: list[int] = [0]
        self._systems: list[tuple[int, str]] = []
        self.reused = 0  # how many messages the latest request shares with the one before
        self._tool_dicts: list[Any] = []  # the previous request's tools, and their form
        self._tool_forms: list[dict[str, Any]] = []
        # The same for an LlmRequest read directly: its typed messages and their forms.
        self._typed: list[Any] = []
        self._typed_forms: list[dict[str, Any]] = []
        self._typed_counts: list[int] = [0]
        self._typed_tools: list[Any] = []

    def session_id(self, raw: Any) -> str | None:
        """``session_N`` for a session id (numbered in order of first appearance), ``None`` for none."""
        if raw is None:
            return None
        value = str(raw)
        found = self._sessions.get(value)
        if found is None:
            found = self._sessions[value] = f"session_{len(self._sessions) + 1}"
        return found

    def request(self, request: Any) -> dict[str, Any]:
        """The request's form: ``{"system_prompt", "messages", "tools", "session_id"}`` from its
        spec view (what any ``llm_call`` reads of it); a request that is no mapping has none.

        Incremental: the messages the previous request shared (the same dicts, as the agent's
        formatter keeps them from turn to turn) keep their form, so a turn costs the messages
        added since, not the whole history. An ``LlmRequest`` of plain messages (text, tool
        calls, text results) is read from its typed fields, which gives the same form without
        building the spec view."""
        if type(request) is LlmRequest:
            direct = self._direct(request)
            if direct is not None:
                return _with_output(direct, response_format_view(request.output) if request.output else None)
        spec = request if isinstance(request, Mapping) else {}
        raws = spec.get("messages") or []
        if not isinstance(raws, list):
            raws = list(raws) if isinstance(raws, Sequence) else []
        kept = _common_prefix(raws, self._raws)
        added = [m for m in raws[kept:] if isinstance(m, Mapping)]
        wanted = {str(m.get("tool_call_id")) for m in added if m.get("role") == "tool"}
        typed = _tool_results(getattr(request, "messages", None) or (), wanted) if wanted else {}
        self.reused = self._counts[kept]
        messages = self._messages[: self.reused]
        counts = self._counts[: kept + 1]
        systems = [s for s in self._systems if s[0] < kept]
        for index, raw in enumerate(raws[kept:], kept):
            if not isinstance(raw, Mapping):
                pass
            elif raw.get("role") == "system":
                systems.append((index, _spec_text(raw.get("content"))))
            else:
                messages.append(self._ids._spec_message(raw, typed))
            counts.append(len(messages))
        self._raws, self._messages, self._counts, self._systems = raws, messages, counts, systems
        session = getattr(request, "session_id", None)
        if session is None and isinstance(request, Mapping):
            session = request.get("session_id")
        form = {
            "system_prompt": systems[-1][1] if systems else "",
            "messages": list(messages),
            "tools": self._tools(spec.get("tools") or []),
            "session_id": self.session_id(session),
        }
        return _with_output(form, spec.get("response_format"))

    def _direct(self, request: LlmRequest) -> dict[str, Any] | None:
        """The form of ``request`` read from its typed fields, or ``None`` when a message is one
        only the spec view reads (the typed caches are then dropped)."""
        messages = list(request.messages)
        kept = _common_prefix(messages, self._typed)
        forms = self._typed_forms[: self._typed_counts[kept]]
        counts = self._typed_counts[: kept + 1]
        for message in messages[kept:]:
            try:
                form = _typed_message(message, self._ids)
            except _NotPlain:
                form = {}
            if form is None:
                self._typed, self._typed_forms, self._typed_counts = [], [], [0]
                return None
            if form:
                forms.append(form)
            counts.append(len(forms))
        self.reused = counts[kept]
        self._typed, self._typed_forms, self._typed_counts = messages, forms, counts
        tools = list(request.tools.values())
        if len(tools) != len(self._typed_tools) or _common_prefix(tools, self._typed_tools) < len(tools):
            self._typed_tools = tools
            self._tool_forms = self._ids.request({"tools": _tool_dicts(tools)}, (), None)["tools"]
        return {
            "system_prompt": request.system_prompt,
            "messages": list(forms),
            "tools": list(self._tool_forms),
            "session_id": self.session_id(request.session_id),
        }

    def _tools(self, tools: Any) -> list[dict[str, Any]]:
        """The form of the request's tools, made again only when they are not the same dicts as
        the previous request's (the agent's formatter keeps them while the tools do not change)."""
        dicts = list(tools) if isinstance(tools, Sequence) else []
        if len(dicts) != len(self._tool_dicts) or _common_prefix(dicts, self._tool_dicts) < len(dicts):
            self._tool_dicts = dicts
            self._tool_forms = self._ids.request({"tools": dicts}, (), None)["tools"]
        return list(self._tool_forms)

    def delta(self, event: MessageUpdateEvent) -> dict[str, Any]:
        """A streamed piece's form: the event's fields, its tool-call id numbered."""
        data = event.to_dict()
        del data["type"]
        if data["tool_call_id"] is not None:
            data["tool_call_id"] = self._ids.call_id(data["tool_call_id"])
        return data

    def reply(self, message: AssistantMessage) -> dict[str, Any]:
        """A reply's form: its ``to_dict()`` without the timestamp, its tool-call ids numbered
        (a call without an id keeps none: the agent names it, as it did when recording), and
        finite JSON throughout: arguments that are not (NaN, an object JSON cannot hold, nested
        too deep) become ``"<unusable>"``, a text the loop refuses as it refused the original,
        and any other such value in a raw block its ``json_ready`` form."""
        data = message.to_dict()
        del data["timestamp"]
        del data["role"]
        for block in data["content"]:
            if block.get("type") != "toolCall":
                continue
            if block.get("id"):
                block["id"] = self._ids.call_id(block["id"])
            arguments = block.get("arguments")
            if not isinstance(arguments, str) and argument_problem(arguments) is not None:
                block["arguments"] = UNUSABLE  # NaN or not JSON: the file must stay readable
        ready: dict[str, Any] = json_ready(data)
        return ready

    def note_reply(self, reply: Mapping[str, Any], deltas: Sequence[Mapping[str, Any]]) -> None:
        """Number the ids of a recorded reply and its deltas as ``reply`` and ``delta`` did when
        it was recorded, so a replay numbers the requests after it alike."""
        for piece in deltas:
            if piece.get("tool_call_id") is not None:
                self._ids.call_id(piece["tool_call_id"])
        for block in reply.get("content") or []:
            if isinstance(block, Mapping) and block.get("type") == "toolCall" and block.get("id"):
                self._ids.call_id(block["id"])

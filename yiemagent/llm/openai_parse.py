"""Reading OpenAI chat-completion replies, whole or streamed, into an ``AssistantMessage``.

Reasoning (``reasoning_content`` from DeepSeek, vLLM and llama.cpp, ``reasoning`` from Ollama and
OpenRouter) becomes ``ThinkingContent``; tool calls become ``AgentToolCall`` blocks whose arguments
are parsed from their JSON string (a string that is not JSON is kept as it is, so the pipeline
can tell the model). ``finish_reason`` maps to ``stop``, ``length`` or ``toolUse``; a reply the
content filter stopped (``content_filter``) or the model refused (``message.refusal``) has
``stop_reason="error"`` and an ``error_message`` saying so, its text kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from yiemagent.content import AgentToolCall, ContentBlock, TextContent, ThinkingContent
from yiemagent.events import MessageUpdateEvent
from yiemagent.llm.errors import LlmError, error_object_text
from yiemagent.llm.jsonutil import as_int, as_mapping, parts_text
from yiemagent.llm.redact import excerpt
from yiemagent.llm.transport import Emit
from yiemagent.messages import AssistantMessage, LlmUsage
from yiemagent.tool_calls import new_tool_call_id, parse_arguments, tool_call_from_entry

__all__ = [
    "OPENAI_API",
    "OpenAIStreamAssembler",
    "map_finish_reason",
    "parse_chat_completion",
    "usage_from_openai",
]

OPENAI_API = "openai-completions"

_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "content_filter": "error",
}


def map_finish_reason(reason: Any, has_tool_calls: bool = False) -> str:
    """Map ``finish_reason`` to the library's ``stop_reason``; unknown or missing means ``stop``.

    ``content_filter`` is ``error``. A reply that carries tool calls but says ``stop`` (Ollama
    and some other servers do) is ``toolUse``.
    """
    mapped = _FINISH_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
    return "toolUse" if has_tool_calls and mapped == "stop" else mapped


def stop_of(reason: Any, has_tool_calls: bool, refusal: str, label: str) -> tuple[str, str | None]:
    """Return ``(stop_reason, error_message)`` of a reply: a refusal or a content-filter stop is
    an ``error`` whose message says what happened; anything else has no message."""
    if refusal:
        return "error", f"{label} model refused to answer: {refusal}"
    stop = map_finish_reason(reason, has_tool_calls)
    if stop == "error":
        return stop, (f"{label} stopped the reply: its content filter flagged the content "
                      "(finish_reason content_filter)")
    return stop, None


def usage_from_openai(data: Any) -> LlmUsage | None:
    """Return ``LlmUsage`` from an OpenAI ``usage`` object (cached prompt tokens count as
    ``cache_read``, the rest of the prompt as ``input``); ``None`` when there is none."""
    if not isinstance(data, Mapping):
        return None
    prompt = as_int(data.get("prompt_tokens"))
    completion = as_int(data.get("completion_tokens"))
    cached = as_int(as_mapping(data.get("prompt_tokens_details")).get("cached_tokens"))
    total = as_int(data.get("total_tokens")) or prompt + completion
    return LlmUsage(input=max(0, prompt - cached), output=completion, cache_read=cached,
                    total_tokens=total)


def _reasoning(message: Mapping[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def provider_error_in_body(body: Any, label: str, status: int | None = None) -> LlmError | None:
    """Return an ``LlmError`` for an ``{"error": ...}`` object sent with a success status."""
    if not isinstance(body, Mapping) or not body.get("error"):
        return None
    error = body["error"]
    message = error_object_text(error)[0] or json.dumps(error)
    code = error.get("code") if isinstance(error, Mapping) else None
    code_status = code if isinstance(code, int) and not isinstance(code, bool) else None
    where = f" (HTTP {status})" if status else ""
    return LlmError(f"{label} reported an error{where}: {message}",
                    status=code_status or status, provider_message=message)


def parse_chat_completion(body: Any, *, label: str, provider: str, model: str) -> AssistantMessage:
    """Return the ``AssistantMessage`` of a non-streamed chat completion (the first choice).

    Raises ``LlmError`` when the body is an error object or has no choices.
    """
    error = provider_error_in_body(body, label, 200)
    if error is not None:
        raise error
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise LlmError(f"{label} reply has no choices: {excerpt(json.dumps(body), 300)}")
    choice = choices[0]
    message = as_mapping(choice.get("message"))
    content: list[ContentBlock] = []
    if reasoning := _reasoning(message):
        content.append(ThinkingContent(reasoning))
    if text := parts_text(message.get("content"), ""):  # some servers send a list of parts
        content.append(TextContent(text))
    entries = list(message.get("tool_calls") or [])
    # The legacy single-call form counts only alone: llama-cpp-python sends it beside tool_calls
    # as a copy of the first call, and reading both would invent a second call.
    if not entries and isinstance(message.get("function_call"), Mapping):
        entries.append(message["function_call"])
    calls = [tool_call_from_entry(e) for e in entries if isinstance(e, Mapping)]
    content.extend(calls)
    refusal = message.get("refusal")
    stop, problem = stop_of(choice.get("finish_reason"), bool(calls),
                            refusal if isinstance(refusal, str) else "", label)
    return AssistantMessage(
        content, api=OPENAI_API, provider=provider, model=model,
        usage=usage_from_openai(body.get("usage")), stop_reason=stop, error_message=problem,
    )


class _Block:
    """A content block being assembled from stream deltas."""

    __slots__ = ("call_id", "kind", "name", "parts")

    def __init__(self, kind: str, call_id: str | None = None, name: str | None = None) -> None:
        self.kind = kind
        self.parts: list[str] = []
        self.call_id = call_id
        self.name = name

    def build(self) -> ContentBlock:
        text = "".join(self.parts)
        if self.kind == "text":
            return TextContent(text)
        if self.kind == "thinking":
            return ThinkingContent(text)
        return AgentToolCall(id=self.call_id or new_tool_call_id(), name=self.name or "",
                             arguments=parse_arguments(text))


class OpenAIStreamAssembler:
    """Builds an ``AssistantMessage`` from ``chat.completion.chunk`` objects, reporting each delta.

    Text and reasoning deltas extend the current block of their kind; tool-call deltas are joined
    by their ``index`` across chunks, and a delta bringing a new ``id`` at an index already in
    use starts a new call. Every non-empty delta goes to ``emit`` as a
    ``MessageUpdateEvent`` whose ``content_index`` is the block's place in the final content.
    """

    def __init__(self, emit: Emit, *, label: str, provider: str, model: str) -> None:
        self._emit = emit
        self._label = label
        self._provider = provider
        self._model = model
        self._blocks: list[_Block] = []
        self._calls: dict[int, int] = {}  # tool-call index -> block position
        self._finish_reason: Any = None
        self._usage: LlmUsage | None = None
        self._refusal: list[str] = []

    def add_chunk(self, chunk: Any) -> None:
        """Take one decoded chunk; raise ``LlmError`` if it is an error object."""
        error = provider_error_in_body(chunk, self._label)
        if error is not None:
            raise error
        if not isinstance(chunk, Mapping):
            return
        if isinstance(chunk.get("usage"), Mapping):
            self._usage = usage_from_openai(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                self._add_choice(choice)

    def _add_choice(self, choice: Mapping[str, Any]) -> None:
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, Mapping):
            return
        if reasoning := _reasoning(delta):
            self._extend("thinking", reasoning)
        if text := parts_text(delta.get("content"), ""):
            self._extend("text", text)
        if isinstance(delta.get("refusal"), str):
            self._refusal.append(delta["refusal"])
        for position, entry in enumerate(delta.get("tool_calls") or []):
            if isinstance(entry, Mapping):
                self._add_tool_delta(entry, position)

    def _extend(self, kind: str, delta: str) -> None:
        if not self._blocks or self._blocks[-1].kind != kind:
            self._blocks.append(_Block(kind))
        self._blocks[-1].parts.append(delta)
        self._emit(MessageUpdateEvent(kind, delta, len(self._blocks) - 1))  # type: ignore[arg-type]

    def _add_tool_delta(self, entry: Mapping[str, Any], position: int) -> None:
        index = entry.get("index", position)
        function = as_mapping(entry.get("function"))
        call_id = str(entry["id"]) if entry.get("id") else None
        known = self._blocks[self._calls[index]] if index in self._calls else None
        # A new id at an index in use is a new call (some servers number every call 0).
        if known is None or (call_id is not None and known.call_id not in (None, call_id)):
            self._calls[index] = len(self._blocks)
            self._blocks.append(_Block("tool_call"))
        where = self._calls[index]
        block = self._blocks[where]
        if call_id is not None:
            block.call_id = call_id
        if function.get("name"):
            block.name = str(function["name"])  # sent whole, once or repeated
        fragment = function.get("arguments")
        fragment = fragment if isinstance(fragment, str) else (
            json.dumps(fragment) if isinstance(fragment, Mapping) else "")
        block.parts.append(fragment)
        self._emit(MessageUpdateEvent("tool_call", fragment, where, block.call_id, block.name))

    def finish(self) -> AssistantMessage:
        """Return the assembled message (after ``[DONE]``)."""
        content = [b.build() for b in self._blocks]
        has_calls = any(isinstance(b, AgentToolCall) for b in content)
        stop, error = stop_of(self._finish_reason, has_calls, "".join(self._refusal), self._label)
        return AssistantMessage(
            content, api=OPENAI_API, provider=self._provider, model=self._model,
            usage=self._usage, stop_reason=stop, error_message=error,
        )

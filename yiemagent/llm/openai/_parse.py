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

from yiemagent.core._content import AgentToolCall, ContentBlock, TextContent, ThinkingContent
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage, LlmUsage
from yiemagent.core._tool_calls import new_tool_call_id, parse_arguments, tool_call_from_entry
from yiemagent.llm._jsonutil import UNUSABLE, as_count, as_mapping, parts_text
from yiemagent.llm._stream_fields import FieldReader, join
from yiemagent.llm.http._errors import LlmError, error_object_text
from yiemagent.llm.http._redact import excerpt
from yiemagent.llm.http._transport import Emit

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
        return stop, (
            f"{label} stopped the reply: its content filter flagged the content "
            "(finish_reason content_filter)"
        )
    return stop, None


def usage_from_openai(data: Any) -> LlmUsage | None:
    """Return ``LlmUsage`` from an OpenAI ``usage`` object (cached prompt tokens count as
    ``cache_read``, the rest of the prompt as ``input``); ``None`` when there is none or it
    cannot be read (no prompt or completion count, or a count that is not one: negative, text,
    ``1e400``...), so the reply is unpriced rather than priced as 0 tokens."""
    if not isinstance(data, Mapping):
        return None
    details = data.get("prompt_tokens_details")
    if details is not None and not isinstance(details, Mapping):
        return None
    prompt = as_count(data.get("prompt_tokens"))
    completion = as_count(data.get("completion_tokens"))
    cached = as_count(as_mapping(details).get("cached_tokens"))
    total = as_count(data.get("total_tokens"))
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    if cached is UNUSABLE or total is UNUSABLE:
        return None
    cached = cached if isinstance(cached, int) else 0
    total = total if isinstance(total, int) and total else prompt + completion
    return LlmUsage(input=max(0, prompt - cached), output=completion, cache_read=cached, total_tokens=total)


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
    return LlmError(
        f"{label} reported an error{where}: {message}", status=code_status or status, provider_message=message
    )


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
    stop, problem = stop_of(
        choice.get("finish_reason"), bool(calls), refusal if isinstance(refusal, str) else "", label
    )
    return AssistantMessage(
        content,
        api=OPENAI_API,
        provider=provider,
        model=model,
        usage=usage_from_openai(body.get("usage")),
        stop_reason=stop,
        error_message=problem,
    )


def _content_text(read: FieldReader, delta: Mapping[str, Any], where: str) -> str:
    """The text of a delta's ``content``: a string, or the texts of a list of parts joined (parts
    without text, such as images, are skipped); ``""`` when there is none."""
    content = delta.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise read.error(join(where, "content"), "a string or a list of parts", content)
    texts = []
    for number, part in enumerate(content):
        path = f"{where}.content[{number}]"
        texts.append(read.text(read.object(part, path), "text", path) or "")
    return "".join(texts)


def _arguments_text(read: FieldReader, function: Mapping[str, Any], where: str) -> str:
    """A tool-call delta's piece of arguments: a string as it is, an object (which some servers
    send whole) as its JSON text, nothing as ``""``."""
    arguments = function.get("arguments")
    if arguments is None or isinstance(arguments, str):
        return arguments or ""
    if isinstance(arguments, Mapping):
        return json.dumps(arguments)
    raise read.error(join(where, "arguments"), "a string or an object", arguments)


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
        return AgentToolCall(
            id=self.call_id or new_tool_call_id(), name=self.name or "", arguments=parse_arguments(text)
        )


class OpenAIStreamAssembler:
    """Builds an ``AssistantMessage`` from ``chat.completion.chunk`` objects, reporting each delta.

    Text and reasoning deltas extend the current block of their kind; tool-call deltas are joined
    by their ``index`` across chunks, and a delta bringing a new ``id`` at an index already in
    use starts a new call. Every non-empty delta goes to ``emit`` as a
    ``MessageUpdateEvent`` whose ``content_index`` is the block's place in the final content.
    A chunk whose fields hold the wrong kind of value raises ``LlmStreamError`` naming the field
    (see ``stream_fields``).
    """

    def __init__(self, emit: Emit, *, label: str, provider: str, model: str) -> None:
        self._emit = emit
        self._label = label
        self._provider = provider
        self._model = model
        self._blocks: list[_Block] = []
        self._calls: dict[int, int] = {}  # tool-call index -> block position
        self._finish_reason: str | None = None
        self._usage: LlmUsage | None = None
        self._refusal: list[str] = []

    def add_chunk(self, chunk: Any) -> None:
        """Take one decoded chunk; raise ``LlmError`` if it is an error object, ``LlmStreamError``
        if it is malformed."""
        error = provider_error_in_body(chunk, self._label)
        if error is not None:
            raise error
        read = FieldReader(self._label, "chunk", chunk)
        chunk = read.object(chunk, "")
        usage = read.mapping(chunk, "usage", "")
        if usage is not None:
            self._usage = usage_from_openai(usage)
        for number, choice in enumerate(read.items(chunk, "choices", "") or ()):
            where = f"choices[{number}]"
            choice = read.object(choice, where)
            if not read.index(choice, "index", where):  # absent means 0; others are not read
                self._add_choice(read, choice, where)

    def _add_choice(self, read: FieldReader, choice: Mapping[str, Any], where: str) -> None:
        if finish := read.text(choice, "finish_reason", where):
            self._finish_reason = finish
        delta = read.mapping(choice, "delta", where)
        if delta is None:
            return
        where = join(where, "delta")
        for key in ("reasoning_content", "reasoning"):
            if reasoning := read.text(delta, key, where):
                self._extend("thinking", reasoning)
                break
        if text := _content_text(read, delta, where):
            self._extend("text", text)
        if refusal := read.text(delta, "refusal", where):
            self._refusal.append(refusal)
        for position, entry in enumerate(read.items(delta, "tool_calls", where) or ()):
            path = f"{where}.tool_calls[{position}]"
            self._add_tool_delta(read, read.object(entry, path), position, path)

    def _extend(self, kind: str, delta: str) -> None:
        if not self._blocks or self._blocks[-1].kind != kind:
            self._blocks.append(_Block(kind))
        self._blocks[-1].parts.append(delta)
        self._emit(MessageUpdateEvent(kind, delta, len(self._blocks) - 1))  # type: ignore[arg-type]

    def _add_tool_delta(self, read: FieldReader, entry: Mapping[str, Any], position: int, where: str) -> None:
        index = read.index(entry, "index", where)
        index = position if index is None else index
        function = read.mapping(entry, "function", where) or {}
        call_id = read.text(entry, "id", where) or None  # "" in later deltas: no new id
        name = read.text(function, "name", join(where, "function"))
        fragment = _arguments_text(read, function, join(where, "function"))
        known = self._blocks[self._calls[index]] if index in self._calls else None
        # A new id at an index in use is a new call (some servers number every call 0).
        if known is None or (call_id is not None and known.call_id not in (None, call_id)):
            self._calls[index] = len(self._blocks)
            self._blocks.append(_Block("tool_call"))
        place = self._calls[index]
        block = self._blocks[place]
        if call_id is not None:
            block.call_id = call_id
        if name:
            block.name = name  # sent whole, once or repeated
        block.parts.append(fragment)
        self._emit(MessageUpdateEvent("tool_call", fragment, place, block.call_id, block.name))

    def finish(self) -> AssistantMessage:
        """Return the assembled message (after ``[DONE]``)."""
        content = [b.build() for b in self._blocks]
        has_calls = any(isinstance(b, AgentToolCall) for b in content)
        stop, error = stop_of(self._finish_reason, has_calls, "".join(self._refusal), self._label)
        return AssistantMessage(
            content,
            api=OPENAI_API,
            provider=self._provider,
            model=self._model,
            usage=self._usage,
            stop_reason=stop,
            error_message=error,
        )

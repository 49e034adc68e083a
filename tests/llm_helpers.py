"""Shared pieces of the provider-client tests: requests, replies, the test key and leak checks."""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Iterable
from typing import Any

import attrs
import pytest
from llm_server import ScriptedServer

from yiemagent.core._content import AgentToolCall, ImageContent, TextContent
from yiemagent.core._context import LlmRequest, format_msg_for_llm
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._tools import AbortSignal, AgentContext, AgentTool, AgentToolResult
from yiemagent.llm import AnthropicMessagesClient, HttpOptions, LlmClient, LlmError, OpenAIChatClient

KEY = "sk-test-9f8e7d6c5b4a-SECRET"
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}

# Quick retries, so no test waits for a real backoff; an ample timeout, so a busy machine never
# turns a slow but working request into a failure (a test that wants a timeout sets a short one
# only while its server stays silent).
FAST = HttpOptions(retry_base_delay_s=0.001, retry_max_backoff_s=0.005, timeout=30.0)


def fast(**changes: Any) -> HttpOptions:
    """``FAST`` with ``changes`` (``fast(max_retries=0)``)."""
    return attrs.evolve(FAST, **changes)


def openai_client(server: ScriptedServer, **options: Any) -> OpenAIChatClient:
    """An OpenAI client for ``server`` with the test key and ``http=FAST``; ``options`` win."""
    return OpenAIChatClient("gpt-4o-mini", f"{server.url}/v1", **{"http": FAST, "api_key": KEY, **options})


def anthropic_client(server: ScriptedServer, **options: Any) -> AnthropicMessagesClient:
    """An Anthropic client for ``server`` with the test key and ``http=FAST``; ``options`` win."""
    return AnthropicMessagesClient(
        "claude-sonnet-4-5", server.url, **{"http": FAST, "api_key": KEY, **options}
    )


def error_while_held(
    server: ScriptedServer, body: Any, client: LlmClient, *, signal: AbortSignal | None = None
) -> LlmError:
    """Call ``client`` while ``server`` holds back its reply ``body`` (it stays silent until the
    call is over) and return the ``LlmError`` the call raises; with ``signal``, the signal is
    aborted once the server has the request."""
    release = threading.Event()
    server.json(body, wait=release)

    def abort_when_received() -> None:
        server.wait_for_requests(1)
        assert signal is not None
        signal.abort()

    aborter = threading.Thread(target=abort_when_received) if signal is not None else None
    if aborter is not None:
        aborter.start()
    try:
        with pytest.raises(LlmError) as info:
            client(simple_request(), signal=signal)
    finally:
        release.set()
        if aborter is not None:
            aborter.join()
    return info.value


def weather_tool() -> AgentTool:
    """A tool with a schema, as the model would see it."""
    return AgentTool(
        "getWeather",
        "Weather",
        "Current weather for a city",
        WEATHER_SCHEMA,
        lambda _id, args, _s, _p: AgentToolResult(f"Sunny in {args['city']}"),
    )


def simple_request(text: str = "Hello") -> LlmRequest:
    """The default formatting of a one-message conversation with a system prompt and a tool."""
    return format_msg_for_llm(AgentContext("You are terse.", [UserMessage(text)], [weather_tool()]))


def history_request() -> LlmRequest:
    """A conversation with an image, two tool calls, their results (one failed) and a follow-up."""
    messages = [
        UserMessage([TextContent("Weather in Paris and Rome? See map."), ImageContent(PIXEL, "image/png")]),
        AssistantMessage(
            [
                TextContent("Checking both."),
                AgentToolCall("call_1", "getWeather", {"city": "Paris"}),
                AgentToolCall("call_2", "getWeather", {"city": "Rome"}),
            ]
        ),
        ToolResultMessage("call_1", "getWeather", [TextContent("Sunny, 22°C")]),
        ToolResultMessage("call_2", "getWeather", [TextContent("service down")], is_error=True),
        UserMessage("Thanks, and tomorrow?"),
    ]
    return format_msg_for_llm(AgentContext("You are terse.", messages, [weather_tool()]))


class Collector:
    """An ``on_update`` callback that keeps every event."""

    def __init__(self) -> None:
        self.events: list[MessageUpdateEvent] = []

    def __call__(self, event: MessageUpdateEvent) -> None:
        self.events.append(event)

    def text(self, kind: str = "text") -> str:
        """The concatenated deltas of one kind."""
        return "".join(e.delta for e in self.events if e.kind == kind)


def assert_no_key(texts: Iterable[str], key: str = KEY) -> None:
    """Fail if ``key`` (or a long piece of it) is in any of ``texts``."""
    for text in texts:
        assert key not in text, f"api key leaked into: {text[:300]}"
        assert key[-12:] not in text, f"part of the api key leaked into: {text[:300]}"


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a broken repr hides nothing: say so instead of failing the walk
        return f"<repr failed: {type(exc).__name__}>"


def _chain(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and every exception reachable through ``__context__`` and ``__cause__`` (suppressed
    contexts included: ``raise ... from None`` hides them from the printout, not from a debugger)."""
    found: list[BaseException] = []
    stack = [exc]
    while stack:
        current = stack.pop()
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        stack += [current.__context__, current.__cause__]
    return found


def frame_texts(exc: BaseException | None) -> list[str]:
    """What a crash reporter or ``pytest -l`` shows of ``exc`` and its chain: each exception's text,
    attributes and traceback with locals, and the repr of every local of every traceback frame."""
    texts: list[str] = []
    for error in _chain(exc):
        texts += [str(error), _safe_repr(error), _safe_repr(vars(error))]
        report = traceback.TracebackException(type(error), error, error.__traceback__, capture_locals=True)
        texts.append("".join(report.format()))
        tb = error.__traceback__
        while tb is not None:
            texts += [_safe_repr(value) for value in tb.tb_frame.f_locals.values()]
            tb = tb.tb_next
    return texts


def leak_texts(
    exc: BaseException | None,
    records: Iterable[logging.LogRecord],
    events: Iterable[Any] = (),
    client: Any = None,
) -> list[str]:
    """Every text a failing call exposes: the exception and its chain (str, repr, attributes,
    traceback with every frame's locals), each log record (message and args) and each event."""
    texts = frame_texts(exc)
    for record in records:
        texts += [record.getMessage(), repr(record.args), str(record.exc_text or "")]
        if record.exc_info and record.exc_info[1] is not None:
            texts += frame_texts(record.exc_info[1])
    texts += [repr(e) for e in events]
    if client is not None:
        texts += [repr(client), str(client)]
    return texts


def openai_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk`` of a streamed reply as OpenAI documents it (``extra``
    fields, such as ``usage``, beside its choice)."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def openai_completion(
    content: str | None = "Hi there!",
    *,
    tool_calls: list[Any] | None = None,
    finish: str = "stop",
    reasoning: dict[str, str] | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` object as OpenAI documents it."""
    message: dict[str, Any] = {"role": "assistant", "content": content, **(reasoning or {})}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
    }


def openai_tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One entry of a reply's ``tool_calls``: arguments are a JSON string."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def anthropic_message(
    content: list[dict[str, Any]], *, stop_reason: str = "end_turn", usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A Messages API reply as Anthropic documents it."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 12, "output_tokens": 6},
    }


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """Anthropic's error body."""
    return {"type": "error", "error": {"type": kind, "message": message}}

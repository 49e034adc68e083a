"""The context window against real models: llama.cpp's own server (``llama-server``, served by
xllamacpp) run with ``n_ctx=2048`` and the embedded model (``LlamaCppClient(n_ctx=2048)``), each
given a tool whose results are 1,500 characters. With ``"trim"`` a 100-turn run never meets a
provider error; with ``"error"`` the run ends with ``context_overflow`` before a request that
would not fit is sent; without a window the same run is refused by the server (so the server
does hold to its 2048 tokens).

The server's template shows its model every tool result, so the prompt grows by about 300
tokens a turn and passes 2048 within a few turns without a window. Its 135M model never starts
a tool call of its own there (it answers in text), so ``Counted(calls=True)`` sends each request
to the server, for real (a request that does not fit is refused by it), and then puts a call of
the next page in the reply's place, with the usage the server counted. The embedded model's
prompt holds every result too; it starts afresh at each generation, so its run is
``LOCAL_TURNS`` turns (24: two a prompt, the window filled and trimmed several times) in the
test suite; ``YIEM_LOCAL_TURNS=100`` runs the 100 turns.

Every call goes through ``Counted``, which records each request the provider got and each
error it gave, so "no provider error" is what the provider said, not what the run shows (a
refused request that the strategy then fitted would not show in the run)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from llama_server import serve

from yiemagent import AgentTool, AgentToolCall, AgentToolResult, TextContent, YiemAgent
from yiemagent.core._context_window import MESSAGE_OVERHEAD, fixed_tokens, message_tokens
from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage
from yiemagent.llm import LlamaCppClient, OpenAIChatClient

pytestmark = pytest.mark.needs("local")

TURNS = 100
LOCAL_TURNS = int(os.environ.get("YIEM_LOCAL_TURNS", "24"))
RESULT_CHARS = 1500
PAGE = (
    "The survey of the northern coast took the crew past reefs, inlets and the old lighthouse, "
    "where they measured the depth of the channel twice a day and wrote it in the log. "
)
FORCED = {"type": "function", "function": {"name": "read_page"}}


def page_text(page: int) -> str:
    """A page of 1,500 characters of plain English, numbered."""
    text = f"Page {page}. " + PAGE * (RESULT_CHARS // len(PAGE) + 1)
    return text[:RESULT_CHARS]


def read_page_tool() -> AgentTool:
    def execute(
        call_id: str, args: dict[str, Any], signal: Any = None, on_update: Any = None
    ) -> AgentToolResult:
        page = args.get("page")
        return AgentToolResult([TextContent(page_text(page if isinstance(page, int) else 0))], {})

    return AgentTool(
        "read_page",
        "read page",
        "Read one page of the survey log.",
        {"type": "object", "properties": {"page": {"type": "integer"}}, "required": ["page"]},
        execute,
    )


class Counted:
    """An ``llm_call`` that passes every request to ``client`` and records what came back: the
    number of requests and every error the provider raised. It keeps the client's
    ``context_window`` and ``count_tokens``, so an agent measures as it would with the client."""

    def __init__(self, client: Any, calls: bool = False) -> None:
        self.client = client
        self.calls = calls  # reply with a call of the next page (after the server answered)
        self.requests = 0
        self.errors: list[str] = []
        window = getattr(client, "context_window", None)
        if isinstance(window, int):
            self.context_window = window
        if callable(getattr(client, "count_tokens", None)):
            self.count_tokens = client.count_tokens

    def __call__(
        self,
        request: Mapping[str, Any],
        *,
        on_update: Any = None,
        signal: Any = None,
        max_retry_delay_ms: float | None = None,
        session_id: str | None = None,
    ) -> AssistantMessage:
        self.requests += 1
        try:
            reply = self.client(request, on_update=on_update, signal=signal, session_id=session_id)
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            raise
        if not self.calls:
            return reply
        call = AgentToolCall(f"call_{self.requests}", "read_page", {"page": self.requests})
        return AssistantMessage([call], usage=reply.usage, stop_reason="toolUse")


@pytest.fixture(scope="module")
def small_server_url() -> Iterator[str]:
    """llama.cpp's own server with a context of 2048 tokens, for this module."""
    yield from serve(n_ctx=2048)


def server_agent(url: str, strategy: str, window: int | None = 2048) -> tuple[YiemAgent, Counted]:
    client = OpenAIChatClient(
        "smollm2", url, api_key_env=None, extra_body={"max_tokens": 4, "temperature": 0}
    )
    llm = Counted(
        client, calls=True
    )  # every turn calls the tool: the history grows by 1,500 characters a turn
    agent = YiemAgent(
        llm_call=llm,
        tools=[read_page_tool()],
        context_window=window,
        context_strategy=strategy,
        max_turns=TURNS,
        max_repeated_calls=None,  # the model may ask for the same page again: let it
    )
    return agent, llm


def server_run(
    url: str, strategy: str, window: int | None = 2048
) -> tuple[AssistantMessage, list[AgentMessage], Counted]:
    """One run of ``server_agent``'s agent: its response, its history after it, its counter."""
    agent, llm = server_agent(url, strategy, window)
    try:
        response = agent.prompt("Read the survey log page by page, starting at page 1.", timeout=500)
        return response, agent.messages, llm
    finally:
        agent.shutdown()


@pytest.mark.timeout(600)
def test_a_100_turn_run_with_trim_meets_no_provider_error_on_the_real_server(small_server_url: str) -> None:
    response, history, llm = server_run(small_server_url, "trim")
    assert llm.errors == []
    assert response.stop_reason == "max_turns", response.error_message
    assert llm.requests == TURNS and response.run_usage.llm_calls == TURNS
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    assert len(results) == TURNS and not any(r.is_error for r in results)
    # The history keeps all of it, far more than the window: the requests were trimmed.
    assert sum(message_tokens(m) for m in history) > 10 * 2048


@pytest.mark.timeout(600)
def test_without_a_window_the_same_run_is_refused_by_the_server(small_server_url: str) -> None:
    response, _, llm = server_run(small_server_url, "error", window=None)
    assert response.stop_reason == "error"
    assert len(llm.errors) == 1 and "exceeds the available context size" in llm.errors[0]
    assert llm.requests < TURNS


@pytest.mark.timeout(600)
def test_the_error_strategy_ends_before_the_request_that_would_not_fit_on_the_real_server(
    small_server_url: str,
) -> None:
    response, history, llm = server_run(small_server_url, "error")
    assert llm.errors == []
    assert response.stop_reason == "context_overflow"
    assert "nothing was sent" in (response.error_message or "")
    replies = [m for m in history if isinstance(m, AssistantMessage)]
    # Every request made was answered; the one that would not fit was never made.
    assert 1 <= llm.requests == len(replies) == response.run_usage.llm_calls < TURNS
    assert isinstance(history[-1], ToolResultMessage)


@pytest.fixture(scope="module")
def small_local() -> Iterator[LlamaCppClient]:
    client = LlamaCppClient(n_ctx=2048, max_tokens=24, tool_choice=FORCED)
    yield client
    client.close()


@pytest.mark.timeout(60 + 20 * LOCAL_TURNS)
def test_turns_on_the_embedded_model_with_trim_meet_no_error(small_local: LlamaCppClient) -> None:
    """The embedded model answers after each tool result, so each prompt is a run of two turns,
    the history growing across them; its window is the model's own ``n_ctx``."""
    llm = Counted(small_local)
    agent = YiemAgent(llm_call=llm, tools=[read_page_tool()], context_strategy="trim")
    prompts = LOCAL_TURNS // 2
    try:
        responses = [agent.prompt(f"Read page {n} of the survey log.", timeout=600) for n in range(prompts)]
        history = agent.messages
    finally:
        agent.shutdown()
    assert llm.errors == []
    assert [r.stop_reason for r in responses] == ["stop"] * prompts
    assert llm.requests == 2 * prompts == sum(r.run_usage.llm_calls for r in responses)
    # The whole history, by the model's own count, is more than twice its window: trimmed.
    assert sum(message_tokens(m, small_local.count_tokens) for m in history) > 2 * 2048


@pytest.mark.timeout(600)
def test_the_embedded_model_measures_with_its_own_tokenizer_and_stops_before_sending(
    small_local: LlamaCppClient,
) -> None:
    llm = Counted(small_local)
    tool = read_page_tool()
    agent = YiemAgent(llm_call=llm, tools=[tool])  # the window is the model's n_ctx; "error"
    try:
        ended = None
        for n in range(20):
            response = agent.prompt(f"Read page {n} of the survey log.", timeout=600)
            if response.stop_reason != "stop":
                ended = response
                break
        history = agent.messages
    finally:
        agent.shutdown()
    assert llm.errors == []
    assert ended is not None and ended.stop_reason == "context_overflow"
    # The measure in the message is the tokenizer's: the messages' tokens by the model itself.
    count = small_local.count_tokens
    fixed = fixed_tokens(agent.system_prompt, {"read_page": tool}, count)
    measured = fixed + sum(message_tokens(m, count) for m in history)
    assert f"about {measured} tokens" in (ended.error_message or "")
    assert measured > 0.9 * 2048 - MESSAGE_OVERHEAD

"""A provider's refusal of a conversation longer than its context is recognised, whatever the
provider's wording, and the run's error then says what to do (the real llama.cpp server's own
refusal is in ``test_llamacpp_server.py``)."""

from __future__ import annotations

import pytest

from yiemagent import YiemAgent
from yiemagent.core._context_overflow import looks_like_context_overflow, with_overflow_hint

OVERFLOWS = [
    # OpenAI
    "OpenAI API error (HTTP 400, context_length_exceeded): This model's maximum context length is "
    "128000 tokens. However, your messages resulted in 130512 tokens.",
    # Anthropic
    "Anthropic API error (HTTP 400, invalid_request_error): prompt is too long: 210345 tokens > "
    "200000 maximum",
    # llama.cpp's own server
    "OpenAI API error (HTTP 400): the request exceeds the available context size, try increasing it",
    # llama-cpp-python in process
    "ValueError: Requested tokens (2105) exceed context window of 2048",
    # vLLM
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
    # Ollama
    "input length exceeds the context length",
]
OTHERS = [
    "OpenAI API error (HTTP 429): rate limit exceeded",
    "invalid api key",
    "LlmError: connection refused",
    "Tool output too long",
]


@pytest.mark.parametrize("text", OVERFLOWS)
def test_each_providers_overflow_is_recognised_and_hinted(text: str) -> None:
    assert looks_like_context_overflow(text)
    hinted = with_overflow_hint(text)
    assert hinted.startswith(text) and "agent.reset()" in hinted


@pytest.mark.parametrize("text", OTHERS)
def test_other_errors_get_no_hint(text: str) -> None:
    assert not looks_like_context_overflow(text)
    assert with_overflow_hint(text) == text


def test_a_run_that_overflows_ends_with_the_hint_in_its_error() -> None:
    def llm_call(_request: object) -> object:
        raise RuntimeError("prompt is too long: 9000 tokens > 8192 maximum")

    with YiemAgent(llm_call=llm_call) as agent:
        response = agent.prompt("hi", timeout=30)
    assert response.stop_reason == "error"
    assert response.error_message is not None
    assert response.error_message.startswith("llm_call failed: RuntimeError: prompt is too long")
    assert "agent.reset()" in response.error_message

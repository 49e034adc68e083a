"""Recognising a model's "the conversation is too long" refusal, and saying what to do about it.

Providers word it differently (OpenAI's ``context_length_exceeded``, Anthropic's "prompt is too
long", llama.cpp's "exceeds the available context size", vLLM's "maximum context length",
Ollama's "context length"), but each refusal repeats on every later call of that conversation:
without a hint, an agent whose history overflowed fails every prompt from then on.
"""

from __future__ import annotations

import re

__all__ = ["CONTEXT_OVERFLOW_HINT", "looks_like_context_overflow", "with_overflow_hint"]

_PATTERNS = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window"
    r"|context size|prompt is too long|too many tokens|exceeds? the available context"
    r"|prompt too long|input is too long",
    re.IGNORECASE,
)

CONTEXT_OVERFLOW_HINT = (
    "The conversation no longer fits in the model's context window, and every later call would "
    "fail the same way: start a new conversation with agent.reset() (/reset in the chat), keep "
    "only the recent messages (agent.messages = agent.messages[-20:]), or use a model with a "
    "larger context."
)


def looks_like_context_overflow(text: str) -> bool:
    """Whether an error text is a provider's refusal of a request longer than its context."""
    return _PATTERNS.search(text) is not None


def with_overflow_hint(text: str) -> str:
    """``text``, followed by ``CONTEXT_OVERFLOW_HINT`` when it reads as a context overflow."""
    return f"{text} {CONTEXT_OVERFLOW_HINT}" if looks_like_context_overflow(text) else text

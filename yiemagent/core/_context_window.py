"""Keeping every request inside the model's context window: measure it before each LLM call and,
when it would not fit, apply the run's ``context_strategy``.

The measure is an estimate, made incrementally: each message costs its text at
``CHARS_PER_TOKEN`` characters a token plus ``MESSAGE_OVERHEAD`` (a conservative rate: real
tokenizers give English about 4 characters a token), summed once per message of the history and
kept while the history only grows; the system prompt and the tools are counted once per run.
When the provider reported the tokens of the last call, its count plus the estimate of what was
added since is used where it is higher. A request fits when that measure is at most the window
less ``MARGIN`` of it, which leaves room for the reply.

``trim`` drops the oldest turns (a user message; an assistant message with the tool results that
follow it) and never the system prompt, the messages up to the first user message, the last
turn, a tool call without its result or a result without its call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from yiemagent.core._content import AgentToolCall, content_text
from yiemagent.core._messages import (
    AgentMessage,
    AssistantMessage,
    HistorySnapshot,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "MARGIN",
    "ContextMeter",
    "budget_of",
    "check_strategy",
    "history_problem",
    "message_tokens",
    "trim",
]

CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD = 6  # role markers and separators a chat template adds per message
MARGIN = 0.1  # of the window, kept free for the reply


def check_strategy(value: Any) -> Any:
    """``value`` as a ``context_strategy``; ``ValueError`` for anything else."""
    if value in ("error", "trim") or callable(value):
        return value
    raise ValueError(f"context_strategy must be 'error', 'trim' or a callable, got {value!r}")


def budget_of(window: int) -> int:
    """The tokens a request may take in a window of ``window`` tokens."""
    return int(window * (1 - MARGIN))


def message_tokens(message: AgentMessage) -> int:
    """The estimated tokens of one message (text, tool calls' arguments, images as 500)."""
    content: Sequence[Any] = getattr(message, "content", ())
    chars = len(content_text(content))
    tokens = MESSAGE_OVERHEAD
    for block in content:
        if isinstance(block, AgentToolCall):
            chars += len(block.name) + len(str(block.arguments))
        elif getattr(block, "type", None) == "image":
            tokens += 500
    return tokens + -(-chars // CHARS_PER_TOKEN)


def fixed_tokens(system_prompt: str, tools: Any) -> int:
    """The estimated tokens of what every request sends besides the messages."""
    chars = len(system_prompt)
    for tool in tools.values():
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.input_schema))
    return MESSAGE_OVERHEAD + -(-chars // CHARS_PER_TOKEN)


class ContextMeter:
    """Per-message estimates of one history list, summed as it grows (``tokens``)."""

    __slots__ = ("_source", "_sums")

    def __init__(self) -> None:
        self._source: list[AgentMessage] | None = None
        self._sums: list[int] = [0]

    def tokens(self, messages: Sequence[AgentMessage]) -> int:
        """The estimated tokens of ``messages``: from the running sums when they are a snapshot
        of (or are) the list measured before, grown at its end; else counted afresh."""
        source: Any = messages
        length = len(messages)
        if isinstance(messages, HistorySnapshot) and not messages._owned:
            source = messages._messages
        if not isinstance(source, list) or length > len(source):
            return sum(message_tokens(m) for m in messages)
        if source is not self._source:
            self._source, self._sums = source, [0]
        sums = self._sums
        for message in source[len(sums) - 1 : length]:
            sums.append(sums[-1] + message_tokens(message))
        return sums[length]


def _turns(messages: Sequence[AgentMessage], start: int) -> list[tuple[int, int]]:
    """The turns of ``messages[start:]`` as ``(begin, end)`` slices: a user message alone, an
    assistant message with the tool results right after it; results that follow anything else
    stay with what they follow."""
    turns: list[tuple[int, int]] = []
    for index in range(start, len(messages)):
        if isinstance(messages[index], ToolResultMessage) and turns:
            turns[-1] = (turns[-1][0], index + 1)
        else:
            turns.append((index, index + 1))
    return turns


def trim(messages: Sequence[AgentMessage], budget: int, fixed: int) -> list[AgentMessage] | None:
    """``messages`` without their oldest turns, so that they and ``fixed`` fit ``budget``
    tokens; ``None`` when even the kept part (up to the first user message, and the last turn)
    does not. Every tool call keeps its results and every result its call."""
    head = next((i + 1 for i, m in enumerate(messages) if isinstance(m, UserMessage)), 0)
    turns = _turns(messages, head)
    costs = [sum(message_tokens(m) for m in messages[b:e]) for b, e in turns]
    total = fixed + sum(message_tokens(m) for m in messages[:head]) + sum(costs)
    first = 0
    while total > budget and first < len(turns) - 1:
        total -= costs[first]
        first += 1
    if total > budget:
        return None
    kept = list(messages[:head])
    for begin, end in turns[first:]:
        kept.extend(messages[begin:end])
    return _without_orphans(kept)


def _without_orphans(messages: list[AgentMessage]) -> list[AgentMessage]:
    """``messages`` without tool results whose call is not among them (a result that did not
    follow its call directly), so what is sent is a valid history."""
    calls: set[str] = set()
    kept: list[AgentMessage] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls.update(b.id for b in message.content if isinstance(b, AgentToolCall))
        if isinstance(message, ToolResultMessage) and message.tool_call_id not in calls:
            continue
        kept.append(message)
    return kept


def history_problem(messages: Sequence[AgentMessage]) -> str | None:
    """Why ``messages`` is not a history a provider accepts (a tool result before or without
    its call, a call of a kept assistant message without its result before the next
    non-result message), or ``None``."""
    open_calls: set[str] = set()
    known: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id not in open_calls:
                return f"message {index} is a tool result whose call is not before it"
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls and index > 0:
            return f"message {index} comes before the results of calls {sorted(open_calls)}"
        if isinstance(message, AssistantMessage):
            ids = {b.id for b in message.content if isinstance(b, AgentToolCall)}
            open_calls = ids - known
            known |= ids
    if open_calls:
        return f"the calls {sorted(open_calls)} of the last assistant message have no results"
    return None

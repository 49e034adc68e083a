"""Keeping every request inside the model's context window: measure it before each LLM call and,
when it would not fit, apply the run's ``context_strategy``.

The measure is made incrementally: each message costs its text's tokens plus ``MESSAGE_OVERHEAD``,
counted once per message of the history and kept while the history only grows (across runs);
the system prompt and the tools are counted again only when they change. The text's tokens are
the model's own count where the ``llm_call`` offers one (``count_tokens``: the embedded model's
tokenizer), else an estimate at ``CHARS_PER_TOKEN`` characters a token (a conservative rate:
real tokenizers give English about 4). Where the provider counts more than the estimate, what it
counts is learned from its replies as a rate and an offset (``ContextMeter.learn``: the rate
from how its count grew between requests, the offset from what its chat template adds, a tools
section say), and the estimate is taken to that. A request fits when that measure is at most the
window less ``MARGIN`` of it, which leaves room for the reply.

``trim`` drops the oldest turns (a user message; an assistant message with the tool results that
follow it) and never the system prompt, the messages up to the first user message, the last
turn, a tool call without its result or a result without its call. It goes down to
``TRIM_GOAL`` of the budget, and later requests keep its start while they fit.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from yiemagent.core._content import AgentToolCall, ImageContent, TextContent, ThinkingContent
from yiemagent.core._context_overflow import looks_like_context_overflow
from yiemagent.core._messages import (
    AgentMessage,
    AssistantMessage,
    HistorySnapshot,
    ToolResultMessage,
    UserMessage,
)
from yiemagent.core._run_points import RunFeature, RunView
from yiemagent.errors import describe_error

if TYPE_CHECKING:
    from yiemagent.core._tools import AgentContext
    from yiemagent.errors import RunError

__all__ = [
    "CHARS_PER_TOKEN",
    "MARGIN",
    "TRIM_GOAL",
    "ContextCount",
    "ContextMeter",
    "ContextOverflow",
    "ContextRun",
    "TokenCounter",
    "budget_of",
    "check_strategy",
    "estimate_tokens",
    "fixed_tokens",
    "head_end",
    "history_problem",
    "kept_from",
    "message_tokens",
    "trim",
]

CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD = 6  # role markers and separators a chat template adds per message
MARGIN = 0.1  # of the window, kept free for the reply
IMAGE_TOKENS = 500  # what providers charge a small image, about
# A trim leaves the request at this share of its budget, so the turns after it are added to the
# same start: a provider's prompt cache (and llama.cpp's reuse of its last prompt) keeps working.
TRIM_GOAL = 0.5
LEARN_GROWTH = 32  # tokens a request must have grown by for the rate to be learned from it

TokenCounter = Callable[[str], int]  # the tokens of a text, by the model's own tokenizer

logger = logging.getLogger("yiemagent")


def check_strategy(value: Any) -> Any:
    """``value`` as a ``context_strategy``; ``ValueError`` for anything else."""
    if value in ("error", "trim") or callable(value):
        return value
    raise ValueError(f"context_strategy must be 'error', 'trim' or a callable, got {value!r}")


def budget_of(window: int) -> int:
    """The tokens a request may take in a window of ``window`` tokens."""
    return int(window * (1 - MARGIN))


def estimate_tokens(text: str) -> int:
    """The estimated tokens of ``text`` at ``CHARS_PER_TOKEN`` characters a token."""
    return -(-len(text) // CHARS_PER_TOKEN)


def message_tokens(message: AgentMessage, count: TokenCounter | None = None) -> int:
    """The tokens of one message: its text, thinking and tool calls' names and arguments by
    ``count`` (else estimated: their characters, newline-joined, at ``CHARS_PER_TOKEN``), images
    as 500, and ``MESSAGE_OVERHEAD``."""
    parts, images = _texts(message)
    tokens = MESSAGE_OVERHEAD + IMAGE_TOKENS * images
    if count is not None:
        return tokens + _counted(count, "\n".join(parts))
    chars = sum(map(len, parts)) + len(parts) - 1 if parts else 0
    return tokens + -(-chars // CHARS_PER_TOKEN)


def _add_estimates(messages: Sequence[AgentMessage], start: int, stop: int, sums: list[int]) -> None:
    """Append to ``sums`` the running total of the estimated tokens of ``messages[start:stop]``
    (each as ``message_tokens`` estimates it). This runs before every measured LLM call, for the
    messages added since the last: text blocks and tool calls, the usual content, are summed by
    exact type without building the text; any other message is left to ``message_tokens``."""
    total, append = sums[-1], sums.append
    for index in range(start, stop):
        message = messages[index]
        chars = -1  # one newline fewer than there are parts
        for block in getattr(message, "content", ()):
            kind = type(block)
            if kind is TextContent:
                chars += len(block.text) + 1
            elif kind is AgentToolCall:
                chars += len(block.name) + len(repr(block.arguments)) + 2
            else:
                total += message_tokens(message)
                break
        else:
            total += MESSAGE_OVERHEAD + (-(-chars // CHARS_PER_TOKEN) if chars > 0 else 0)
        append(total)


def _texts(message: AgentMessage) -> tuple[list[str], int]:
    """The texts of ``message`` a model reads (text, thinking, tool calls' names and arguments;
    a block given as a dict by its ``text``), and how many images it holds."""
    parts: list[str] = []
    images = 0
    for block in getattr(message, "content", ()):
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, AgentToolCall):
            parts.append(block.name)
            parts.append(repr(block.arguments))
        elif isinstance(block, ThinkingContent):
            parts.append(block.thinking)
        elif isinstance(block, ImageContent):
            images += 1
        elif isinstance(block, Mapping):  # a block given as a dict
            text = block.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif block.get("type") == "image":
                images += 1
    return parts, images


def _counted(count: TokenCounter, text: str) -> int:
    """``count(text)``, which must be a count: ``TypeError`` saying so otherwise (a model's own
    ``count_tokens`` is the caller's code)."""
    tokens = count(text)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise TypeError(f"count_tokens must return an int of at least 0, got {tokens!r}")
    return tokens


def fixed_tokens(system_prompt: str, tools: Any, count: TokenCounter | None = None) -> int:
    """The tokens of what every request sends besides the messages (by ``count``, else
    estimated)."""
    parts = [system_prompt]
    for tool in tools.values():
        parts += (tool.name, tool.description, json.dumps(tool.input_schema))
    text = "".join(parts)
    return MESSAGE_OVERHEAD + (estimate_tokens(text) if count is None else _counted(count, text))


class ContextMeter:
    """The tokens of one history list's messages (by ``count``, else estimated), each counted
    once and summed as the list grows at its end, across runs. A list that changed otherwise
    (cleared, or its last counted message no longer where it was) is counted afresh; another
    list starts over; the list is taken to change in no other way (the agent's history only
    grows, or is replaced). It serves one run at a time: a run takes it with ``for_run`` (a run
    that finds it taken, by another thread's run of the same config, gets a meter of its own)
    and gives it back with ``release``, so measuring before each LLM call takes no lock.
    ``cut`` is where the last trim of the history began (the message and its index), for the
    next trim to keep. What the provider counts is taken to be ``scale`` times this measure
    (1.0 at the least: its tokenizer may read a script or code more finely) plus ``offset``
    tokens (what its chat template adds: a tools section, role markers), both learned from the
    provider's counts by ``learn``."""

    __slots__ = ("_fixed", "_last", "_source", "_sums", "_tail", "_taken", "count", "cut", "offset", "scale")

    def __init__(self, count: TokenCounter | None = None) -> None:
        self.count = count
        self._taken = threading.Lock()  # held by the run the meter serves
        self._source: list[AgentMessage] | None = None
        self._sums: list[int] = [0]  # _sums[i]: the tokens of the source's first i messages
        self._fixed: tuple[str, dict[str, Any], int] | None = None
        self._tail: AgentMessage | None = None  # the last message counted, where it was
        self.cut: tuple[AgentMessage, int] | None = None  # where the last trim's kept turns began
        self.scale = 1.0  # how much more than this measure the provider counts, per token
        self.offset = 0  # the tokens the provider counts beyond scale times this measure
        self._last: tuple[int, int] | None = None  # the last request learned from: measure, count

    def learn(self, measured: int, counted: int) -> None:
        """Take the provider's ``counted`` tokens for a request this meter measured as
        ``measured``: the rate from what the count grew by since the last request, when the
        request grew by at least ``LEARN_GROWTH`` (a fixed text the template adds cancels out
        there, and would otherwise inflate every later measure by its ratio to the first small
        request), and the offset from the rest."""
        last = self._last
        if last is not None and measured - last[0] >= LEARN_GROWTH:
            self.scale = max(1.0, (counted - last[1]) / (measured - last[0]))
        self.offset = max(0, counted - round(measured * self.scale))
        self._last = (measured, counted)

    def provider_tokens(self, measured: int) -> int:
        """What the provider will count for a request measured as ``measured``, as learned."""
        return (measured if self.scale == 1.0 else round(measured * self.scale)) + self.offset

    def measure_for(self, budget: int) -> int:
        """The largest measure whose ``provider_tokens`` stay within ``budget``."""
        return int((budget - self.offset) / self.scale)

    def __reduce__(self) -> tuple[Any, ...]:
        # Counts are a cache, no part of a value: a run config sent to another process (a Ray
        # actor), or deep-copied, gets an empty meter with the same counter, taken by no run.
        return (ContextMeter, (self.count,))

    def for_run(self) -> ContextMeter:
        """This meter, taken for one run until ``release``; a new meter with the same count
        when another run holds it (that run's counts stay its own)."""
        return self if self._taken.acquire(blocking=False) else ContextMeter(self.count)

    def release(self) -> None:
        """Give the meter back after the run that took it with ``for_run``; harmless for a
        meter no run took."""
        if self._taken.locked():
            self._taken.release()

    def measure(self, message: AgentMessage) -> int:
        """The tokens of one message, counted afresh."""
        return message_tokens(message, self.count)

    def fixed(self, system_prompt: str, tools: Any) -> int:
        """The tokens of what every request sends besides the messages; counted again only
        when the system prompt or a tool changed (tools compare by identity)."""
        known = self._fixed
        if known is not None and known[1] == tools and known[0] == system_prompt:
            return known[2]
        tokens = fixed_tokens(system_prompt, tools, self.count)
        self._fixed = (system_prompt, dict(tools), tokens)
        return tokens

    def request(self, system_prompt: str, tools: Any, messages: Sequence[AgentMessage]) -> int:
        """The tokens of a request: ``fixed`` and the ``tokens`` of all its ``messages``, in the
        one call made before every measured LLM call."""
        # fixed()'s check of what it kept, made here: in the loop, the extra call cost more
        # than the rest of the measure (bench context_window: 4.5 µs a turn against 2.9).
        known = self._fixed
        if known is not None and known[1] == tools and known[0] == system_prompt:
            fixed = known[2]
        else:
            fixed = self.fixed(system_prompt, tools)
        if type(messages) is HistorySnapshot and not messages._owned:  # the loop's own context
            length = messages._length
            return fixed + self._sums_to(messages._messages, length)[length]
        return fixed + self.tokens(messages)

    def _sums_to(self, source: list[AgentMessage], length: int) -> list[int]:
        """The running sums of ``source``, counted up to ``length`` of its messages: those
        counted before while the list only grew at its end, the rest now (all of them for
        another list, or one that changed otherwise)."""
        sums = self._sums
        done = len(sums) - 1
        if source is not self._source or (
            done and (done > len(source) or source[done - 1] is not self._tail)
        ):
            self._source, self._sums = source, [0]
            sums, done = self._sums, 0
            self.cut, self.scale, self.offset, self._last = None, 1.0, 0, None  # of the other history
        if done < length:
            count = self.count
            if count is None:
                _add_estimates(source, done, length, sums)
            else:
                total, append = sums[-1], sums.append
                for index in range(done, length):
                    total += message_tokens(source[index], count)
                    append(total)
            self._tail = source[length - 1]
        return sums

    def tokens(self, messages: Sequence[AgentMessage], start: int = 0) -> int:
        """The tokens of ``messages[start:]``: from the running sums when ``messages`` is a
        snapshot of (or is) the list measured before, grown at its end; else counted afresh."""
        known = _list_of(messages)
        if known is None:
            return sum(message_tokens(m, self.count) for m in messages[start:])
        source, length = known
        sums = self._sums_to(source, length)
        return sums[length] - sums[start] if start < length else 0

    def sizes(self, messages: Sequence[AgentMessage]) -> list[int]:
        """The tokens of each of ``messages``, from what was counted before where it can."""
        known = _list_of(messages)
        if known is None:
            return [message_tokens(m, self.count) for m in messages]
        source, length = known
        sums = self._sums_to(source, length)
        return [sums[i + 1] - sums[i] for i in range(length)]


def _list_of(messages: Sequence[AgentMessage]) -> tuple[list[AgentMessage], int] | None:
    """The list ``messages`` is, or is a snapshot of the start of, and how many of its messages
    it holds; ``None`` for anything else (a snapshot that copied them, another sequence)."""
    kind = type(messages)
    if kind is HistorySnapshot:
        if messages._owned:  # type: ignore[attr-defined]
            return None
        return messages._messages, messages._length  # type: ignore[attr-defined]
    if kind is list:
        return messages, len(messages)  # type: ignore[return-value]
    return None


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


def trim(
    messages: Sequence[AgentMessage],
    budget: int,
    fixed: int,
    sizes: Sequence[int] | None = None,
    goal: int | None = None,
) -> tuple[list[AgentMessage], int] | None:
    """``messages`` without their oldest turns, so that they and ``fixed`` fit ``goal`` tokens
    where they can, else ``budget`` (``sizes``: each message's tokens, estimated when not
    given), and the index of the first message kept after the head; ``None`` when even the kept
    part (up to the first user message, and the last turn) does not fit ``budget``. Every tool
    call keeps its results and every result its call."""
    messages = list(messages)  # indexed often below: a snapshot's items cost more each
    if sizes is None:
        sizes = [message_tokens(m) for m in messages]
    head = head_end(messages)
    turns = _turns(messages, head)
    costs = [sum(sizes[b:e]) for b, e in turns]
    total = fixed + sum(sizes[:head]) + sum(costs)
    first = 0
    target = budget if goal is None else min(goal, budget)
    while total > target and first < len(turns) - 1:
        total -= costs[first]
        first += 1
    if total > budget:
        return None
    start = turns[first][0] if turns else len(messages)
    return kept_from(messages, head, start), start


def head_end(messages: Sequence[AgentMessage]) -> int:
    """The index after the first user message (what trimming always keeps), 0 without one."""
    return next((i + 1 for i, m in enumerate(messages) if isinstance(m, UserMessage)), 0)


def kept_from(messages: Sequence[AgentMessage], head: int, start: int) -> list[AgentMessage]:
    """The head of ``messages`` and everything from ``start`` on, as a valid history."""
    return _without_orphans([*messages[:head], *messages[start:]])


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


class ContextOverflow(Exception):
    """The request cannot be made to fit the context window: the run ends with
    ``stop_reason="context_overflow"`` and this message, before anything is sent."""


class ContextCount(RunFeature):
    """What a run's next LLM call will take, for a budget: it holds the config's ``meter`` for
    the run (given back at the end) and the provider's count of the last reply's context
    (``next_call_tokens``). A run with a window uses ``ContextRun``, which also fits it."""

    __slots__ = ("count_tokens", "mark", "meter", "sent_estimate")

    def __init__(self, meter: ContextMeter, count_tokens: TokenCounter | None) -> None:
        self.meter = meter.for_run()
        self.count_tokens = count_tokens
        self.sent_estimate = 0  # the last request as the meter measured it, before scaling
        # (tokens the provider counted in the last reply's context, history length then)
        self.mark: tuple[int, int] | None = None

    def after_reply(self, run: RunView, reply: AssistantMessage) -> AssistantMessage:
        usage = reply.usage
        if usage is not None:
            # The reply joins the history next: counted up to and with it.
            self.mark = (usage.input + usage.output, len(run.state.messages) + 1)
            # Not where the meter counts with the model's own tokenizer: that count needs no
            # correcting (and the embedded model's usage sums the several prompts of its steps).
            if self.sent_estimate > 0 and self.count_tokens is None:
                self.meter.learn(self.sent_estimate, usage.input + usage.cache_read + usage.cache_write)
        return reply

    def next_call_tokens(self, run: RunView) -> int:
        """About how many input tokens the next LLM call takes: what the provider counted for the
        last reply's context and the reply, and the meter's estimate of what was added since;
        before the run's first reply, the meter's estimate of the whole request."""
        state = run.state
        if self.mark is not None:
            counted, upto = self.mark
            return counted + self.meter.tokens(state.messages, upto)
        return self.meter.fixed(state.system_prompt, state.tools) + self.meter.tokens(state.messages)

    def end(self, run: RunView, response: AssistantMessage | None) -> None:
        self.meter.release()


class ContextRun(ContextCount):
    """The context window for one run, at the loop's points: before each LLM call the request
    is measured and, when it would not fit the window (or what a provider accepted, after it
    refused a request as too long), ``strategy`` is applied (``ContextOverflow`` when it cannot
    be made to fit); each reply's counts teach the meter; a provider's refusal of a context as
    too long is answered once by fitting 70 % of what was sent (``call_failed``)."""

    __slots__ = ("measured", "shrink", "strategy", "window")

    def __init__(
        self,
        meter: ContextMeter,
        window: int | None,
        strategy: Any,
        count_tokens: TokenCounter | None,
    ) -> None:
        super().__init__(meter, count_tokens)
        self.window = window
        self.strategy = strategy
        self.shrink: int | None = None  # the budget after a provider refused the context
        self.measured = 0  # the tokens of the last request, as measured (and scaled) before it went

    def prepare(self, run: RunView, context: AgentContext) -> AgentContext:
        from yiemagent.core._tools import AgentContext

        if (self.window is None and self.shrink is None) or not isinstance(context, AgentContext):
            return context
        meter = self.meter
        estimate = meter.request(context.system_prompt, context.tools, context.messages)
        # What the provider will count, as learned from its counts (an estimate can undercount
        # code or other scripts, and a chat template adds text of its own); trims too.
        size = meter.provider_tokens(estimate)
        self.measured, self.sent_estimate = size, estimate
        if size <= (self.shrink or budget_of(self.window or 0)):
            return context
        return self.fitted(context, size)

    def fitted(self, context: AgentContext, size: int) -> AgentContext:
        """``context``, whose measure is ``size``, made to fit by the strategy; else
        ``ContextOverflow`` saying why, before anything is sent."""
        from yiemagent.core._tools import AgentContext

        messages, meter, window = context.messages, self.meter, self.window
        budget = self.shrink or budget_of(window or 0)
        fixed = meter.fixed(context.system_prompt, context.tools)
        where = f"the context window of {window} tokens" if window else "what the provider accepted"
        if self.strategy == "error":
            raise ContextOverflow(
                f"The request (about {size} tokens) does not fit {where} ({budget} tokens for the "
                "request); nothing was sent. Start a new conversation (agent.reset()), or set "
                "context_strategy='trim' to drop the oldest turns."
            )
        kept, kept_size = self.kept(messages, meter.measure_for(budget), fixed)
        if kept is None:
            raise ContextOverflow(
                f"The request does not fit {where} ({budget} tokens for the request) even with "
                "only the first user message and the last turn; nothing was sent. Start a new "
                "conversation (agent.reset()), or use a model with a larger context."
            )
        problem = history_problem(kept)
        counted = meter.provider_tokens(kept_size)
        if problem is None and counted > budget:
            problem = f"it is still about {counted} tokens, over the {budget} allowed"
        if problem is not None:
            raise ContextOverflow(f"context_strategy gave messages that cannot be sent: {problem}")
        self.measured, self.sent_estimate = counted, kept_size
        return AgentContext(context.system_prompt, kept, context.tools)

    def kept(
        self, messages: Sequence[AgentMessage], allowed: int, fixed: int
    ) -> tuple[list[AgentMessage] | None, int]:
        """The messages the strategy keeps within ``allowed`` tokens, and their measure."""
        if self.strategy == "trim":
            return trimmed(self.meter, messages, allowed, fixed)
        try:
            kept = list(self.strategy(list(messages), allowed - fixed))
        except Exception as exc:
            raise ContextOverflow(f"context_strategy failed: {describe_error(exc)}") from exc
        return kept, fixed + sum(self.meter.measure(m) for m in kept)

    def call_failed(self, run: RunView, error: RunError, called: bool) -> bool:
        if self.shrink is not None or not looks_like_context_overflow(str(error)):
            return False
        if self.window is None and self.strategy == "error":
            return False
        if self.strategy == "error":
            raise ContextOverflow(f"The provider refused the request as too long: {error}") from error
        state, meter = run.state, self.meter
        sent = self.measured or meter.fixed(state.system_prompt, state.tools) + meter.tokens(state.messages)
        self.shrink = max(1, int(sent * 0.7))
        return True


def trimmed(
    meter: ContextMeter, messages: Sequence[AgentMessage], budget: int, fixed: int
) -> tuple[list[AgentMessage] | None, int]:
    """``messages`` trimmed to fit ``budget``, and their tokens: from where the last trim of
    this history began while that still fits (the same start, so a provider's prompt cache keeps
    working), else trimmed afresh down to ``TRIM_GOAL`` of the budget; ``None`` when nothing
    fits. The size counts a result left out for want of its call too: an upper bound."""
    cut, head = meter.cut, head_end(messages)
    head_size = meter.tokens(messages) - meter.tokens(messages, head)
    if cut is not None:
        message, start = cut
        if head <= start < len(messages) and messages[start] is message:
            size = fixed + head_size + meter.tokens(messages, start)
            if size <= budget:
                return kept_from(messages, head, start), size
    made = trim(messages, budget, fixed, meter.sizes(messages), int(budget * TRIM_GOAL))
    if made is None:
        return None, 0
    kept, start = made
    meter.cut = (messages[start], start) if start < len(messages) else None
    return kept, fixed + head_size + meter.tokens(messages, start)


def listed_window(source: Callable[[], int | None]) -> int | None:
    """The context window ``source`` reports (a server's model listing, which the client keeps
    once it answered), or ``None`` when it does not know or fails: a window that cannot be read
    is not a reason to fail the run (the failure is logged)."""
    try:
        window = source()
    except Exception as exc:
        logger.warning("could not read the model's context window: %s", describe_error(exc))
        return None
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    return None

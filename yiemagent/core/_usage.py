"""What a run used (LLM calls, tool calls, tokens, cost, time), what it may use (``UsageLimits``)
and what a model's tokens cost (``Prices``).

``RunUsage`` sums the usage the provider reported with each reply, counts every LLM call made and
every tool call per tool, and prices each reply with the ``prices`` given for its model: a reply
that cannot be priced (no price for its model and no cost reported by the provider) makes the
cost ``None`` and counts in ``unpriced_calls``, so a total is never silently too low.
``UsageLimits`` are checked by the loop before each LLM call against an estimate of that call
(``check_before_call``) and before each batch of tool calls (``allowed_calls``), so a run ends
with ``stop_reason="usage_limit"`` before it passes a limit, by at most one call's output.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._error_kinds import ERROR_KIND_KEY, USAGE_LIMIT
from yiemagent.core._messages import AssistantMessage, LlmUsage
from yiemagent.core._run_points import RunFeature, RunView

if TYPE_CHECKING:
    from yiemagent.core._approval import PausedBatch
    from yiemagent.core._tools import AgentToolCallBatch, AgentToolResult
    from yiemagent.errors import RunError

logger = logging.getLogger("yiemagent")

__all__ = [
    "LimitedRunBudget",
    "PriceLookup",
    "Prices",
    "RunBudget",
    "RunUsage",
    "UsageLimits",
    "price_table",
    "run_budget",
]


def _non_negative(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{attr.name} must be a finite number >= 0, got {value!r}")


def _limit(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if attr.name == "max_cost":
        _non_negative(_inst, attr, value)
    elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attr.name} must be an int >= 0 or None, got {value!r}")


def _per_tool(value: Any) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"max_calls_per_tool must map tool names to ints, got {type(value).__name__}")
    out: dict[str, int] = {}
    for name, limit in value.items():
        if not isinstance(name, str) or isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"max_calls_per_tool must map tool names to ints >= 0, got {name!r}: {limit!r}")
        out[name] = limit
    return out


@attrs.frozen
class Prices:
    """What one token of a model costs, in any currency you like (USD per token, say):
    ``input``, ``output`` and ``cache_read`` (defaults to ``input``)."""

    input: float = attrs.field(validator=_non_negative)
    output: float = attrs.field(validator=_non_negative)
    cache_read: float | None = attrs.field(default=None, validator=attrs.validators.optional(_non_negative))

    def cost(self, usage: LlmUsage) -> float:
        """The cost of one reply's reported usage. Input tokens read from the cache are priced
        at ``cache_read`` (providers count them inside ``input``, or beside it; both are read
        as reported: ``input`` plain, ``cache_read`` at its price)."""
        cached = self.input if self.cache_read is None else self.cache_read
        return usage.input * self.input + usage.output * self.output + usage.cache_read * cached


class PriceLookup(dict[str, Prices]):
    """A ``model name -> Prices`` table that finds a model's prices when it is looked up
    (``PriceCatalog``, from the ``prices`` extra's table): ``price_table`` keeps it as it is."""


def price_table(prices: Any) -> dict[str, Prices]:
    """``prices=`` as ``model name -> Prices``: each value a ``Prices`` or a mapping of its fields
    (``{"input": 2.5e-6, "output": 1e-5}``), or a ``PriceLookup``, kept as it is.
    ``TypeError``/``ValueError`` naming the model."""
    if prices is None:
        return {}
    if isinstance(prices, PriceLookup):
        return prices
    if not isinstance(prices, Mapping):
        raise TypeError(f"prices must map model names to Prices, got {type(prices).__name__}")
    table: dict[str, Prices] = {}
    for model, price in prices.items():
        if isinstance(price, Prices):
            table[str(model)] = price
        elif isinstance(price, Mapping):
            try:
                table[str(model)] = Prices(**price)
            except TypeError as exc:
                raise TypeError(f"prices[{model!r}]: {exc}") from None
            except ValueError as exc:
                raise ValueError(f"prices[{model!r}]: {exc}") from None
        else:
            raise TypeError(
                f"prices[{model!r}] must be a Prices or a dict of its fields, got {type(price).__name__}"
            )
    return table


@attrs.frozen(kw_only=True)
class UsageLimits:
    """Most a run may use; ``None`` (the default) is no limit. ``max_calls_per_tool`` maps tool
    names to their own limit. ``max_cost`` is in the currency of ``prices``."""

    max_llm_calls: int | None = attrs.field(default=None, validator=_limit)
    max_tool_calls: int | None = attrs.field(default=None, validator=_limit)
    max_calls_per_tool: dict[str, int] | None = attrs.field(default=None, converter=_per_tool)
    max_input_tokens: int | None = attrs.field(default=None, validator=_limit)
    max_output_tokens: int | None = attrs.field(default=None, validator=_limit)
    max_total_tokens: int | None = attrs.field(default=None, validator=_limit)
    max_cost: float | None = attrs.field(default=None, validator=_limit)

    def check_before_call(self, usage: RunUsage, estimate: int, price: Prices | None = None) -> str | None:
        """Why the next LLM call would pass a limit (its input estimated at ``estimate`` tokens,
        priced at ``price`` when known), or ``None`` when it may be made."""
        if self.max_llm_calls is not None and usage.llm_calls >= self.max_llm_calls:
            made = "1 LLM call" if usage.llm_calls == 1 else f"{usage.llm_calls} LLM calls"
            return f"max_llm_calls={self.max_llm_calls} reached: {made} made"
        if self.max_input_tokens is not None and usage.input_tokens + estimate > self.max_input_tokens:
            return (
                f"max_input_tokens={self.max_input_tokens} would be passed: {usage.input_tokens} input "
                f"tokens so far and about {estimate} in the next call"
            )
        if self.max_output_tokens is not None and usage.output_tokens >= self.max_output_tokens:
            return f"max_output_tokens={self.max_output_tokens} reached: {usage.output_tokens} output tokens"
        total = usage.input_tokens + usage.output_tokens
        if self.max_total_tokens is not None and total + estimate > self.max_total_tokens:
            return (
                f"max_total_tokens={self.max_total_tokens} would be passed: {total} tokens so far and "
                f"about {estimate} in the next call"
            )
        return self._check_cost(usage, 0.0 if price is None else estimate * price.input)

    def _check_cost(self, usage: RunUsage, next_input: float) -> str | None:
        if self.max_cost is None:
            return None
        if usage.cost is None:
            return (
                f"max_cost={self.max_cost:g} cannot be checked: {usage.unpriced_calls} LLM call(s) of "
                "this run could not be priced; give prices= for the model"
            )
        if usage.cost + next_input >= self.max_cost:
            return (
                f"max_cost={self.max_cost:g} would be passed: the run cost {usage.cost:g} so far and "
                f"about {next_input:g} more for the next call's input"
            )
        return None

    @property
    def limits_tool_calls(self) -> bool:
        """Whether a tool-call limit is set (``max_tool_calls`` or ``max_calls_per_tool``)."""
        return self.max_tool_calls is not None or bool(self.max_calls_per_tool)

    def allowed_calls(self, usage: RunUsage, names: Iterable[str]) -> list[str | None]:
        """For each call of a batch (by tool name, in call order): ``None`` when it may run, or
        why it may not (a tool-call limit it would pass), counting the calls before it."""
        total = usage.tool_calls
        counts = dict(usage.calls_per_tool)
        verdicts: list[str | None] = []
        per_tool = self.max_calls_per_tool or {}
        for name in names:
            if self.max_tool_calls is not None and total >= self.max_tool_calls:
                verdicts.append(f"max_tool_calls={self.max_tool_calls} reached")
                continue
            limit = per_tool.get(name)
            if limit is not None and counts.get(name, 0) >= limit:
                verdicts.append(f'max_calls_per_tool["{name}"]={limit} reached')
                continue
            total += 1
            counts[name] = counts.get(name, 0) + 1
            verdicts.append(None)
        return verdicts


def _priced(price: Prices, usage: LlmUsage) -> float | None:
    """What ``price`` charges for ``usage``; ``None`` (unpriced) when it cannot say (a table's
    own calculation that fails for this usage), so a run is never ended by its pricing."""
    try:
        cost = price.cost(usage)
    except Exception as exc:
        logger.warning("could not price a reply of %s: %s", getattr(price, "model", "a model"), exc)
        return None
    return _finite(cost)


def _finite(cost: Any) -> float | None:
    """``cost`` when it is a finite number of 0 or more, else ``None`` (unpriced): a price of
    1e308 a token overflows to ``inf``, which no JSON reader takes back."""
    if isinstance(cost, bool) or not isinstance(cost, (int, float)):
        return None
    return float(cost) if math.isfinite(cost) and cost >= 0 else None


def _sum(one: float | None, other: float | None) -> float | None:
    """Two costs summed; ``None`` when either is, or when the sum overflows."""
    return None if one is None or other is None else _finite(one + other)


@attrs.define
class RunUsage:
    """What runs used: ``llm_calls`` made, ``tool_calls`` (and ``calls_per_tool``), the tokens
    as the providers reported them, ``cost`` (``None`` once a call could not be priced),
    ``unpriced_calls``, and ``wall_time_s``. ``runs`` counts the runs summed (1 for a run's own)."""

    llm_calls: int = 0
    tool_calls: int = 0
    calls_per_tool: dict[str, int] = attrs.field(factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = 0.0
    unpriced_calls: int = 0
    wall_time_s: float = 0.0
    runs: int = 0

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def add_reply(self, reply: AssistantMessage, prices: Mapping[str, Prices]) -> None:
        """Count one LLM call and its reply's usage, priced by the reply's model."""
        self.llm_calls += 1
        usage = reply.usage
        if usage is None:
            self.unpriced_calls += 1
            self.cost = None
            return
        self.input_tokens += usage.input
        self.output_tokens += usage.output
        self.cache_read_tokens += usage.cache_read
        self.cache_write_tokens += usage.cache_write
        price = prices.get(reply.model)
        if price is not None:
            cost: float | None = _priced(price, usage)
        elif usage.cost > 0:
            cost = usage.cost  # the provider priced it (OpenRouter, say)
        else:
            cost = None
        total = _sum(self.cost, cost)
        if cost is None or (total is None and self.cost is not None):
            self.unpriced_calls += 1  # this reply could not be priced, or overflowed the sum
        self.cost = total

    def add_failed_call(self) -> None:
        """Count an LLM call that gave no reply (it failed): no tokens are known."""
        self.llm_calls += 1

    def add_tool_calls(self, names: Iterable[str]) -> None:
        """Count tool calls that ran (by tool name)."""
        for name in names:
            self.tool_calls += 1
            self.calls_per_tool[name] = self.calls_per_tool.get(name, 0) + 1

    def plus(self, other: RunUsage) -> RunUsage:
        """A new usage: this one and ``other`` summed (``cost`` ``None`` when either's is)."""
        per_tool = dict(self.calls_per_tool)
        for name, count in other.calls_per_tool.items():
            per_tool[name] = per_tool.get(name, 0) + count
        return RunUsage(
            llm_calls=self.llm_calls + other.llm_calls,
            tool_calls=self.tool_calls + other.tool_calls,
            calls_per_tool=per_tool,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=_sum(self.cost, other.cost),
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
            wall_time_s=self.wall_time_s + other.wall_time_s,
            runs=self.runs + other.runs,
        )

    def to_dict(self) -> dict[str, Any]:
        """The usage as JSON-ready data."""
        data = attrs.asdict(self)
        data["total_tokens"] = self.total_tokens
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunUsage:
        """Rebuild from ``to_dict`` (unknown keys ignored); ``TypeError``/``ValueError`` for
        counts that are not counts."""
        if not isinstance(data, Mapping):
            raise TypeError(f"usage must be an object, got {type(data).__name__}")
        fields = {f.name for f in attrs.fields(cls)}
        usage = cls(**{k: v for k, v in data.items() if k in fields})
        for name in fields - {"calls_per_tool", "cost", "wall_time_s"}:
            value = getattr(usage, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"usage.{name} must be an int >= 0, got {value!r}")
        if usage.cost is not None:
            _non_negative(None, attrs.fields(cls).cost, usage.cost)
        _non_negative(None, attrs.fields(cls).wall_time_s, usage.wall_time_s)
        usage.calls_per_tool = _per_tool(usage.calls_per_tool) or {}
        return usage


_REFUSED = 'Tool "{}" was not run: the run reached its usage limit ({}).'


def limit_refusal(name: str, limit: str) -> AgentToolResult:
    """The error result of a call of ``name`` that the tool-call limit ``limit`` (its verdict,
    such as ``max_tool_calls=3 reached``) stops."""
    from yiemagent.core._tools import AgentToolResult

    return AgentToolResult([TextContent(_REFUSED.format(name, limit))], {ERROR_KIND_KEY: USAGE_LIMIT})


class RunBudget(RunFeature):
    """What one run used, at the loop's points: each reply and failed call, each batch's calls
    (a call a tool-call limit refused does not count), and at the end the totals as the
    response's ``run_usage``. Without limits this is all it does (``LimitedRunBudget`` checks
    them)."""

    __slots__ = ("last_model", "prices", "started", "usage")

    def __init__(self, prices: Mapping[str, Prices]) -> None:
        self.usage = RunUsage(runs=1)
        self.prices = prices
        self.started = time.monotonic()
        self.last_model = ""  # the model of the run's last reply

    def call_failed(self, run: RunView, error: RunError, called: bool) -> bool:
        if called:  # the model was called: the call counts, no tokens are known
            self.usage.add_failed_call()
        return False

    def after_reply(self, run: RunView, reply: AssistantMessage) -> AssistantMessage:
        self.usage.add_reply(reply, self.prices)
        self.last_model = reply.model
        return reply

    def after_batch(self, run: RunView, reply: AssistantMessage, batch: AgentToolCallBatch) -> None:
        if batch.paused is None:  # a paused batch's calls count when it is settled
            # Every call of a batch has exactly one result, under the call's tool name.
            self.usage.add_tool_calls([m.tool_name for m in batch.messages])

    def end(self, run: RunView, response: AssistantMessage | None) -> None:
        if response is None:
            return
        # Given in place, so a response that is the history's last reply stays that very
        # object (``to_dict`` leaves it out: the history and sessions hold plain data).
        self.usage.wall_time_s = time.monotonic() - self.started
        object.__setattr__(response, "run_usage", self.usage)


class LimitedRunBudget(RunBudget):
    """``RunBudget`` with ``UsageLimits``: before each LLM call, the run ends
    (``stop_reason="usage_limit"``) when the call would pass a limit, by ``estimate(run)`` (about
    how many input tokens the next call takes); before each batch, the calls a tool-call limit
    stops get an error result in their place (``refusal``), and the run ends after that batch
    with the first limit reached as its verdict. A batch that pauses for approval keeps its
    calls' verdicts (``PausedCall.limit``) for the run that settles it."""

    __slots__ = ("calls", "estimate", "limit_hit", "limits", "paused_verdicts", "refused")

    def __init__(
        self,
        prices: Mapping[str, Prices],
        limits: UsageLimits,
        estimate: Callable[[RunView], int],
        paused_verdicts: Sequence[str | None],
    ) -> None:
        super().__init__(prices)
        self.limits = limits
        self.estimate = estimate
        self.limit_hit: str | None = None  # the first tool-call limit a batch reached
        self.calls: Sequence[AgentToolCall] | None = None  # the batch being run
        self.refused: dict[int, str] = {}  # by the identity of the call: the limit it reached
        # A batch a previous run paused: its refused calls, by id (settled before any turn).
        self.paused_verdicts = list(paused_verdicts)

    def before_turn(self, run: RunView) -> AssistantMessage | None:
        price = None
        if self.prices:
            model = self.last_model or (run.state.model.name if run.state.model is not None else "")
            price = self.prices.get(model)
        problem = self.limits.check_before_call(self.usage, self.estimate(run), price)
        if problem is None:
            return None
        return run.made_up("usage_limit", f"Stopped before the next LLM call: {problem}.")

    def before_batch(self, run: RunView, calls: Sequence[AgentToolCall]) -> None:
        self.calls = calls
        if not self.limits.limits_tool_calls:
            return
        verdicts = self.limits.allowed_calls(self.usage, [c.name for c in calls])
        self.refused = {id(c): v for c, v in zip(calls, verdicts, strict=True) if v is not None}

    def refusal(self, call: AgentToolCall) -> AgentToolResult | None:
        verdict = self.refused.get(id(call))
        return None if verdict is None else limit_refusal(call.name, verdict)

    def after_batch(self, run: RunView, reply: AssistantMessage, batch: AgentToolCallBatch) -> None:
        calls, refused, self.calls, self.refused = self.calls, self.refused, None, {}
        if calls is None:  # a batch paused by an earlier run, settled now
            self.settled(batch)
        elif batch.paused is not None:  # its calls keep their verdicts, for the run that settles it
            for kept, call in zip(batch.paused.calls, calls, strict=True):
                kept.limit = refused.get(id(call))
        else:
            self.usage.add_tool_calls(c.name for c in calls if id(c) not in refused)
            self.limit_hit = self.limit_hit or next(iter(refused.values()), None)

    def settled(self, batch: AgentToolCallBatch) -> None:
        """Count a batch an earlier run paused: a call a limit refused then does not count, and
        the limit ends this run after the batch, as it would have ended that one."""
        verdicts, self.paused_verdicts = self.paused_verdicts, []
        # One result per paused call, in call order: matched by place, not by id (ids may repeat).
        padded = verdicts + [None] * (len(batch.messages) - len(verdicts))
        pairs = list(zip(batch.messages, padded, strict=False))
        self.usage.add_tool_calls(m.tool_name for m, verdict in pairs if verdict is None)
        self.limit_hit = self.limit_hit or next((v for _m, v in pairs if v is not None), None)

    def verdict(
        self, run: RunView, reply: AssistantMessage, batch: AgentToolCallBatch
    ) -> AssistantMessage | None:
        # A batch that terminated, or gave an output, ends the run by that instead.
        if self.limit_hit is None or batch.terminate or batch.output is not None:
            return None
        return run.made_up("usage_limit", f"Stopped: {self.limit_hit}.")


def run_budget(
    prices: Mapping[str, Prices],
    limits: UsageLimits | None,
    estimate: Callable[[RunView], int] | None,
    paused: PausedBatch | None,
) -> RunBudget:
    """The budget of one run: ``RunBudget`` without limits, else ``LimitedRunBudget`` (which
    needs ``estimate``), told the verdicts of the calls of ``paused`` (a batch an earlier run
    paused, settled first) that a tool-call limit refused."""
    if limits is None:
        return RunBudget(prices)
    if estimate is None:
        raise ValueError("usage limits need an estimate of the next call's tokens")
    verdicts = [c.limit for c in paused.calls] if paused is not None and not paused.settled else []
    return LimitedRunBudget(prices, limits, estimate, verdicts)

"""The context window: every request that reaches the model fits it and is a valid history
(checked by a validator written here from the providers' rules, not the library's), with
``"trim"``; ``"error"`` ends the run with ``stop_reason="context_overflow"`` before anything
is sent; a callable strategy is checked; a provider's overflow refusal is handled once."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yiemagent import (
    AgentMessage,
    AgentState,
    AgentTool,
    AgentToolCall,
    AgentToolResult,
    AssistantMessage,
    ImageContent,
    RunConfig,
    TextContent,
    ToolResultMessage,
    UsageLimits,
    UserMessage,
    YiemAgent,
    run_loop,
)
from yiemagent.core._content import content_text
from yiemagent.core._context_window import ContextMeter, budget_of, fixed_tokens, message_tokens
from yiemagent.core._messages import HistorySnapshot, LlmUsage
from yiemagent.errors import LlmError

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


def provider_problem(messages: Sequence[AgentMessage]) -> str | None:
    """The providers' rules for a request's messages (OpenAI's chat completions, Anthropic's
    messages): a tool result answers a call of the assistant message right before it (only
    results between them); every call of an assistant message is answered before the next
    message that is not a result; no result answers a call twice."""
    pending: set[str] = set()
    answered: set[str] = set()
    previous: AgentMessage | None = None
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            if (
                not isinstance(previous, (AssistantMessage, ToolResultMessage))
                or message.tool_call_id not in pending
            ):
                return f"#{index}: result {message.tool_call_id} does not follow its call"
            pending.discard(message.tool_call_id)
            answered.add(message.tool_call_id)
        else:
            if pending:
                return f"#{index}: calls {sorted(pending)} are unanswered"
            if isinstance(message, AssistantMessage):
                pending = {b.id for b in message.content if isinstance(b, AgentToolCall)}
        previous = message
    return f"calls {sorted(pending)} are unanswered at the end" if pending else None


def tool(name: str = "fetch", size: int = 1500) -> AgentTool:
    return AgentTool(name, name, "Fetch a page.", SCHEMA, lambda _i, args, *_: AgentToolResult("r" * size))


@st.composite
def histories(draw: Any) -> list[AgentMessage]:
    """Histories as the loop leaves them: user messages (some with images), assistant answers,
    and assistant messages with one to three calls followed by all their results."""
    out: list[AgentMessage] = [UserMessage(draw(st.text(min_size=1, max_size=300)))]
    for turn in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "image", "answer", "calls"]))
        if kind == "user":
            out.append(UserMessage(draw(st.text(min_size=1, max_size=400))))
        elif kind == "image":
            out.append(UserMessage([TextContent("look"), ImageContent(PIXEL, "image/png")]))
        elif kind == "answer":
            out.append(AssistantMessage([TextContent(draw(st.text(max_size=600)))]))
        else:
            ids = [f"h{turn}_{i}" for i in range(draw(st.integers(1, 3)))]
            out.append(
                AssistantMessage([AgentToolCall(i, "fetch", {"n": 1}) for i in ids], stop_reason="toolUse")
            )
            for i in ids:
                out.append(ToolResultMessage(i, "fetch", "x" * draw(st.integers(0, 2500))))
    return out


def bytes_counter(text: str) -> int:
    """A model's own count, unlike the estimate: a token per two bytes of UTF-8."""
    return len(text.encode("utf-8")) // 2 + 1


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    window=st.integers(300, 4000),
    calls=st.integers(0, 6),
    parallel=st.integers(1, 3),
    counter=st.sampled_from([None, bytes_counter]),
)
def test_every_request_that_reaches_the_model_fits_and_is_a_valid_history(
    history: list[AgentMessage], window: int, calls: int, parallel: int, counter: Any
) -> None:
    fetch = tool(size=1200)
    budget = budget_of(window)
    made = [0]

    def llm(request: Any) -> AssistantMessage:
        messages = list(request.messages)
        size = fixed_tokens(request.system_prompt, request.tools, counter) + sum(
            message_tokens(m, counter) for m in messages
        )
        assert size <= budget, (size, budget)
        assert provider_problem(messages) is None, provider_problem(messages)
        made[0] += 1
        if made[0] > calls:
            return AssistantMessage([TextContent("done")])
        batch = [AgentToolCall(f"r{made[0]}_{i}", "fetch", {"n": made[0] * 10 + i}) for i in range(parallel)]
        return AssistantMessage(batch, stop_reason="toolUse")

    state = AgentState(tools=[fetch], messages=list(history))
    config = RunConfig(
        llm_call=llm,
        context_window=window,
        context_strategy="trim",
        max_repeated_calls=None,
        count_tokens=counter,
    )
    response = run_loop([UserMessage("go on")], state, config)
    assert response.stop_reason in ("stop", "context_overflow"), response.error_message
    if response.stop_reason == "context_overflow":
        assert "nothing was sent" in str(response.error_message)


def test_with_error_the_run_ends_in_context_overflow_before_anything_is_sent() -> None:
    sent: list[Any] = []
    history: list[AgentMessage] = [UserMessage("a" * 9000)]
    state = AgentState(messages=history)
    config = RunConfig(llm_call=lambda r: sent.append(r) or AssistantMessage([]), context_window=2048)
    response = run_loop([UserMessage("hello")], state, config)
    assert response.stop_reason == "context_overflow" and sent == []
    assert "does not fit the context window of 2048 tokens" in str(response.error_message)
    assert "context_strategy='trim'" in str(response.error_message)


def test_trimming_keeps_the_first_user_message_and_drops_the_oldest_turns() -> None:
    seen: list[list[AgentMessage]] = []

    def llm(request: Any) -> AssistantMessage:
        seen.append(list(request.messages))
        if len(seen) < 8:
            return AssistantMessage(
                [AgentToolCall(f"c{len(seen)}", "fetch", {"n": len(seen)})], stop_reason="toolUse"
            )
        return AssistantMessage([TextContent("done")])

    state = AgentState(tools=[tool()])
    config = RunConfig(llm_call=llm, context_window=2048, context_strategy="trim", max_repeated_calls=None)
    response = run_loop([UserMessage("first question")], state, config)
    assert response.stop_reason == "stop"
    last = seen[-1]
    assert last[0] == state.messages[0]  # the first user message stays
    assert len(last) < len(state.messages)  # older turns were dropped from the request...
    assert len(state.messages) == 1 + 7 * 2 + 1  # ...never from the history


def test_trimmed_requests_keep_their_start_until_they_no_longer_fit() -> None:
    """After a trim the next requests start where it began, each the one before plus the new
    turn (what a provider's prompt cache and llama.cpp's prompt reuse need), until they would
    not fit: then one trim, down to half the budget, makes room for several turns again."""
    seen: list[list[AgentMessage]] = []

    def llm(request: Any) -> AssistantMessage:
        seen.append(list(request.messages))
        if len(seen) <= 40:
            return AssistantMessage(
                [AgentToolCall(f"c{len(seen)}", "fetch", {"n": len(seen)})], stop_reason="toolUse"
            )
        return AssistantMessage([TextContent("done")])

    state = AgentState(tools=[tool(size=1500)])  # a turn is about 520 tokens
    config = RunConfig(llm_call=llm, context_window=6000, context_strategy="trim", max_repeated_calls=None)
    assert run_loop([UserMessage("first question")], state, config).stop_reason == "stop"
    history = state.messages
    trimmed = [i for i, sent in enumerate(seen) if sent != history[: len(sent)]]  # not the whole history
    assert len(trimmed) >= 30
    grown = sum(seen[i][: len(seen[i - 1])] == seen[i - 1] for i in trimmed[1:] if i - 1 in trimmed)
    starts = {id(sent[1]) for sent in (seen[i] for i in trimmed)}
    assert grown >= 2 * len(starts)  # most trimmed requests extend the one before
    assert 3 <= len(starts) <= len(trimmed) // 3
    budget = budget_of(6000)
    for sent in seen:
        size = fixed_tokens("", {"fetch": tool(size=1500)}) + sum(message_tokens(m) for m in sent)
        assert size <= budget and provider_problem(sent) is None


def test_a_callable_strategy_is_given_the_messages_and_the_budget_and_is_checked() -> None:
    given_budgets: list[int] = []

    def keep_last_two(messages: list[AgentMessage], budget: int) -> list[AgentMessage]:
        given_budgets.append(budget)
        last = messages[-2:] if isinstance(messages[-1], ToolResultMessage) else messages[-1:]
        return [messages[0], *last]

    def llm(request: Any) -> AssistantMessage:
        if len(request.messages) < 3 and len(state.messages) < 6:
            return AssistantMessage(
                [AgentToolCall(f"c{len(state.messages)}", "fetch", {"n": 1})], stop_reason="toolUse"
            )
        return AssistantMessage([TextContent("done")])

    state = AgentState(
        tools=[tool()], messages=[UserMessage("q"), AssistantMessage([TextContent("a" * 8000)])]
    )
    response = run_loop(
        [UserMessage("again")],
        state,
        RunConfig(llm_call=llm, context_window=2048, context_strategy=keep_last_two),
    )
    assert response.stop_reason == "stop" and given_budgets

    def orphan(messages: list[AgentMessage], budget: int) -> list[AgentMessage]:
        return [m for m in messages if not isinstance(m, AssistantMessage)]

    state = AgentState(
        tools=[tool()],
        messages=[
            UserMessage("q"),
            AssistantMessage([AgentToolCall("c1", "fetch", {})]),
            ToolResultMessage("c1", "fetch", "r" * 9000),
        ],
    )
    response = run_loop(
        [UserMessage("again")], state, RunConfig(llm_call=llm, context_window=2048, context_strategy=orphan)
    )
    assert response.stop_reason == "context_overflow"
    assert "context_strategy gave messages that cannot be sent" in str(response.error_message)


def test_a_providers_overflow_refusal_is_trimmed_once_and_the_call_made_again() -> None:
    sizes: list[int] = []

    def llm(request: Any) -> AssistantMessage:
        sizes.append(len(request.messages))
        if len(sizes) == 1:
            raise LlmError("This model's maximum context length is 4096 tokens (context_length_exceeded)")
        return AssistantMessage([TextContent("done")])

    history: list[AgentMessage] = [UserMessage("q")]
    for n in range(10):
        history += [
            AssistantMessage([AgentToolCall(f"c{n}", "fetch", {})]),
            ToolResultMessage(f"c{n}", "fetch", "r" * 2000),
        ]
    state = AgentState(tools=[tool()], messages=history)
    response = run_loop([UserMessage("go")], state, RunConfig(llm_call=llm, context_strategy="trim"))
    assert response.stop_reason == "stop"
    assert sizes[1] < sizes[0]
    assert response.run_usage.llm_calls == 2

    def refuse(request: Any) -> AssistantMessage:
        raise LlmError("prompt is too long: 210000 tokens > 200000 maximum")

    state = AgentState(messages=[UserMessage("q")])
    response = run_loop([UserMessage("go")], state, RunConfig(llm_call=refuse, context_window=100_000))
    assert response.stop_reason == "context_overflow"
    assert "refused the request as too long" in str(response.error_message)
    state = AgentState(messages=[UserMessage("q")])
    assert run_loop([UserMessage("go")], state, RunConfig(llm_call=refuse)).stop_reason == "error"


def test_the_agent_reads_the_window_from_the_model_when_it_knows_it() -> None:
    class Windowed:
        context_window = 1024

        def __call__(self, request: Any) -> AssistantMessage:
            return AssistantMessage([TextContent("hi")])

    with YiemAgent(llm_call=Windowed()) as agent:
        response = agent.prompt("x" * 6000, timeout=10)
    assert response.stop_reason == "context_overflow"


@given(st.lists(st.text(max_size=50), max_size=30), st.integers(0, 30))
def test_the_meter_sums_as_counting_afresh_would(texts: list[str], cut: int) -> None:
    history: list[AgentMessage] = [UserMessage(t or "-") for t in texts]
    meter = ContextMeter()
    for length in range(len(history) + 1):
        snapshot = HistorySnapshot(history, length)
        assert meter.tokens(snapshot) == sum(message_tokens(m) for m in history[:length])
    assert meter.tokens(history[: min(cut, len(history))]) == sum(message_tokens(m) for m in history[:cut])
    assert meter.tokens(history, cut) == sum(message_tokens(m) for m in history[cut:])
    assert meter.sizes(HistorySnapshot(history, len(history))) == [message_tokens(m) for m in history]
    counted = ContextMeter(bytes_counter)
    assert counted.tokens(history) == sum(message_tokens(m, bytes_counter) for m in history)


class Counting:
    """An ``llm_call`` with a window and its own count of tokens (one a character)."""

    context_window = 1000

    def __init__(self, count: Any) -> None:
        self.count_tokens = count
        self.calls = 0

    def __call__(self, request: Any) -> AssistantMessage:
        self.calls += 1
        return AssistantMessage([TextContent("hi")])


def test_the_agent_measures_with_the_models_own_count_of_tokens() -> None:
    strict = Counting(len)  # 1,200 characters are 1,200 tokens: over 900, where the estimate is 400
    with YiemAgent(llm_call=strict) as agent:
        response = agent.prompt("a" * 1200, timeout=10)
    assert response.stop_reason == "context_overflow" and strict.calls == 0
    counted = fixed_tokens(agent.system_prompt, {}, len) + message_tokens(UserMessage("a" * 1200), len)
    assert f"about {counted} tokens" in str(response.error_message)  # the count's, not the estimate's
    lenient = Counting(lambda text: 0)  # 6,000 characters the estimate puts at 2,000 tokens fit
    with YiemAgent(llm_call=lenient) as agent:
        assert content_text(agent.prompt("a" * 6000, timeout=10).content) == "hi"
    assert lenient.calls == 1


def test_the_meter_counts_afresh_a_list_that_changed_other_than_at_its_end() -> None:
    meter = ContextMeter()
    history: list[AgentMessage] = [UserMessage("a" * 300), AssistantMessage([TextContent("b" * 600)])]
    assert meter.tokens(history) == sum(message_tokens(m) for m in history)
    history.clear()  # what a reset may do: the same list, new messages
    history += [UserMessage("c"), AssistantMessage([TextContent("d")]), UserMessage("e")]
    assert meter.tokens(history) == sum(message_tokens(m) for m in history)
    history[:] = [UserMessage("f" * 900)]  # shorter than what was counted
    assert meter.tokens(history) == message_tokens(history[0])


def test_an_agent_counts_its_history_once_across_runs() -> None:
    counted: list[str] = []

    class Counting:
        def count_tokens(self, text: str) -> int:
            counted.append(text)
            return len(text) // 4

        def __call__(self, request: Any) -> AssistantMessage:
            return AssistantMessage([TextContent("ok")])

    with YiemAgent(llm_call=Counting(), context_window=100_000, system_prompt="s") as agent:
        for n in range(5):
            # Options of its own give a prompt a config of its own: the counts go with it.
            limits = UsageLimits(max_llm_calls=5) if n % 2 else None
            agent.prompt(f"question {n}", timeout=10, usage_limits=limits)
    questions = [t for t in counted if t.startswith("question")]
    assert questions == [f"question {n}" for n in range(5)]  # each message counted once
    assert sum(t == "ok" for t in counted) == 4  # the answers of the runs before the last


def test_a_message_counts_its_text_thinking_calls_and_images() -> None:
    from yiemagent.core._content import ThinkingContent

    text = AssistantMessage([TextContent("a" * 30), ThinkingContent("b" * 29)])
    assert message_tokens(text) == 6 + 20  # 30 + newline + 29 characters, 3 a token
    call = AssistantMessage([AgentToolCall("c1", "fetch", {"n": 1})], stop_reason="toolUse")
    assert message_tokens(call) == 6 + -(-len("fetch\n{'n': 1}") // 3)
    image = UserMessage([TextContent("look"), ImageContent(PIXEL, "image/png")])
    assert message_tokens(image) == 6 + 500 + 2
    assert message_tokens(text, len) == 6 + 60  # a model's own count of the joined text


class Block(TextContent):
    """A text block of a subclass: measured by the general path, not the exact-type one."""


BLOCKS = st.one_of(
    st.builds(TextContent, st.text(max_size=40)),
    st.builds(Block, st.text(max_size=40)),
    st.builds(
        AgentToolCall,
        st.text(min_size=1, max_size=8),
        st.text(min_size=1, max_size=12),
        st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=20), max_size=4),
    ),
    st.builds(lambda: ImageContent(PIXEL, "image/png")),
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=40)}),
)


@given(st.lists(BLOCKS, max_size=6))
def test_the_meter_estimates_a_message_as_its_joined_texts_whatever_its_blocks(blocks: list[Any]) -> None:
    """The meter sums the usual blocks by exact type, without joining their texts; any other
    block goes to ``message_tokens``. Both give what the documented rule gives."""
    parts: list[str] = []
    images = 0
    for block in blocks:
        if isinstance(block, AgentToolCall):
            parts += [block.name, repr(block.arguments)]
        elif isinstance(block, ImageContent):
            images += 1
        else:
            parts.append(block.text if isinstance(block, TextContent) else block["text"])
    chars = len("\n".join(parts))
    expected = 6 + 500 * images + -(-chars // 3)
    message = AssistantMessage(list(blocks))
    assert message_tokens(message) == expected
    history: list[AgentMessage] = [UserMessage("q"), message, message]
    assert ContextMeter().tokens(history, 1) == 2 * expected


def test_where_the_provider_counts_more_the_measure_is_scaled_by_as_much_trims_included() -> None:
    """A provider that counts six times our estimate (code, or another script): every request
    after its first count fits the window by the provider's count, trimmed ones too."""
    fetch = tool(size=1500)
    provider_counts: list[int] = []

    def estimate(request: Any) -> int:
        return fixed_tokens(request.system_prompt, request.tools) + sum(
            message_tokens(m) for m in request.messages
        )

    def llm(request: Any) -> AssistantMessage:
        counted = 6 * estimate(request)
        provider_counts.append(counted)
        n = len(provider_counts)
        usage = LlmUsage(input=counted, output=10)
        if n > 30:
            return AssistantMessage([TextContent("done")], usage=usage)
        return AssistantMessage(
            [AgentToolCall(f"c{n}", "fetch", {"n": n})], stop_reason="toolUse", usage=usage
        )

    state = AgentState(tools=[fetch])
    config = RunConfig(llm_call=llm, context_window=12_000, context_strategy="trim", max_repeated_calls=None)
    assert run_loop([UserMessage("go")], state, config).stop_reason == "stop"
    assert len(provider_counts) == 31 and len(state.messages) == 1 + 30 * 2 + 1
    assert max(provider_counts[1:]) <= 12_000  # the first request could not know the rate


def test_a_chat_templates_fixed_text_is_learned_as_an_offset_not_a_rate() -> None:
    """A server whose chat template adds 400 tokens to every request (llama.cpp's tools section,
    say), counting the rest as we estimate: the first request is small, so its count is several
    times the estimate; taken as a rate that would make every later request look too big to send
    even trimmed to its last turn. Learned as an offset, every request fits by the server's own
    count, trimmed ones too, and none ends the run."""
    fetch = tool(size=1500)
    provider_counts: list[int] = []

    def estimate(request: Any) -> int:
        return fixed_tokens(request.system_prompt, request.tools) + sum(
            message_tokens(m) for m in request.messages
        )

    def llm(request: Any) -> AssistantMessage:
        counted = estimate(request) + 400
        provider_counts.append(counted)
        n = len(provider_counts)
        usage = LlmUsage(input=counted, output=10)
        if n > 30:
            return AssistantMessage([TextContent("done")], usage=usage)
        return AssistantMessage(
            [AgentToolCall(f"c{n}", "fetch", {"n": n})], stop_reason="toolUse", usage=usage
        )

    state = AgentState(tools=[fetch])
    config = RunConfig(llm_call=llm, context_window=2048, context_strategy="trim", max_repeated_calls=None)
    response = run_loop([UserMessage("go")], state, config)
    assert response.stop_reason == "stop", response.error_message
    assert len(provider_counts) == 31 and max(provider_counts[1:]) <= 2048


def test_a_new_llm_call_brings_its_own_count_and_window() -> None:
    first, second = Counting(len), Counting(lambda text: 0)
    second.context_window = 50
    with YiemAgent(llm_call=first) as agent:
        agent.llm_call = second  # its count says 0 tokens; its window is 50
        assert content_text(agent.prompt("a" * 3000, timeout=10).content) == "hi"
        agent.llm_call = Counting(len)  # one token a character: 3,000 do not fit 1,000
        assert agent.prompt("b", timeout=10).stop_reason == "context_overflow"
    assert first.calls == 0 and second.calls == 1


def test_a_count_of_tokens_that_is_not_a_count_ends_the_run_saying_so() -> None:
    for wrong in (lambda text: -1, lambda text: "12", lambda text: float("nan")):
        with YiemAgent(llm_call=Counting(wrong)) as agent:
            response = agent.prompt("hello", timeout=10)
            assert response.stop_reason == "error"
            assert "context_window failed" in str(response.error_message)
            assert "count_tokens must return an int of at least 0" in str(response.error_message)
            agent.llm_call = Counting(len)  # the agent goes on with a model that counts
            assert content_text(agent.prompt("again", timeout=10).content) == "hi"


def test_a_meter_serves_one_run_at_a_time_and_is_given_back_when_it_ends() -> None:
    """A run takes its config's meter (so measuring needs no lock); a run of the same config
    in another thread meanwhile measures with a meter of its own, and still measures its own
    history; the meter is free again after each run, one that failed too."""
    meter = ContextMeter(len)
    assert meter.for_run() is meter
    other = meter.for_run()
    assert other is not meter and other.count is meter.count
    meter.release()
    meter.release()  # harmless
    assert meter.for_run() is meter
    meter.release()

    holding, go_on = threading.Event(), threading.Event()
    held: list[bool] = []

    def llm(request: Any) -> AssistantMessage:
        if request.messages[-1].content[0].text == "short":
            taken = config.meter.for_run()
            held.append(taken is not config.meter)
            taken.release()
            holding.set()
            assert go_on.wait(10)
        return AssistantMessage([TextContent("hi")])

    config = RunConfig(llm_call=llm, context_window=1000)
    results: list[AssistantMessage] = []
    first = threading.Thread(
        target=lambda: results.append(run_loop([UserMessage("short")], AgentState(), config))
    )
    first.start()
    try:
        assert holding.wait(10)
        long = run_loop([UserMessage("x" * 6000)], AgentState(), config)  # meanwhile, on its own meter
    finally:
        go_on.set()
        first.join(10)
    assert held == [True]
    assert long.stop_reason == "context_overflow"
    assert [r.stop_reason for r in results] == ["stop"]
    assert config.meter.for_run() is config.meter
    config.meter.release()

    def failing(request: Any) -> AssistantMessage:
        raise RuntimeError("the model is down")

    broken = RunConfig(llm_call=failing, context_window=1000)
    assert run_loop([UserMessage("q")], AgentState(), broken).stop_reason == "error"
    assert broken.meter.for_run() is broken.meter

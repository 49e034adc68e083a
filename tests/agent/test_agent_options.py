"""Grouped settings: ``OutputOptions``, ``ToolOptions``, ``ContextOptions`` and ``QueueOptions``
checked when built; ``YiemAgent`` and ``prompt``/``aprompt`` taking them; the flat keywords of
before still working, each with a ``DeprecationWarning`` naming its new spelling; and the
signatures kept short."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
import warnings
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.agent_helpers import WAIT, ScriptedLLM, call, echo_tool, reply, text
from yiemagent import (
    AgentToolCall,
    AssistantMessage,
    ContextOptions,
    OutputOptions,
    QueueOptions,
    ToolOptions,
    UsageLimits,
    YiemAgent,
)
from yiemagent.agent._old_keywords import OLD_KEYWORDS


@dataclasses.dataclass
class City:
    name: str
    people: int


def answering(args: dict[str, Any]) -> ScriptedLLM:
    """A model that always gives ``args`` to the output tool."""
    return ScriptedLLM(
        default=lambda _req: AssistantMessage(
            [AgentToolCall("c1", "final_answer", args)], stop_reason="toolUse"
        )
    )


def keywords(func: Any) -> list[str]:
    params = inspect.signature(func).parameters.values()
    return [p.name for p in params if p.kind is p.KEYWORD_ONLY]


# -- the signatures ---------------------------------------------------------------------------


def test_the_agent_takes_at_most_24_keywords_and_no_old_one_by_name() -> None:
    named = keywords(YiemAgent.__init__)
    assert len(named) <= 24, named
    assert set(named) & set(OLD_KEYWORDS) == set()
    kinds = [p.kind for p in inspect.signature(YiemAgent.__init__).parameters.values()]
    assert kinds.count(inspect.Parameter.VAR_KEYWORD) == 1


@pytest.mark.parametrize("method", [YiemAgent.prompt, YiemAgent.aprompt])
def test_a_prompt_takes_text_timeout_and_at_most_three_options(method: Any) -> None:
    params = list(inspect.signature(method).parameters.values())
    assert [p.name for p in params[1:3]] == ["text", "timeout"]
    assert len(keywords(method)) <= 3
    assert set(keywords(method)) & set(OLD_KEYWORDS) == set()


def test_no_option_field_is_also_a_keyword_of_the_agent() -> None:
    options = (OutputOptions, ToolOptions, ContextOptions, QueueOptions)
    fields = {field.name for option in options for field in attrs.fields(option)}
    assert fields & set(inspect.signature(YiemAgent.__init__).parameters) == set()


# -- the option types, checked when built -----------------------------------------------------


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (
            lambda: ToolOptions(execution="both"),
            ValueError,
            "tool_execution must be 'sequential' or 'parallel'",
        ),
        (lambda: ToolOptions(timeout_s=0), ValueError, "tool_timeout_s must be a positive number"),
        (lambda: ToolOptions(timeout_s=True), ValueError, "tool_timeout_s must be a positive number"),
        (lambda: ToolOptions(max_parallel=0), ValueError, "max_parallel_tools must be a positive int"),
        (lambda: ToolOptions(max_repeated_calls=0), ValueError, "max_repeated_calls must be a positive int"),
        (lambda: ToolOptions(max_result_chars=0), ValueError, "max_tool_result_chars must be an int >= 1"),
        (lambda: ContextOptions(window=0), ValueError, "context_window must be a positive int"),
        (lambda: ContextOptions(window="big"), ValueError, "context_window must be a positive int"),
        (lambda: ContextOptions(strategy="drop"), ValueError, "context_strategy must be 'error', 'trim'"),
        (lambda: QueueOptions(steering="some"), ValueError, "steering_mode must be 'all' or 'one-at-a-time'"),
        (lambda: QueueOptions(follow_up="x"), ValueError, "follow_up_mode must be 'all' or 'one-at-a-time'"),
        (lambda: OutputOptions(mode="json"), ValueError, "output_mode must be one of"),
        (lambda: OutputOptions(retries=-1), ValueError, "output_retries must be an int >= 0"),
        (lambda: OutputOptions(validate="no"), TypeError, "validate_output must be callable"),
    ],
)
def test_an_option_that_makes_no_sense_is_refused_when_built(build: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        build()


def test_the_options_hold_their_defaults_and_are_frozen() -> None:
    tools = ToolOptions()
    assert (tools.execution, tools.timeout_s, tools.max_parallel) == ("sequential", None, None)
    assert (tools.max_repeated_calls, tools.skip_on_steer, tools.max_result_chars) == (2, False, None)
    assert (ContextOptions().window, ContextOptions().strategy) == (None, "error")
    assert ContextOptions(window="auto").window == "auto"
    assert (QueueOptions().steering, QueueOptions().follow_up) == ("all", "one-at-a-time")
    assert OutputOptions().is_empty() and not OutputOptions(City).is_empty()
    with pytest.raises(AttributeError):
        tools.execution = "parallel"  # type: ignore[misc]


def test_an_option_keyword_given_something_else_says_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"tool_options must be a ToolOptions .*got dict"):
        YiemAgent(llm_call=ScriptedLLM(), tool_options={"execution": "parallel"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="queues must be a QueueOptions"):
        YiemAgent(llm_call=ScriptedLLM(), queues="all")  # type: ignore[arg-type]


# -- the agent takes them ---------------------------------------------------------------------


def test_the_agent_applies_its_options_and_its_attributes_stay_flat() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling warns of nothing
        agent = YiemAgent(
            llm_call=ScriptedLLM(),
            tool_options=ToolOptions(
                execution="parallel",
                timeout_s=5,
                max_parallel=3,
                max_repeated_calls=None,
                skip_on_steer=True,
                max_result_chars=100,
            ),
            context=ContextOptions(window=4000, strategy="trim"),
            queues=QueueOptions(steering="one-at-a-time", follow_up="all"),
        )
    with agent:
        assert agent.tool_execution == "parallel"
        assert (agent.tool_timeout_s, agent.max_parallel_tools, agent.max_repeated_calls) == (5, 3, None)
        assert agent.skip_tools_on_steer is True
        config = agent._worker_core.config
        assert (config.max_tool_result_chars, config.context_window, config.context_strategy) == (
            100,
            4000,
            "trim",
        )
        assert (agent.steering_mode, agent.follow_up_mode) == ("one-at-a-time", "all")
        agent.tool_execution = "sequential"  # the attributes are set as before
        assert agent.tool_execution == "sequential"


def test_an_agent_output_ends_every_run_in_data_and_takes_a_schema_alone() -> None:
    for output in (OutputOptions(City, retries=0), City):
        with YiemAgent(llm_call=answering({"name": "Oslo", "people": 700000}), output=output) as agent:
            assert agent.prompt("?", timeout=WAIT).output == City("Oslo", 700000)


def test_prompt_output_and_usage_limits_apply_to_that_run_only() -> None:
    llm = ScriptedLLM(
        AssistantMessage(
            [AgentToolCall("c1", "final_answer", {"name": "Rome", "people": 2})], stop_reason="toolUse"
        ),
        call("echo", {"text": "a"}),
        reply("plain"),  # the limited run ends before a second call: this answers the next prompt
    )
    with YiemAgent(llm_call=llm, tools=[echo_tool()]) as agent:
        assert agent.prompt("city?", timeout=WAIT, output=OutputOptions(City)).output == City("Rome", 2)
        limited = agent.prompt("go", timeout=WAIT, usage_limits=UsageLimits(max_llm_calls=1))
        assert limited.stop_reason == "usage_limit"
        plain = agent.prompt("again", timeout=WAIT)
        assert (plain.output, text(plain)) == (None, "plain")


def test_a_prompt_options_fields_left_unset_are_the_agents() -> None:
    def check(value: Any) -> str | None:
        return "too few" if value.people < 10 else None

    llm = answering({"name": "Oslo", "people": 3})
    with YiemAgent(llm_call=llm, output=OutputOptions(City, validate=check)) as agent:
        response = agent.prompt("?", timeout=WAIT, output=OutputOptions(retries=0))
    assert response.stop_reason == "error" and "too few" in (response.error_message or "")
    assert len(llm.requests) == 1  # no retry: the prompt's own retries, the agent's check


def test_aprompt_takes_the_same_options() -> None:
    async def main() -> Any:
        with YiemAgent(llm_call=answering({"name": "Lima", "people": 9})) as agent:
            return (await agent.aprompt("?", timeout=WAIT, output=City)).output

    assert asyncio.run(main()) == City("Lima", 9)


# -- the old keywords ---------------------------------------------------------------------------

OLD_AGENT_VALUES: dict[str, Any] = {
    "tool_execution": "parallel",
    "tool_timeout_s": 5,
    "max_parallel_tools": 3,
    "max_repeated_calls": 4,
    "skip_tools_on_steer": True,
    "steering_mode": "one-at-a-time",
    "follow_up_mode": "all",
}
NEW_SPELLING = {
    "tool_execution": "tool_options=ToolOptions(execution=...)",
    "tool_timeout_s": "tool_options=ToolOptions(timeout_s=...)",
    "max_parallel_tools": "tool_options=ToolOptions(max_parallel=...)",
    "max_repeated_calls": "tool_options=ToolOptions(max_repeated_calls=...)",
    "skip_tools_on_steer": "tool_options=ToolOptions(skip_on_steer=...)",
    "max_tool_result_chars": "tool_options=ToolOptions(max_result_chars=...)",
    "context_window": "context=ContextOptions(window=...)",
    "context_strategy": "context=ContextOptions(strategy=...)",
    "steering_mode": "queues=QueueOptions(steering=...)",
    "follow_up_mode": "queues=QueueOptions(follow_up=...)",
    "output_schema": "output=OutputOptions(schema=...)",
    "output_mode": "output=OutputOptions(mode=...)",
    "output_retries": "output=OutputOptions(retries=...)",
    "validate_output": "output=OutputOptions(validate=...)",
}


def test_every_old_keyword_has_its_new_spelling_here() -> None:
    assert set(NEW_SPELLING) == set(OLD_KEYWORDS)


@pytest.mark.parametrize("name", sorted(OLD_AGENT_VALUES))
def test_an_old_agent_keyword_still_works_and_warns_with_the_new_spelling(name: str) -> None:
    value = OLD_AGENT_VALUES[name]
    with pytest.warns(
        DeprecationWarning, match=rf"^{name}= is deprecated .*use {re.escape(NEW_SPELLING[name])}"
    ) as caught:
        agent = YiemAgent(llm_call=ScriptedLLM(), **{name: value})
    with agent:
        assert getattr(agent, name) == value
    assert len(caught) == 1
    assert caught[0].filename == __file__  # it points at the caller


@pytest.mark.parametrize(
    ("name", "value", "field", "expected"),
    [
        ("max_tool_result_chars", 50, "max_tool_result_chars", 50),
        ("context_window", 3000, "context_window", 3000),
        ("context_strategy", "trim", "context_strategy", "trim"),
    ],
)
def test_an_old_budget_keyword_still_works_and_warns(
    name: str, value: Any, field: str, expected: Any
) -> None:
    with pytest.warns(DeprecationWarning, match=rf"use {re.escape(NEW_SPELLING[name])}"):
        agent = YiemAgent(llm_call=ScriptedLLM(), **{name: value})
    with agent:
        assert getattr(agent._worker_core.config, field) == expected


def test_the_old_output_keywords_still_work_on_the_agent_and_on_a_prompt() -> None:
    llm = answering({"name": "Oslo", "people": 3})
    old = {
        "output_schema": City,
        "output_mode": "tool",
        "output_retries": 0,
        "validate_output": lambda v: None,
    }
    with pytest.warns(DeprecationWarning) as caught:
        agent = YiemAgent(llm_call=llm, **old)
    assert sorted(str(w.message).split("=")[0] for w in caught) == sorted(old)
    assert all(NEW_SPELLING[str(w.message).split("=")[0]] in str(w.message) for w in caught)
    with agent:
        assert agent.prompt("?", timeout=WAIT).output == City("Oslo", 3)
    with YiemAgent(llm_call=llm) as agent:
        with pytest.warns(
            DeprecationWarning, match=r"output_schema= is deprecated.*output=OutputOptions\(schema="
        ) as caught:
            response = agent.prompt("?", timeout=WAIT, output_schema=City)
        assert caught[0].filename == __file__
        assert response.output == City("Oslo", 3)


def test_the_old_output_keywords_of_aprompt_warn_at_the_awaiting_code() -> None:
    async def main() -> Any:
        with YiemAgent(llm_call=answering({"name": "Lima", "people": 9})) as agent:
            with pytest.warns(DeprecationWarning, match="output_schema= is deprecated") as caught:
                response = await agent.aprompt("?", timeout=WAIT, output_schema=City)
            assert caught[0].filename == __file__
            return response.output

    assert asyncio.run(main()) == City("Lima", 9)


def test_an_old_keyword_beside_its_option_raises() -> None:
    with pytest.raises(TypeError, match="both tool_execution= and tool_options="):
        YiemAgent(llm_call=ScriptedLLM(), tool_execution="parallel", tool_options=ToolOptions())
    with pytest.raises(TypeError, match="both context_window= and context="):
        YiemAgent(llm_call=ScriptedLLM(), context_window=10, context=ContextOptions())
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        with pytest.raises(TypeError, match="both output_retries= and output="):
            agent.prompt("?", timeout=WAIT, output=City, output_retries=1)
        assert agent.messages == []  # nothing was sent


def test_an_unknown_keyword_raises_as_python_does() -> None:
    with pytest.raises(
        TypeError, match=r"^YiemAgent.__init__\(\) got an unexpected keyword argument 'colour'$"
    ):
        YiemAgent(llm_call=ScriptedLLM(), colour="blue")
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        # an agent-only old keyword is no keyword of a prompt
        with pytest.raises(
            TypeError, match=r"prompt\(\) got an unexpected keyword argument 'tool_execution'"
        ):
            agent.prompt("?", timeout=WAIT, tool_execution="parallel")
        with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
            asyncio.run(agent.aprompt("?", timeout=WAIT, colour="blue"))


def test_load_takes_the_old_keywords_too_and_warns_at_its_caller(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    with YiemAgent(llm_call=ScriptedLLM()) as agent:
        agent.prompt("hi", timeout=WAIT)
        agent.save(path)
    with pytest.warns(DeprecationWarning, match="tool_execution= is deprecated") as caught:
        loaded = YiemAgent.load(path, llm_call=ScriptedLLM(), tool_execution="parallel")
    with loaded:
        assert loaded.tool_execution == "parallel"
        assert len(loaded.messages) == 2
    assert len(caught) == 1 and caught[0].filename == __file__

"""A cluster's ``AgentSettings.agent_options`` keep the flat names of the settings that
``YiemAgent`` now takes grouped (they are plain data that travels): the factory groups them,
so the agents it builds have those settings and no ``DeprecationWarning`` is raised."""

from __future__ import annotations

import warnings
from typing import Any

from tests.agent_helpers import ScriptedLLM
from yiemagent.integrations.ray._settings import AgentFactory, AgentSettings


def make_llm(spec: str | None) -> Any:
    """The ``llm_factory``: a scripted model."""
    return ScriptedLLM()


def test_flat_agent_options_reach_the_agent_grouped_without_a_warning() -> None:
    options = {
        "tool_execution": "parallel",
        "tool_timeout_s": 5,
        "max_parallel_tools": 2,
        "steering_mode": "one-at-a-time",
        "follow_up_mode": "all",
        "skip_tools_on_steer": True,
        "max_turns": 7,
    }
    settings = AgentSettings(llm_factory=f"{__name__}:make_llm", agent_options=options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent = AgentFactory(settings).agent()
    with agent:
        assert {name: getattr(agent, name) for name in options} == options

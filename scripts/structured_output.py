"""Structured answers: a run that ends in a dataclass, with a tool in play and a wrong first try.

``output=OutputOptions(Weather)`` makes the run end in data: the model is offered a ``final_answer``
tool whose input schema is the dataclass's, beside the agent's tools. Here it looks the weather
up first, then gives an answer that breaks the schema (a temperature as text); the violation
goes back to it with its path, exactly as invalid tool arguments do, and its second answer
ends the run. ``reply.output`` is a ``Weather``. The model is scripted (see ``_scripted.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from _scripted import ScriptedModel, calls, show, use

from yiemagent import OutputOptions, YiemAgent, function_tool


@dataclasses.dataclass
class Weather:
    city: str
    temperature: int
    conditions: Literal["clear", "cloudy", "rain", "snow"]


@function_tool
def getWeather(city: str) -> str:  # camelCase: the name the model calls
    """Get the current weather in a city.

    Args:
        city: The city's name.
    """
    return f"Weather in {city}: snow, -4 °C"


def main() -> None:
    """Ask for the weather as data; print the output and what the model was told."""
    model = ScriptedModel(
        [
            calls(use("getWeather", city="Oslo")),
            calls(use("final_answer", city="Oslo", temperature="minus four", conditions="snow")),
            calls(use("final_answer", city="Oslo", temperature=-4, conditions="snow")),
        ]
    )
    with YiemAgent(llm_call=model, tools=[getWeather], agent_event_sink=show) as agent:
        reply = agent.prompt("What is the weather in Oslo?", timeout=60, output=OutputOptions(Weather))
        print(f"output: {reply.output!r} (stop_reason={reply.stop_reason})")
        print(f"the model was called {model.calls} time(s)")


if __name__ == "__main__":
    main()

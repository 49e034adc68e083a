"""Quick start: one tool from a typed function, one agent, one question.

``@function_tool`` builds the tool's JSON Schema from the type hints and its descriptions from
the docstring; the agent calls the model, runs the tool call the model asks for, feeds the
result back and returns the model's final answer. The model here is scripted (see
``_scripted.py``): it calls ``add`` and then answers.
"""

from __future__ import annotations

import json

from _scripted import ScriptedModel, answer, calls, show, use

from yiemagent import YiemAgent, function_tool


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def main() -> None:
    """Ask the agent a sum and print each step, the answer and the history."""
    model = ScriptedModel([calls(use("add", a=2, b=40)), "2 + 40 = 42."])
    with YiemAgent(llm_call=model, tools=[add], agent_event_sink=show) as agent:
        reply = agent.prompt("What is 2 + 40?", timeout=60)
        history = agent.messages

    offered = model.requests[0]["tools"][0]["function"]
    print("the model was offered:", offered["name"], json.dumps(offered["parameters"]))
    print("answer:", answer(reply), f"(stop_reason={reply.stop_reason})")
    print("history:", " -> ".join(m.role for m in history))


if __name__ == "__main__":
    main()

"""A custom ``format_msg_for_llm``: decide what the model is sent on every call.

``format_msg_for_llm(context)`` receives the ``AgentContext`` of each LLM call (system prompt,
messages, tools) and returns the request that ``llm_call`` receives, in any shape the model
needs. Here it writes a plain-text transcript for a completion-style model and keeps only the
last ``WINDOW`` messages (a sliding window: older turns are not sent, though the agent's
history keeps them). The scripted model (see ``_scripted.py``) prints each prompt it gets and
answers from the prompt's last line. The default (``yiemagent.format_msg_for_llm``, an OpenAI
chat request) is what the provider clients expect; a custom one pairs with an ``llm_call``
that understands its shape.
"""

from __future__ import annotations

import json
from typing import Any

from _scripted import ScriptedModel, answer, calls, use

from yiemagent import (
    AgentContext,
    AgentToolCall,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
    YiemAgent,
    function_tool,
)

WINDOW = 4
CAPITALS = {"France": "Paris", "Japan": "Tokyo"}


@function_tool
def capital(country: str) -> str:
    """The capital of a country.

    Args:
        country: The country, e.g. "France".
    """
    return CAPITALS.get(country, "unknown")


def _line(message: Any) -> str:
    """One message as a line of the transcript."""
    texts = " ".join(b.text for b in message.content if isinstance(b, TextContent))
    if isinstance(message, UserMessage):
        return f"User: {texts}"
    if isinstance(message, ToolResultMessage):
        return f"Tool {message.tool_name} says: {texts}"
    used = [f"{b.name}({json.dumps(b.arguments)})" for b in message.content if isinstance(b, AgentToolCall)]
    return "Assistant: " + (texts or "calls " + ", ".join(used))


def transcript_format(context: AgentContext) -> dict[str, Any]:
    """The request: the system prompt, the tools in one line, and the last ``WINDOW`` messages
    as a transcript ending with the assistant's turn."""
    tools = ", ".join(f"{t.name}: {t.description}" for t in context.tools.values())
    recent = list(context.messages)[-WINDOW:]
    prompt = "\n".join([context.system_prompt, f"Tools: {tools}", *map(_line, recent), "Assistant:"])
    return {"prompt": prompt, "dropped": len(context.messages) - len(recent)}


def model_turn(request: dict[str, Any]) -> Any:
    """A scripted reply that reads the transcript: call ``capital`` for the country asked
    about, or answer with what the tool said."""
    print(f"  --- prompt ({request['dropped']} older messages not sent) ---")
    for line in request["prompt"].splitlines():
        print(f"  | {line}")
    last = request["prompt"].splitlines()[-2]
    if last.startswith("Tool capital says: "):
        return f"The capital is {last.removeprefix('Tool capital says: ')}."
    country = last.rstrip("?").split()[-1]
    return calls(use("capital", country=country))


def main() -> None:
    """Two questions; the second prompt shows the window sliding past the first."""
    model = ScriptedModel([model_turn] * 4)
    with YiemAgent(
        llm_call=model,
        tools=[capital],
        format_msg_for_llm=transcript_format,
        system_prompt="You answer geography questions.",
    ) as agent:
        for question in ("What is the capital of France?", "And the capital of Japan?"):
            print(f"user: {question}")
            reply: AssistantMessage = agent.prompt(question, timeout=60)
            print(f"answer: {answer(reply)}")
        print(f"the history keeps all {len(agent.messages)} messages; each prompt had at most {WINDOW}")


if __name__ == "__main__":
    main()

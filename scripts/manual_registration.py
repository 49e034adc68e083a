"""Manual registration: build tools in code and put them in a store with ``register_tool``.

A ``ToolStore`` holds an agent's tools. Here it gets a hand-built ``AgentTool`` (``shout``), the
``listTools`` tool bound to the store, and, after the agent already answered once, a decorated
function (``convert``). An agent created with ``tool_store=store`` follows its store: from its
next turn it offers the model exactly the store's tools, so ``convert`` is usable without a new
agent. The model is scripted (see ``_scripted.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from _scripted import ScriptedModel, answer, calls, show, use

from yiemagent import (
    AbortSignal,
    AgentTool,
    AgentToolResult,
    TextContent,
    ToolStore,
    YiemAgent,
    function_tool,
    list_tool,
    register_tool,
)


def shout(
    tool_call_id: str, args: dict[str, Any], signal: AbortSignal | None, on_partial_result: Any
) -> AgentToolResult:
    """The body of the hand-built tool: the text in capitals."""
    return AgentToolResult([TextContent(args["text"].upper())], details={"length": len(args["text"])})


SHOUT = AgentTool(
    name="shout",
    label="Shout",
    description="Repeat a text in capitals.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    execute=shout,
)


@function_tool
def convert(amount: float, to: Literal["EUR", "USD"] = "EUR") -> dict[str, Any]:
    """Convert an amount of money (at a fixed, made-up rate).

    Args:
        amount: How much money.
        to: The target currency.
    """
    return {"amount": round(amount * 0.92, 2), "currency": to}


def offered(request: Any) -> list[str]:
    """The names of the tools a request offered the model."""
    return [tool["function"]["name"] for tool in request["tools"]]


def main() -> None:
    """Register, ask, register more, ask again; print what the model was offered each time."""
    store = ToolStore("manual")
    register_tool(store, SHOUT)
    register_tool(store, list_tool(store))
    model = ScriptedModel(
        [
            calls(use("shout", text="hello")),
            "Shouted: HELLO.",
            calls(use("convert", amount=100, to="EUR")),
            "100 is about 92 EUR.",
        ]
    )
    with YiemAgent(llm_call=model, tool_store=store, agent_event_sink=show) as agent:
        print("answer:", answer(agent.prompt("Shout hello.", timeout=60)))
        print("offered on the first question:", offered(model.requests[0]))

        register_tool(store, convert)  # the agent follows its store from its next turn
        print("registered convert; the store now has:", list(store.tools))
        print("answer:", answer(agent.prompt("Convert 100 to EUR.", timeout=60)))
        print("offered on the second question:", offered(model.requests[2]))


if __name__ == "__main__":
    main()

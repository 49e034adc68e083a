"""Self-tooling: the model writes a tool with ``writeTool`` and calls it on its next turn.

The agent's store is loaded from a copy of the example tools (``writeTool`` writes into the
store's folder, so the repository's own ``tools/`` is never touched). The model first lists the
tools, finds no converter, writes ``celsiusToFahrenheit`` (name, schema and the body of its
``execute_tool``), then calls it: an agent created with ``tool_store=store`` offers the model
the new tool from the very next turn. The file stays in the folder, so a later
``load_tools(store, folder)`` (or ``yiemagent chat --tools FOLDER``) has it too. The model is
scripted (see ``_scripted.py``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _scripted import ScriptedModel, answer, calls, copy_example_tools, show, use

from yiemagent import ToolStore, YiemAgent, get_tools, load_tools

CONVERTER = {
    "name": "celsiusToFahrenheit",
    "label": "Celsius to Fahrenheit",
    "description": "Convert a temperature from degrees Celsius to degrees Fahrenheit.",
    "inputSchema": {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
    "executeCode": "fahrenheit = args['celsius'] * 9 / 5 + 32\nreturn f'{fahrenheit:.1f} F'",
}


def main() -> None:
    """Let the model extend itself, then show the file it wrote and the tools it was offered."""
    model = ScriptedModel(
        [
            calls(use("listTools")),
            calls(use("writeTool", **CONVERTER), text="There is no converter; I will write one."),
            calls(use("celsiusToFahrenheit", celsius=21.5)),
            "21.5 C is 70.7 F.",
        ]
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = copy_example_tools(Path(tmp))
        store = ToolStore("self-tooling")
        load_tools(store, folder)
        print("tools at the start:", list(store.tools))
        with YiemAgent(
            llm_call=model, tools=get_tools(store), tool_store=store, agent_event_sink=show
        ) as agent:
            reply = agent.prompt("What is 21.5 degrees Celsius in Fahrenheit?", timeout=60)
        written = (folder / "celsiusToFahrenheit.py").read_text(encoding="utf-8").splitlines()
        print("answer:", answer(reply))
        print("tools at the end:", list(store.tools))
        for turn in (2, 3):
            names = [t["function"]["name"] for t in model.requests[turn - 1]["tools"]]
            print(f"offered on turn {turn}:", names)
        body = written.index(next(line for line in written if line.startswith("def _execute_body")))
        print(
            f"celsiusToFahrenheit.py, as writeTool wrote it ({len(written)} lines), "
            "has the model's code as the body of _execute_body:"
        )
        for line in written[body : body + 3]:
            print("   ", line)


if __name__ == "__main__":
    main()

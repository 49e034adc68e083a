"""Hooks: an approval gate before ``writeTool``, and masking of personal data after a tool.

``before_tool_call(ctx, signal)`` runs before every call and may block it: here every
``writeTool`` call needs approval, and the approver (scripted, as a person at a prompt would be)
declines code that runs shell commands. A blocked call gets an error result with the reason,
so the model can change course; none of its code runs. ``after_tool_call(ctx, signal)`` may
replace a result before it enters the history: here it masks e-mail addresses and phone numbers
in ``lookupCustomer`` results, so neither the model nor a saved session ever sees them. The
model is scripted (see ``_scripted.py``).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from _scripted import ScriptedModel, answer, calls, copy_example_tools, show, use

from yiemagent import (
    AbortSignal,
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    TextContent,
    ToolResultMessage,
    ToolStore,
    YiemAgent,
    function_tool,
    get_tools,
    load_tools,
    register_tool,
)

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
PHONE = re.compile(r"\+?\d[\d ()-]{7,}\d")


def approver(name: str, code: str) -> bool:
    """Stands in for a person asked "allow this tool?": no to code that runs shell commands."""
    return not any(word in code for word in ("subprocess", "os.system"))


def approval_gate(ctx: BeforeToolCallContext, signal: AbortSignal | None) -> BeforeToolCallResult | None:
    """Before each call: a ``writeTool`` call goes ahead only when the approver says yes."""
    if ctx.tool_call.name != "writeTool":
        return None
    name, code = ctx.args.get("name", "?"), ctx.args.get("executeCode", "")
    approved = approver(name, code)
    print(f"  ?? approval asked for writeTool {name!r}: {'approved' if approved else 'declined'}")
    if approved:
        return None
    return BeforeToolCallResult(
        block=True,
        reason=f"The user declined the tool {name!r}: it runs shell commands. Write one that does not.",
    )


def mask(text: str) -> str:
    """``text`` with e-mail addresses and phone numbers replaced."""
    return PHONE.sub("[phone]", EMAIL.sub("[email]", text))


def masking(ctx: AfterToolCallContext, signal: AbortSignal | None) -> AfterToolCallResult | None:
    """After each call: mask personal data in ``lookupCustomer`` results, text and details."""
    if ctx.tool_call.name != "lookupCustomer" or ctx.is_error:
        return None
    content = [TextContent(mask(b.text)) if isinstance(b, TextContent) else b for b in ctx.result.content]
    details = {
        key: mask(value) if isinstance(value, str) else value for key, value in ctx.result.details.items()
    }
    return AfterToolCallResult(content=content, details=details)


@function_tool
def lookupCustomer(customer_id: str) -> dict[str, Any]:  # camelCase: the name the model calls
    """Look a customer up by id.

    Args:
        customer_id: The customer's id, e.g. "c-42".
    """
    return {
        "id": customer_id,
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "phone": "+44 20 7946 0958",
        "plan": "pro",
    }


SHELL_TOOL = {
    "name": "runShell",
    "label": "Run Shell",
    "description": "Run a shell command.",
    "inputSchema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    "executeCode": "import subprocess\nreturn subprocess.run(args['command'], shell=True, "
    "capture_output=True, text=True).stdout",
}
COUNT_TOOL = {
    "name": "wordCount",
    "label": "Word Count",
    "description": "Count the words of a text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "executeCode": "return str(len(args['text'].split()))",
}


def main() -> None:
    """Run the story: a declined tool, an approved one, a masked lookup; print the history."""
    model = ScriptedModel(
        [
            calls(use("writeTool", **SHELL_TOOL)),
            calls(use("writeTool", **COUNT_TOOL), text="Then a tool without shell commands."),
            calls(use("wordCount", text="the quick brown fox"), use("lookupCustomer", customer_id="c-42")),
            "The text has 4 words; customer c-42 is Ada Lovelace on the pro plan.",
        ]
    )
    with tempfile.TemporaryDirectory() as folder:
        store = ToolStore("hooks")
        load_tools(store, copy_example_tools(Path(folder)))
        register_tool(store, lookupCustomer)
        with YiemAgent(
            llm_call=model,
            tools=get_tools(store),
            tool_store=store,
            before_tool_call=approval_gate,
            after_tool_call=masking,
            agent_event_sink=show,
        ) as agent:
            reply = agent.prompt(
                "Count the words of 'the quick brown fox', and look up customer c-42.", timeout=60
            )
            history = agent.messages
        written = sorted(p.name for p in Path(folder).glob("*.py"))
    print("answer:", answer(reply))
    print("tool files in the folder:", written)
    for message in history:
        if isinstance(message, ToolResultMessage) and message.tool_name == "lookupCustomer":
            print("what the history keeps of lookupCustomer:", message.content[0].to_dict()["text"])  # type: ignore[union-attr]


if __name__ == "__main__":
    main()

"""The child process of ``test_approval_crash.py``: pause a batch on approval and save, or load
the session and resume it with decisions, announcing each step on stdout so the parent can
kill it (SIGKILL) anywhere between the pause and the end of the resumed run.

    python approval_crash_child.py pause SESSION SIDE_EFFECTS
    python approval_crash_child.py resume SESSION SIDE_EFFECTS
"""

from __future__ import annotations

import sys
from typing import Any

from yiemagent import AgentTool, AgentToolResult, Approve, AssistantMessage, Deny, Edit, YiemAgent
from yiemagent.testing import ScriptedModel

DECISIONS = {"c1": Approve(), "c2": Deny("not this one"), "c3": Edit({"path": "/edited"})}
REPLIES: list[Any] = [
    {"tool_calls": [{"id": f"c{i}", "name": "write", "arguments": {"path": f"/p{i}"}} for i in (1, 2, 3)]},
    "All done.",
]


def say(text: str) -> None:
    print(text, flush=True)


def tools(side_effects: str) -> list[AgentTool]:
    def execute(call_id: str, args: dict[str, Any], _s: Any, _u: Any) -> AgentToolResult:
        say(f"start {call_id}")
        with open(side_effects, "a", encoding="utf-8") as f:
            f.write(f"{call_id} {args['path']}\n")
            f.flush()
        say(f"end {call_id}")
        return AgentToolResult(f"wrote {args['path']}")

    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return [AgentTool("write", "Write", "Append a line", schema, execute, needs_approval=True)]


def main(mode: str, session: str, side_effects: str) -> None:
    if mode == "pause":
        agent = YiemAgent(llm_call=ScriptedModel(REPLIES), tools=tools(side_effects), session_file=session)
        response = agent.prompt("Write three files.", timeout=30)
        assert response.stop_reason == "awaiting_approval", response
        agent.shutdown()
        say("paused")
        return
    agent = YiemAgent.load(
        session, llm_call=ScriptedModel(REPLIES[1:]), tools=tools(side_effects), session_file=session
    )
    pending = {p.tool_call_id for p in agent.pending_approvals}
    say("loaded " + ",".join(sorted(pending)))
    last = agent.messages[-1] if agent.messages else None
    if not pending and isinstance(last, AssistantMessage) and last.stop_reason == "stop":
        # The process before was killed after its run ended and was saved, before it said so.
        agent.shutdown()
        say(f"done {last.stop_reason}")
        return
    agent.resume({i: d for i, d in DECISIONS.items() if i in pending})
    say("resumed")
    response = agent.take_response(timeout=30)
    agent.shutdown()
    say(f"done {response.stop_reason}")


if __name__ == "__main__":
    main(*sys.argv[1:4])

"""What the Ray approval tests name by importable name (this folder is on the workers'
PYTHONPATH in ``test_ray_approval``): a ``ScriptedModel`` and a tool that needs approval.

The model answers from the request (each of its replies is a function of the request, so any
actor, fresh or not, gives the same answer to the same conversation): ``call NAME {json}``
makes one call, tool results get ``done: <their texts>``, anything else ``#<users> <text>``
(``ray_helpers.scripted_reply``).

``record`` needs approval; its prepared arguments carry the text stripped and upper-cased, and
running it appends ``<text> <pid>`` to the file ``path``, so a test sees that (and where) it ran.
``gated`` needs approval too and, once run, waits on the test's latch.
"""

from __future__ import annotations

import os
from typing import Any

import attrs
from ray_helpers import scripted_reply

from yiemagent import AgentTool, AgentToolResult, TextContent
from yiemagent.testing import ScriptedModel

REPLIES = 1000  # more than any test asks one actor for

RECORD_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
    "required": ["path", "text"],
    "additionalProperties": False,
}


def make_llm(spec: str | None) -> Any:
    """The ``llm_factory``: a ``ScriptedModel`` whose every reply is ``scripted_reply``."""
    return ScriptedModel([scripted_reply] * REPLIES, stream=False)


def _prepare(args: dict[str, Any]) -> dict[str, Any]:
    return {**args, "text": str(args.get("text", "")).strip().upper()}


def _record(tool_call_id: str, args: dict[str, Any], signal: Any, on_partial: Any) -> AgentToolResult:
    with open(args["path"], "a", encoding="utf-8") as out:
        out.write(f"{args['text']} {os.getpid()}\n")
    return AgentToolResult([TextContent(f"recorded {args['text']}")])


def approval_tools() -> list[AgentTool]:
    """``record`` and ``gated`` (``ray_helpers``' latch ``gate``), which need approval, and
    ``ray_helpers``' ``echo``, which does not."""
    from ray_helpers import echo_tool, gate_tool

    record = AgentTool(
        "record",
        "Record",
        "Appends a line to a file",
        RECORD_SCHEMA,
        _record,
        prepare_arguments=_prepare,
        needs_approval=True,
    )
    gated = attrs.evolve(gate_tool(), name="gated", needs_approval=True)
    return [record, gated, echo_tool()]

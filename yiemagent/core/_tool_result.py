"""``AgentToolResult``: what a tool returns.

A module of its own, below ``_tools`` and ``_approval``, so that a paused batch (which stores
its calls' results) and the agent's state (which holds the paused batch) can both be typed
without one importing the other back.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs

from yiemagent.core._content import ContentBlock, content_list, content_to_dict
from yiemagent.core._json_safety import json_ready
from yiemagent.core._messages import LlmUsage
from yiemagent.core._output_json import output_json

__all__ = ["AgentToolResult"]


@attrs.define(frozen=True)
class AgentToolResult:
    """What a tool returns (spec ``agentToolResult``); a string ``content`` becomes one text block.

    ``details["addedToolNames"]`` names tools the call registered; it reaches the result
    message's ``added_tool_names``. ``output`` (beyond the spec), when not ``None``, is the
    run's final output: the run ends after the batch without another LLM call, with that output
    (checked against the run's output schema when it has one; docs/output.md).
    """

    content: list[ContentBlock] = attrs.field(converter=content_list)
    details: dict[str, Any] = attrs.field(factory=dict)
    usage: LlmUsage | None = None
    terminate: bool = False
    output: Any = attrs.field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"content", "details", "usage", "terminate"}`` as JSON-ready data (details
        that are not JSON are converted, as when a result enters the history), with
        ``"output"`` when the result gives one."""
        data = {
            "content": [content_to_dict(b) for b in self.content],
            "details": copy.deepcopy(json_ready(self.details)),
            "usage": None if self.usage is None else self.usage.to_dict(),
            "terminate": bool(self.terminate),
        }
        if self.output is not None:
            data["output"] = output_json(self.output)
        return data

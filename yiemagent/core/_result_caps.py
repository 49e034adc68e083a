"""Capping what a tool result shows the model: ``max_tool_result_chars`` (on a tool, else the
agent's). A result whose text is longer keeps its start up to the cap and a note saying how much
was cut; the whole text stays in the message's ``full_text``, so the history and the session
lose nothing while the requests stay small. The tool's own ``details`` are never touched."""

from __future__ import annotations

from typing import Any

import attrs

from yiemagent.core._content import TextContent
from yiemagent.core._messages import ToolResultMessage

__all__ = ["cap_result", "check_cap"]


def check_cap(name: str, value: Any) -> int | None:
    """``value`` as a cap (an int of 1 or more, or ``None``); ``ValueError`` naming ``name``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")
    return value


def cap_result(message: ToolResultMessage, limit: int | None) -> ToolResultMessage:
    """``message`` with its text cut to ``limit`` characters and a note of the cut, the full
    text in ``full_text``; ``message`` itself when it fits or there is no limit. Other blocks
    (images) and the tool's ``details`` are kept as they are."""
    if limit is None:
        return message
    texts = [b.text for b in message.content if isinstance(b, TextContent)]
    whole = "\n".join(texts)
    if len(whole) <= limit:
        return message
    cut = len(whole) - limit
    note = (
        f"\n[{cut} of {len(whole)} characters cut (max_tool_result_chars={limit}); "
        "the whole result is kept in the history]"
    )
    others = [b for b in message.content if not isinstance(b, TextContent)]
    return attrs.evolve(message, content=[TextContent(whole[:limit] + note), *others], full_text=whole)

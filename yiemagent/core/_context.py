"""The default ``prepare_context`` (spec section 14): what one LLM call sees of the state."""

from __future__ import annotations

from yiemagent.core._messages import HistorySnapshot
from yiemagent.core._request import LlmRequest, format_msg_for_llm
from yiemagent.core._tools import AgentContext, AgentState

__all__ = ["LlmRequest", "format_msg_for_llm", "prepare_context"]


def prepare_context(state: AgentState) -> AgentContext:
    """Default ``prepare_context``: the state's prompt, a snapshot of its history and its tools.

    The snapshot (``HistorySnapshot``) copies nothing until it is changed: the messages are
    immutable, and the history list only grows (a new history replaces the list), so the first
    ``len`` messages of the list are the history as it was, for as long as anyone holds them; a
    hook that edits the snapshot edits a copy of its own. A turn after 2,000 messages thus costs
    what a turn after none does.
    """
    return AgentContext(state.system_prompt, HistorySnapshot(state.messages), state.tools)

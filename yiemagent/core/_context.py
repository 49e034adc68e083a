"""The default ``prepare_context`` (spec section 14): what one LLM call sees of the state."""

from __future__ import annotations

from yiemagent.core._request import LlmRequest, format_msg_for_llm
from yiemagent.core._tools import AgentContext, AgentState

__all__ = ["LlmRequest", "format_msg_for_llm", "prepare_context"]


def prepare_context(state: AgentState) -> AgentContext:
    """Default ``prepare_context``: the state's prompt, a copy of the message list, its tools.

    Copies the list, not the (immutable) messages, so the copy is one C-level pass over pointers.
    """
    return AgentContext(state.system_prompt, list(state.messages), state.tools)

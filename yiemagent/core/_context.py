"""The default ``prepare_context`` (spec section 14), and the other defaults' old home.

``format_msg_for_llm`` and the OpenAI wire format live in ``yiemagent.llm.openai_format``; user
input parsing in ``yiemagent.user_input``. Both are re-exported here for existing imports.
"""

from __future__ import annotations

from yiemagent.core._spec_format import (
    LlmRequest,
    WireCache,
    format_msg_for_llm,
    message_to_openai,
    tools_to_openai,
)
from yiemagent.core._tools import AgentContext, AgentState
from yiemagent.core._user_input import openai_to_user_message, parse_data_url

__all__ = [
    "LlmRequest",
    "WireCache",
    "format_msg_for_llm",
    "message_to_openai",
    "openai_to_user_message",
    "parse_data_url",
    "prepare_context",
    "tools_to_openai",
]


def prepare_context(state: AgentState) -> AgentContext:
    """Default ``prepare_context``: the state's prompt, a copy of the message list, its tools.

    Copies the list, not the (immutable) messages, so the copy is one C-level pass over pointers.
    """
    if state.wire_cache is None:
        state.wire_cache = WireCache()
    return AgentContext(state.system_prompt, list(state.messages), state.tools,
                        wire_cache=state.wire_cache)

"""``LlmRequest``: what the loop gives ``llm_call`` for one LLM call.

It carries the typed context: the system prompt, the messages, the tools and the run's options
(the session id), which provider clients read and convert to their own wire form. Read as a
mapping it is also the spec's request (``request["messages"]`` and ``request["tools"]`` as
OpenAI chat dicts), so an ``llm_call`` written against the spec keeps working: that view is built
on first access only, and an agent's default formatter caches it across turns, so such an
``llm_call`` pays for the messages added since its last call, not for the whole history.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._output import OutputRequest
from yiemagent.core._spec_format import SpecViews, spec_view
from yiemagent.core._tools import AgentContext, ToolMapping, shared_tool_mapping

__all__ = ["LlmRequest", "SpecFormatter", "format_msg_for_llm"]

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


def _not_typed(messages: Sequence[Any]) -> TypeError:
    """The error for an ``LlmRequest`` given messages that are not the typed ones (most often the
    spec's OpenAI-shaped dicts, which a provider client would otherwise drop unsent)."""
    odd = next(m for m in (messages[0], messages[-1]) if not isinstance(m, _MESSAGE_TYPES))
    return TypeError(
        "LlmRequest messages must be UserMessage, AssistantMessage or ToolResultMessage objects, "
        f"got a {type(odd).__name__}; to send a request already in OpenAI's dict shape, pass that "
        'dict itself (e.g. {"messages": [...], "tools": [...]}) to the client'
    )


class LlmRequest(Mapping[str, Any]):
    """One LLM call's input: ``system_prompt``, ``messages`` (the typed history, a list the loop
    made for this call), ``tools`` (``name -> AgentTool``), ``session_id`` (``None`` unless
    the run has one) and ``output`` (an ``OutputRequest`` when the run asks the model for data
    in the ``native`` or ``grammar`` mode; the view shows it as ``response_format``). As a
    mapping: the spec's request view (see the module docstring), built when first read. It is
    a ``Mapping``, not a ``dict``: ``json.dumps(request.to_dict())`` (or ``dict(request)``)
    serialises it. Treat it as read-only."""

    __slots__ = ("_context", "_view", "_views", "messages", "output", "session_id", "system_prompt", "tools")

    def __init__(
        self,
        system_prompt: str = "",
        messages: Sequence[AgentMessage] = (),
        tools: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        views: SpecViews | None = None,
        context: AgentContext | None = None,
    ) -> None:
        self.system_prompt = system_prompt
        if messages and not (
            isinstance(messages[0], _MESSAGE_TYPES) and isinstance(messages[-1], _MESSAGE_TYPES)
        ):
            raise _not_typed(messages)
        self.messages = messages
        # A copy: the state's tools may change before the view is read (a few pointers).
        self.tools: ToolMapping = dict(shared_tool_mapping(tools if tools is not None else {}))
        self.session_id = session_id
        self._views = views
        self._view: dict[str, Any] | None = None
        self._context = context
        self.output: OutputRequest | None = None

    @property
    def context(self) -> AgentContext:
        """The ``AgentContext`` the request was made from (or one of its typed fields)."""
        if self._context is None:
            self._context = AgentContext(self.system_prompt, self.messages, self.tools)
        return self._context

    def _spec(self) -> dict[str, Any]:
        view = self._view
        if view is None:
            view = spec_view(self.system_prompt, self.messages, self.tools, self._views)
            if self.output is not None:
                view = {**view, "response_format": self.output.response_format()}
            self._view = view
        return view

    def __getitem__(self, key: str) -> Any:
        return self._spec()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._spec())

    def __len__(self) -> int:
        return len(self._spec())

    def to_dict(self) -> dict[str, Any]:
        """The spec's request view as a new plain dict (its message dicts are shared)."""
        return dict(self._spec())

    def __repr__(self) -> str:
        return (
            f"LlmRequest(system_prompt={self.system_prompt!r}, messages=<{len(self.messages)}>, "
            f"tools={list(self.tools)}, session_id={self.session_id!r})"
        )


def format_msg_for_llm(ctx: AgentContext) -> LlmRequest:
    """Default ``format_msg_for_llm`` (spec section 14): the context's prompt, messages and tools
    as an ``LlmRequest``. Builds nothing else: the spec's dict view is made only if read."""
    return LlmRequest(ctx.system_prompt, ctx.messages, ctx.tools, context=ctx)


class SpecFormatter:
    """``format_msg_for_llm`` with a cache of the spec's view across turns: each agent's default
    (one per agent, never shared), so an ``llm_call`` that reads ``request["messages"]`` converts
    only the messages added since its last call."""

    __slots__ = ("views",)

    def __init__(self) -> None:
        self.views = SpecViews()

    def __call__(self, ctx: AgentContext) -> LlmRequest:
        return LlmRequest(ctx.system_prompt, ctx.messages, ctx.tools, views=self.views, context=ctx)

"""``LlmRequest``: what the loop gives ``llm_call`` for one LLM call.

It carries the typed context: the system prompt, the messages, the tools and the run's options
(the session id), which provider clients read and convert to their own wire form. Read as a
mapping it is also the spec's request (``request["messages"]`` and ``request["tools"]`` as
OpenAI chat dicts), so an ``llm_call`` written against the spec keeps working: that view is built
on first access only, and an agent's default formatter caches it across turns, so such an
``llm_call`` pays for the messages added since its last call, not for the whole history.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from typing import Any

from yiemagent.core._messages import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage
from yiemagent.core._output_request import OutputRequest
from yiemagent.core._spec_format import SpecViews, response_format_view, spec_view
from yiemagent.core._tools import AgentContext, ToolMapping, shared_tool_mapping

__all__ = ["LlmRequest", "OutputRequest", "SpecFormatter", "format_msg_for_llm"]


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


_READ_ONLY = (
    "an LlmRequest is read-only (the loop made it for one call); copy it with dict(request) or "
    "request.to_dict() to change what you send"
)


class LlmRequest(dict[str, Any]):
    """One LLM call's input: ``system_prompt``, ``messages`` (the typed history, a list the loop
    made for this call), ``tools`` (``name -> AgentTool``), ``session_id`` (``None`` unless
    the run has one) and ``output`` (an ``OutputRequest`` when the run asks the model for data
    in the ``native`` or ``grammar`` mode; the view shows it as ``response_format``).

    It is also a ``dict``: the spec's request view (see the module docstring), built when its
    values are first read, so ``json.dumps(request)`` and ``requests.post(url, json=request)``
    send the spec's ``Dict`` as the seed's example does. Its keys (``messages``, ``tools`` when
    there are tools, ``response_format`` when there is an output) are known without building the
    view. It is read-only: changing it raises ``TypeError`` (copy it with ``dict(request)``)."""

    __slots__ = ("_context", "_output", "_view", "_views", "messages", "session_id", "system_prompt", "tools")

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
        self._output: OutputRequest | None = None
        # The dict's own storage holds the keys only (values None): a consumer that reads the
        # storage's size (json's encoder does) sees a request that is not empty, and every read
        # of a value goes through the view below.
        dict.__setitem__(self, "messages", None)
        if self.tools:
            dict.__setitem__(self, "tools", None)

    @property
    def output(self) -> OutputRequest | None:
        """The structured output the model is asked for (``native``/``grammar`` modes), or ``None``."""
        return self._output

    @output.setter
    def output(self, value: OutputRequest | None) -> None:
        self._output = value
        self._view = None
        if value is None:
            dict.pop(self, "response_format", None)
        else:
            dict.__setitem__(self, "response_format", None)

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
            if self._output is not None:
                view = {**view, "response_format": response_format_view(self._output)}
            self._view = view
        return view

    def __getitem__(self, key: str) -> Any:
        return self._spec()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._spec().get(key, default) if dict.__contains__(self, key) else default

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        return self._spec().items()

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        return self._spec().values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LlmRequest):
            other = other._spec()
        return self._spec() == other if isinstance(other, Mapping) else NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None

    def __or__(self, other: Any) -> Any:
        return {**self._spec(), **other} if isinstance(other, Mapping) else NotImplemented

    def __ror__(self, other: Any) -> Any:
        return {**other, **self._spec()} if isinstance(other, Mapping) else NotImplemented

    def __iter__(self) -> Iterator[str]:
        # Not dict's own iterator: dict(request) and {**request} then read the values through
        # __getitem__, not from the storage's placeholders.
        return iter(list(dict.keys(self)))

    def copy(self) -> dict[str, Any]:
        """The spec's request view as a new plain dict (as ``to_dict``)."""
        return dict(self._spec())

    def to_dict(self) -> dict[str, Any]:
        """The spec's request view as a new plain dict (its message dicts are shared)."""
        return dict(self._spec())

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its typed fields (not dict's own way, which would copy the storage's
        # placeholders), without the per-agent cache behind the view.
        return (
            _rebuilt,
            (self.system_prompt, list(self.messages), self.tools, self.session_id, self._output),
        )

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return self.__reduce__()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(_READ_ONLY)

    __setitem__ = __delitem__ = _read_only
    setdefault = pop = popitem = update = clear = __ior__ = _read_only

    def __repr__(self) -> str:
        return (
            f"LlmRequest(system_prompt={self.system_prompt!r}, messages=<{len(self.messages)}>, "
            f"tools={list(self.tools)}, session_id={self.session_id!r})"
        )


def _rebuilt(
    system_prompt: str,
    messages: Sequence[AgentMessage],
    tools: ToolMapping,
    session_id: str | None,
    output: OutputRequest | None,
) -> LlmRequest:
    """An ``LlmRequest`` rebuilt from its fields (what ``pickle`` and ``copy`` call)."""
    request = LlmRequest(system_prompt, messages, tools, session_id=session_id)
    request.output = output
    return request


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

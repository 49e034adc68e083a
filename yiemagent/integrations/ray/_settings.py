"""What an actor needs to build an agent, as picklable data, and the building itself.

Functions and clients cannot travel to another machine, but their names can: ``AgentSettings``
holds a model spec for ``create_llm_call`` (or the importable name of a factory), a tools folder
and importable tool names, the system prompt, hooks as importable names (``"pkg.module:attr"``)
and the agent's plain options. ``AgentFactory`` resolves them once in the process that hosts the
agents and builds as many agents as it is asked for. Nothing here imports Ray.
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from yiemagent.agent._agent import DEFAULT_SYSTEM_PROMPT, YiemAgent
from yiemagent.agent._old_keywords import AGENT_KEYWORDS, group
from yiemagent.agent._session import SessionData
from yiemagent.core._approval import paused_batch_from_dict
from yiemagent.core._emit import Emit
from yiemagent.core._messages import AssistantMessage, LlmModel
from yiemagent.core._tools import AgentTool
from yiemagent.llm import create_llm_call
from yiemagent.tools._store import ToolStore, load_tools, register_tool

__all__ = ["AGENT_OPTIONS", "AgentFactory", "AgentSettings", "resolve_name"]

# The constructor options that are plain values, and so may travel in ``agent_options``: the
# flat names of the settings ToolOptions and QueueOptions group stay the plain data here.
AGENT_OPTIONS = frozenset(
    {
        "tool_execution",
        "max_turns",
        "tool_timeout_s",
        "max_parallel_tools",
        "steering_mode",
        "follow_up_mode",
        "skip_tools_on_steer",
        "max_retry_delay_ms",
        "name",
    }
)
_HOOKS = ("before_tool_call", "after_tool_call", "prepare_context", "format_msg_for_llm")


def resolve_name(name: str) -> Any:
    """The object an importable name ``"package.module:attr"`` names (``attr`` may be dotted).
    Raises ``ValueError`` for a name of another form, ``ImportError``/``AttributeError`` when it
    names nothing in this process."""
    module_name, sep, attr = name.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{name!r} is not an importable name of the form 'package.module:attr'")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _check_name(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or value.count(":") != 1 or value.startswith(":") or value.endswith(":"):
        raise ValueError(f"{attribute.name} must be an importable name 'package.module:attr', got {value!r}")


def _check_names(inst: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    for name in value:
        _check_name(inst, attribute, name)


def _strings(value: Iterable[str] | str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _names_or_none(value: Iterable[str] | str | None) -> tuple[str, ...] | None:
    return None if value is None else _strings(value)


@attrs.define(frozen=True)
class AgentSettings:
    """How to build an agent anywhere on the cluster, as plain picklable data.

    The model is ``create_llm_call(model_spec, **llm_options)``, or, with ``llm_factory``
    (``"package.module:function"``), ``function(model_spec, **llm_options)``: that is how a
    scripted or custom model is named. Api keys are read from the environment of the process
    that builds the client (set them on every node), never carried here. Tools come from
    ``tools_folder`` (loaded with ``load_tools`` where the agent runs, so every node needs the
    folder) and ``tool_imports`` (importable names of an ``AgentTool``, a list of them, or a
    function returning either); ``tool_names`` keeps only the tools it names. Hooks and
    formatters are importable names; ``agent_options`` holds plain ``YiemAgent`` options
    (``tool_execution``, ``max_turns``, ``tool_timeout_s``, ...; the agent gets those of
    ``ToolOptions`` and ``QueueOptions`` grouped into them). A value that cannot be pickled
    is refused here rather than on the way to an actor.
    """

    model_spec: str | None = None
    llm_factory: str | None = attrs.field(default=None, validator=_check_name)
    llm_options: dict[str, Any] = attrs.field(factory=dict, converter=dict)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    model: LlmModel | str | None = None
    tools_folder: str | None = None
    tool_imports: tuple[str, ...] = attrs.field(default=(), converter=_strings, validator=_check_names)
    tool_names: tuple[str, ...] | None = attrs.field(default=None, converter=_names_or_none)
    before_tool_call: str | None = attrs.field(default=None, validator=_check_name)
    after_tool_call: str | None = attrs.field(default=None, validator=_check_name)
    prepare_context: str | None = attrs.field(default=None, validator=_check_name)
    format_msg_for_llm: str | None = attrs.field(default=None, validator=_check_name)
    agent_options: dict[str, Any] = attrs.field(factory=dict, converter=dict)

    def __attrs_post_init__(self) -> None:
        if self.model_spec is None and self.llm_factory is None:
            raise ValueError("AgentSettings needs model_spec (for create_llm_call) or llm_factory")
        if not isinstance(self.system_prompt, str):
            raise TypeError(f"system_prompt must be a string, got {type(self.system_prompt).__name__}")
        unknown = sorted(set(self.agent_options) - AGENT_OPTIONS)
        if unknown:
            raise ValueError(
                f"agent_options {unknown} are not plain YiemAgent options; allowed: "
                f"{sorted(AGENT_OPTIONS)} (functions go in by importable name)"
            )
        try:
            pickle.dumps(self)
        except Exception as exc:
            raise TypeError(f"AgentSettings must be picklable to reach an actor: {exc}") from exc


class AgentFactory:
    """``AgentSettings`` resolved in one process: hooks imported and tools loaded once, then any
    number of agents built from them.

    With ``share_llm_call`` one model client serves every agent built here (it must be safe to
    call from several threads at once, as the provider clients are); otherwise each agent gets
    its own. Agents share the tool store (a tool ``writeTool`` adds reaches them all).
    """

    def __init__(self, settings: AgentSettings, *, share_llm_call: bool = False) -> None:
        self.settings = settings
        self.hooks: dict[str, Any] = {
            name: resolve_name(value) for name in _HOOKS if (value := getattr(settings, name)) is not None
        }
        self.tool_store, self.tools = self._load_tools()
        self._shared_llm_call = self.make_llm_call() if share_llm_call else None

    def make_llm_call(self) -> Callable[..., AssistantMessage]:
        """A new model client from the settings."""
        settings = self.settings
        if settings.llm_factory is not None:
            factory = resolve_name(settings.llm_factory)
            llm_call = factory(settings.model_spec, **settings.llm_options)
        else:
            assert settings.model_spec is not None  # checked by AgentSettings
            llm_call = create_llm_call(settings.model_spec, **settings.llm_options)
        if not callable(llm_call):
            raise TypeError(f"the model factory returned {type(llm_call).__name__}, not an llm_call")
        return llm_call  # type: ignore[no-any-return]

    def _load_tools(self) -> tuple[ToolStore | None, list[AgentTool]]:
        settings = self.settings
        imported = [tool for name in settings.tool_imports for tool in _tools_of(name)]
        store: ToolStore | None = None
        if settings.tools_folder is not None:
            store = ToolStore(settings.agent_options.get("name", "yiemagent"))
            load_tools(store, settings.tools_folder)
            for tool in imported:
                register_tool(store, tool)
            available = dict(store.tools)
        else:
            available = {tool.name: tool for tool in imported}
        if settings.tool_names is None:
            return store, list(available.values())
        missing = [n for n in settings.tool_names if n not in available]
        if missing:
            raise ValueError(f"tool_names {missing} are not among the tools loaded: {sorted(available)}")
        return store, [available[n] for n in settings.tool_names]

    def agent(
        self,
        *,
        session: SessionData | None = None,
        session_id: str | None = None,
        listener: Emit | None = None,
    ) -> YiemAgent:
        """A new agent from the settings; with ``session``, taking up that saved session (its id,
        system prompt, model, history and the batch waiting for approval, if any, as
        ``YiemAgent.load`` does); ``listener`` is its first event listener."""
        settings = self.settings
        plain = {k: v for k, v in settings.agent_options.items() if k not in AGENT_KEYWORDS}
        flat = {k: v for k, v in settings.agent_options.items() if k in AGENT_KEYWORDS}
        kwargs: dict[str, Any] = {
            **plain,
            **group(flat),
            **self.hooks,
            "llm_call": self._shared_llm_call or self.make_llm_call(),
            "system_prompt": settings.system_prompt,
            "model": settings.model,
            "session_id": session_id,
            "agent_event_sink": listener,
        }
        if self.tool_store is not None and settings.tool_names is None:
            kwargs["tool_store"] = self.tool_store  # the agent follows its store
        else:
            kwargs.update(tools=list(self.tools), tool_store=self.tool_store)
        if session is not None:
            kwargs.update(
                session_id=session.session_id,
                system_prompt=session.system_prompt,
                model=session.model,
                messages=session.messages,
            )
        agent = YiemAgent(**kwargs)
        if session is not None and session.paused is not None:
            # As YiemAgent.load restores it; a copy, as the agent records its calls' progress
            # in it and ``session`` may be used again.
            paused = paused_batch_from_dict(session.paused.to_dict())
            with agent._cond:
                agent._state.paused_batch = paused
        return agent


def _tools_of(name: str) -> list[AgentTool]:
    """The tools an importable name gives: an ``AgentTool``, an iterable or mapping of them, or
    a function returning one of those."""
    value = resolve_name(name)
    if callable(value) and not isinstance(value, AgentTool):
        value = value()
    if isinstance(value, AgentTool):
        return [value]
    if isinstance(value, Mapping):
        value = list(value.values())
    tools = list(value) if isinstance(value, Iterable) else [value]
    for tool in tools:
        if not isinstance(tool, AgentTool):
            raise TypeError(f"{name} gave a {type(tool).__name__}, not an AgentTool")
    return tools

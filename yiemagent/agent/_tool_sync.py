"""How an agent's tools follow its tool store between LLM calls.

An agent given its store's own mapping (or only the store) follows the whole store: tools loaded,
reloaded, registered or removed there are what the next LLM call offers the model. An agent given
some of the store's tools keeps to those, refreshing them when reloaded and dropping them when
their file is gone; tools that did not come from the store stay as given. Tools that a call
reports in ``added_tool_names`` (``writeTool``) join the agent's tools from the next call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from yiemagent.core._tools import AgentState, ToolMapping

__all__ = ["ToolSync"]


class ToolSync:
    """The link between one agent's tools and its store; ``sync`` is the loop's ``sync_tools``.

    Only the agent's worker calls ``sync`` (between LLM calls) and only while no run is active
    does the agent call ``rebind``, so the object needs no lock of its own.
    """

    __slots__ = ("_follow", "_names", "store")

    def __init__(self, store: Any, given: Any, tools: ToolMapping) -> None:
        self.store = store
        self._follow = False
        self._names: set[str] = set()
        self.rebind(given, tools, self.store_snapshot())

    def store_snapshot(self) -> dict[str, Any]:
        """A copy of the store's tools, taken under the store's lock. The agent takes it before
        its own channel lock: the store lock is never taken under that one."""
        return self._store_tools()

    def rebind(self, given: Any, tools: ToolMapping, store_tools: dict[str, Any]) -> None:
        """Follow the whole store when ``given`` is the store's own mapping (or ``None``), else
        only the tools of ``tools`` that are the store's own objects (in ``store_tools``, a
        ``store_snapshot``)."""
        self._follow = self.store is not None and (given is None or given is self.store.tools)
        self._names = {n for n, t in tools.items() if store_tools.get(n) is t}

    def _store_tools(self) -> dict[str, Any]:
        store = self.store
        if store is None:
            return {}
        lock = getattr(store, "lock", None)
        if lock is None:
            return dict(store.tools)
        with lock:
            return dict(store.tools)

    def sync(self, state: AgentState, added: Sequence[str]) -> None:
        """Bring the store's changes and the tools named in ``added`` into ``state.tools``."""
        if self.store is None:
            return
        current = self._store_tools()
        if self._follow:
            if current != state.tools:  # AgentTool compares by identity: a C-level check
                state.tools = current
            return
        for name in added:
            if name in current:
                self._names.add(name)
        tools = state.tools
        for name in list(self._names):
            tool = current.get(name)
            if tool is None:
                tools.pop(name, None)
                self._names.discard(name)
            elif tools.get(name) is not tool:
                tools[name] = tool

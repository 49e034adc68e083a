"""Agents and tools on a Ray cluster (the ``ray`` extra: ``pip install 'yiemagent[ray]'``).

- ``RemoteAgent.start(settings)`` hosts one ``YiemAgent`` in a Ray actor and returns a handle
  with the agent's synchronous API; events reach the caller's listeners in order, or a shared
  ``EventSink``.
- ``AgentPool(size, settings, store)`` spreads conversations over ``size`` actors by session id,
  loading sessions from a ``SessionStore`` (``DirectoryStore``, ``RedisStore``) and saving them
  after each run; an actor that dies is replaced and its sessions go on from their last save.
- ``ray_tool(tool, num_cpus=..., resources=...)`` runs a tool's calls as Ray tasks.

``AgentSettings`` describes an agent as picklable data (a model spec, tools, hooks by importable
name). Importing this module imports Ray; ``import yiemagent`` does not. See docs/SCALING.md.
"""

from __future__ import annotations

from yiemagent.errors import AgentActorDiedError, ClusterError, RayToolError, SessionStoreError
from yiemagent.integrations._session_store import DirectoryStore, RedisStore, SessionStore
from yiemagent.integrations.ray._pool import AgentPool
from yiemagent.integrations.ray._remote import RemoteAgent
from yiemagent.integrations.ray._settings import AgentSettings, resolve_name
from yiemagent.integrations.ray._sink import EventSink
from yiemagent.integrations.ray._tools import ray_tool

__all__ = [
    "AgentActorDiedError",
    "AgentPool",
    "AgentSettings",
    "ClusterError",
    "DirectoryStore",
    "EventSink",
    "RayToolError",
    "RedisStore",
    "RemoteAgent",
    "SessionStore",
    "SessionStoreError",
    "ray_tool",
    "resolve_name",
]

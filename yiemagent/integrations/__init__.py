"""What attaches to agents from outside: OpenTelemetry tracing, events as JSON lines and as
plain dicts, session stores (a folder, Redis); ``yiemagent.integrations.ray`` for clusters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_tracing": ("TracingListener", "disable_tracing", "enable_tracing", "trace_agent"),
        "_event_log": ("JsonlEventWriter",),
        "_event_wire": ("event_from_dict", "event_to_dict"),
        "_session_store": ("DirectoryStore", "RedisStore", "SessionStore"),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.integrations._event_log import JsonlEventWriter as JsonlEventWriter
    from yiemagent.integrations._event_wire import event_from_dict as event_from_dict
    from yiemagent.integrations._event_wire import event_to_dict as event_to_dict
    from yiemagent.integrations._session_store import DirectoryStore as DirectoryStore
    from yiemagent.integrations._session_store import RedisStore as RedisStore
    from yiemagent.integrations._session_store import SessionStore as SessionStore
    from yiemagent.integrations._tracing import TracingListener as TracingListener
    from yiemagent.integrations._tracing import disable_tracing as disable_tracing
    from yiemagent.integrations._tracing import enable_tracing as enable_tracing
    from yiemagent.integrations._tracing import trace_agent as trace_agent

"""The HTTP side the provider clients share: one ``requests`` session per client, retries,
abort, server-sent events, limits, and keeping the API key out of everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_options": ("HttpOptions",),
        "_retry": ("RetryPolicy",),
        "_sse": ("SSEEvent", "SSEParser", "iter_sse"),
        "_abortable": ("RequestInterrupter", "interruptible_session"),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.llm.http._abortable import RequestInterrupter as RequestInterrupter
    from yiemagent.llm.http._abortable import interruptible_session as interruptible_session
    from yiemagent.llm.http._options import HttpOptions as HttpOptions
    from yiemagent.llm.http._retry import RetryPolicy as RetryPolicy
    from yiemagent.llm.http._sse import SSEEvent as SSEEvent
    from yiemagent.llm.http._sse import SSEParser as SSEParser
    from yiemagent.llm.http._sse import iter_sse as iter_sse

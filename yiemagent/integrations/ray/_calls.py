"""Waiting for a Ray call and turning Ray's errors back into the library's.

An exception raised inside an actor method reaches the caller wrapped in a ``RayTaskError``; the
caller of a remote agent should see what a local agent would have raised (``ResponseTimeout``,
``AgentClosedError``, ``ValueError``), so the cause is raised again. A dead actor becomes an
``AgentActorDiedError`` whose message says so in one line, not Ray's page of advice.
"""

from __future__ import annotations

import time
from typing import Any

import ray
import ray.exceptions

from yiemagent.errors import AgentActorDiedError, ResponseTimeout

__all__ = ["get", "remaining", "short_reason"]


def remaining(deadline: float | None, floor: float = 0.0) -> float | None:
    """Seconds until ``deadline`` (a ``time.monotonic()`` value; at least ``floor``), or
    ``None`` for no deadline."""
    return None if deadline is None else max(deadline - time.monotonic(), floor)


def short_reason(exc: BaseException, limit: int = 300) -> str:
    """The first line of ``exc``'s text (cut to ``limit`` characters), after its type name."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if len(text) > limit:
        text = text[:limit] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def get(ref: Any, timeout: float | None = None, *, what: str = "the call") -> Any:
    """``ray.get(ref, timeout)``, raising the remote exception itself (with Ray's error, which
    carries the remote traceback, as its cause), ``AgentActorDiedError`` when the actor died,
    and ``ResponseTimeout`` when ``timeout`` passed."""
    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause
        if isinstance(cause, Exception):
            raise cause from exc
        raise
    except ray.exceptions.RayActorError as exc:
        raise AgentActorDiedError(f"{what} failed: the agent's actor died ({short_reason(exc)})") from exc
    except ray.exceptions.GetTimeoutError as exc:
        raise ResponseTimeout(f"{what}: no answer from the agent's actor within {timeout} s") from exc

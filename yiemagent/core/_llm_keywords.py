"""Which keywords an ``llm_call`` is given: those of ``LLM_KEYWORDS`` its signature declares
(all of them for ``**kwargs``), with one run's values."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["LLM_KEYWORDS", "accepted_keywords", "keywords_for_llm"]

LLM_KEYWORDS = ("on_update", "signal", "max_retry_delay_ms", "session_id")


def accepted_keywords(fn: Callable[..., Any]) -> frozenset[str]:
    """Which of ``LLM_KEYWORDS`` ``fn`` declares (all of them when it takes ``**kwargs``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return frozenset(LLM_KEYWORDS)
    names = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
    return frozenset(k for k in LLM_KEYWORDS if k in names)


def keywords_for_llm(config: Any, emit: Any, signal: Any) -> dict[str, Any]:
    """The keywords ``llm_call`` declared, with this run's values (the same on every call of
    the run: ``on_update`` is the run's sink, which drops updates while no one listens)."""
    wanted = config.llm_keywords
    if not wanted:
        return {}
    kwargs: dict[str, Any] = {}
    if "on_update" in wanted:
        kwargs["on_update"] = emit.send
    if "signal" in wanted:
        kwargs["signal"] = signal
    if "max_retry_delay_ms" in wanted and config.max_retry_delay_ms is not None:
        kwargs["max_retry_delay_ms"] = config.max_retry_delay_ms
    if "session_id" in wanted and config.session_id is not None:
        kwargs["session_id"] = config.session_id
    return kwargs

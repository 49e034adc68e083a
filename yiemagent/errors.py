"""How the loop describes and contains the exceptions of code it calls (tools, hooks, models)."""

from __future__ import annotations

__all__ = ["describe_error", "reraise_interrupt"]


def describe_error(exc: BaseException) -> str:
    """``"<Type>: <text>"`` for an exception (just the type when the text is empty)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def reraise_interrupt(exc: BaseException) -> None:
    """Re-raise ``exc`` if it is a ``KeyboardInterrupt``: the one exception the loop must not
    turn into a result. Everything else (``SystemExit`` and ``asyncio.CancelledError`` raised by
    a tool or hook included) becomes an error result or an error response instead."""
    if isinstance(exc, KeyboardInterrupt):
        raise exc

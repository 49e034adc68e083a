"""Session ids: what a string must be to name a conversation wherever it is written."""

from __future__ import annotations

from typing import Any

__all__ = ["check_session_id", "check_whole_session_id"]


def check_session_id(value: Any) -> str:
    """Return ``value`` if it can be a session id: a non-empty ``str`` of whole characters. Raise
    ``TypeError`` for anything else than a non-empty string, and ``ValueError`` naming the id
    when it holds a lone surrogate (an id is written as UTF-8: into a session file, a file name,
    a Redis key, a provider's request; a lone surrogate has no UTF-8 form)."""
    if not isinstance(value, str) or not value:
        raise TypeError(f"session_id must be a non-empty string, got {value!r}")
    check_whole_session_id(value)
    return value


def check_whole_session_id(session_id: str) -> None:
    """Raise ``ValueError`` naming ``session_id`` when it cannot be encoded as UTF-8."""
    if session_id.isascii():  # nearly always (a uuid's hex): nothing to encode
        return
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = f"{session_id[exc.start]!r} at index {exc.start}"
        raise ValueError(
            f"session_id {session_id!r:.100} holds a lone surrogate ({where}), which "
            "cannot be written as UTF-8; use an id of whole characters (e.g. "
            "uuid.uuid4().hex), and decode any bytes it is made from with "
            "errors='replace'"
        ) from None

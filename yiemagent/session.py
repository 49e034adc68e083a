"""Saving and restoring an agent's session as versioned JSON, written atomically.

The file holds the session id, system prompt, model description and messages (``to_dict`` form).
It never holds an API key: clients are not part of a session.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from typing import Any

import attrs

from yiemagent.errors import SessionError, describe_error
from yiemagent.messages import AgentMessage, LlmModel

__all__ = ["SESSION_FORMAT", "SESSION_VERSION", "SessionData", "SessionError", "load_session",
           "save_session", "session_from_dict", "session_to_dict"]

SESSION_FORMAT = "yiemagent.session"
SESSION_VERSION = 1


@attrs.define(frozen=True)
class SessionData:
    """What a session file holds, read back."""

    session_id: str
    system_prompt: str
    model: LlmModel | None
    messages: list[AgentMessage]


def session_to_dict(data: SessionData) -> dict[str, Any]:
    """The JSON-ready session document of ``data`` (format marker and version first)."""
    model = data.model
    return {
        "format": SESSION_FORMAT,
        "version": SESSION_VERSION,
        "session_id": data.session_id,
        "system_prompt": data.system_prompt,
        "model": None if model is None else model.to_dict(),
        "messages": [m.to_dict() for m in data.messages],
    }


def save_session(data: SessionData, path: str | os.PathLike[str]) -> None:
    """Write the session ``data`` to ``path`` atomically: a crash mid-write leaves the old file
    whole (the text goes to a temporary file in the same folder, is synced, then replaces it)."""
    text = json.dumps(session_to_dict(data), ensure_ascii=False, indent=1)
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    tmp = os.path.join(folder, f".session-{uuid.uuid4().hex}.tmp")
    # Created 0666 so that the umask applies, as to any file the user writes.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):  # a replaced file keeps its mode
            os.chmod(tmp, os.stat(target).st_mode & 0o777)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_session(path: str | os.PathLike[str]) -> SessionData:
    """Read a session file; raise ``SessionError`` naming the file if it cannot be used."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise SessionError(f"{name}: cannot read session file: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise SessionError(f"{name}: damaged session file (not valid JSON: {exc})") from exc
    return session_from_dict(data, name)


def session_from_dict(data: Any, name: str = "session") -> SessionData:
    """The ``SessionData`` of a decoded session document; raise ``SessionError`` (starting with
    ``name``) when it is not a session of a version this library reads."""
    if not isinstance(data, dict) or data.get("format") != SESSION_FORMAT:
        raise SessionError(f"{name}: not a yiemagent session file")
    version = data.get("version")
    if version != SESSION_VERSION:
        raise SessionError(f"{name}: session format version {version!r} is not supported; this "
                           f"yiemagent reads version {SESSION_VERSION}")
    try:
        model = data.get("model")
        return SessionData(
            session_id=str(data["session_id"]),
            system_prompt=str(data["system_prompt"]),
            model=None if model is None else LlmModel.from_dict(model),
            messages=[AgentMessage.from_dict(m) for m in data["messages"]],
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SessionError(f"{name}: damaged session file ({describe_error(exc)})") from exc

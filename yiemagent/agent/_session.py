"""Saving and restoring an agent's session as versioned JSON, written atomically.

The file holds the session id, system prompt, model description and messages (``to_dict`` form),
and a batch of tool calls waiting for approval when there is one (with which of its calls have
started and how they ended). It never holds an API key: clients are not part of a session.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import uuid
from typing import Any

import attrs

from yiemagent.core._approval import PausedBatch, paused_batch_from_dict
from yiemagent.core._files import UnreadableFileError, read_regular_file
from yiemagent.core._messages import AgentMessage, LlmModel
from yiemagent.core._session_id import check_session_id, check_whole_session_id
from yiemagent.core._usage import RunUsage
from yiemagent.errors import SessionError, describe_error

__all__ = [
    "MAX_SESSION_BYTES",
    "SESSION_FORMAT",
    "SESSION_VERSION",
    "SessionData",
    "SessionError",
    "check_session_id",
    "load_session",
    "save_session",
    "session_bytes",
    "session_from_dict",
    "session_to_dict",
]

SESSION_FORMAT = "yiemagent.session"
SESSION_VERSION = 1
# Far above any real conversation (2,000 messages with images are a few MB), and a bound on what
# a path that is not a session (a huge log, /dev/zero) makes load_session read.
MAX_SESSION_BYTES = 512 * 2**20


@attrs.define(frozen=True)
class SessionData:
    """What a session file holds, read back."""

    session_id: str
    system_prompt: str
    model: LlmModel | None
    messages: list[AgentMessage]
    paused: PausedBatch | None = None  # a batch waiting for approval (its calls' progress too)
    usage: RunUsage | None = None  # the agent's usage since it was made or reset


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
        **({"paused_batch": data.paused.to_dict()} if data.paused is not None else {}),
        **({"usage": data.usage.to_dict()} if data.usage is not None else {}),
    }


def session_bytes(data: SessionData, indent: int | None = None) -> bytes:
    """The session document of ``data`` as UTF-8 JSON. Raise ``ValueError`` naming the session
    id when it holds a lone surrogate. Other text that holds one (a model's reply can: JSON's
    ``"\\ud83d"`` reads as one) is written as a ``\\u`` escape instead, which reads back the same,
    so such a history is saved whole rather than refused. A figure that is not finite is a
    ``ValueError``: a session file is always one ``load`` can read."""
    check_whole_session_id(data.session_id)
    document = session_to_dict(data)
    # allow_nan=False: a NaN or an infinity would be written as a word no JSON reader (ours
    # included) takes back, so it is refused here rather than found at the next load.
    try:
        return json.dumps(document, ensure_ascii=False, indent=indent, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(document, ensure_ascii=True, indent=indent, allow_nan=False).encode("ascii")


def save_session(data: SessionData, path: str | os.PathLike[str]) -> None:
    """Write the session ``data`` to ``path`` atomically: a crash mid-write leaves the old file
    whole (the text goes to a temporary file ``.<file name>.<hex>.tmp`` in the same folder, is
    synced, then replaces it).

    A save that was killed leaves its temporary file behind; every save removes the ones of the
    same target that are over ``STALE_TEMP_AGE_S`` seconds older than its own (both ages read
    from the file system's clock). Younger ones are kept: they may be the live files of
    concurrent saves to the same path, which must not lose theirs. Removing is best effort and
    never fails the save. A session id that cannot be written (see ``session_bytes``) raises
    ``ValueError`` before any file is touched.
    """
    encoded = session_bytes(data, indent=1)
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    prefix = _temp_prefix(target)
    tmp = os.path.join(folder, f"{prefix}{uuid.uuid4().hex}.tmp")
    # Created 0666 so that the umask applies, as to any file the user writes.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(encoded)
            f.flush()
            os.fsync(f.fileno())
            written = os.fstat(f.fileno()).st_mtime
        with contextlib.suppress(FileNotFoundError):  # a replaced file keeps its mode
            os.chmod(tmp, os.stat(target).st_mode & 0o777)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _remove_stale_temps(folder, prefix, written - STALE_TEMP_AGE_S)


# A save's temporary file lives for the time of one write, fsync and rename; one this much older
# than a new save's own file belongs to a save that died.
STALE_TEMP_AGE_S = 60.0
# Room for ".", "." and "<32 hex>.tmp" within the usual 255-byte limit of a file name.
_TEMP_NAME_BYTES = 200


def _temp_prefix(target: str) -> str:
    """``.<file name>.``: the start of the temporary files of saves to ``target`` (the name cut to
    ``_TEMP_NAME_BYTES`` bytes so that the temporary name stays a valid file name)."""
    name = os.path.basename(target)
    while len(name.encode("utf-8", "surrogatepass")) > _TEMP_NAME_BYTES:
        name = name[:-1]
    return f".{name}."


def _remove_stale_temps(folder: str, prefix: str, cutoff: float) -> None:
    """Delete the temporary files ``<prefix><32 hex>.tmp`` in ``folder`` last changed before
    ``cutoff``; ignore every error (the save they follow has succeeded)."""
    pattern = re.compile(re.escape(prefix) + r"[0-9a-f]{32}\.tmp")
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if not pattern.fullmatch(entry.name):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                    os.unlink(entry.path)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def load_session(path: str | os.PathLike[str]) -> SessionData:
    """Read a session file; raise ``SessionError`` naming the file if it cannot be used, whatever
    is wrong with it (not a regular file, over ``MAX_SESSION_BYTES``, not UTF-8 JSON, ``NaN`` or
    ``Infinity`` in it, nested too deeply, numbers out of range, not a session, an unknown
    version). A FIFO or a device is refused without reading it, so this never hangs."""
    name = os.fspath(path)
    try:
        raw = read_regular_file(name, MAX_SESSION_BYTES)
    except UnreadableFileError as exc:
        raise SessionError(f"{name}: cannot read session file: {exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise SessionError(
            f"{name}: damaged session file (not UTF-8: {exc.reason} at byte {exc.start})"
        ) from None
    except ValueError as exc:
        raise SessionError(f"{name}: damaged session file (not valid JSON: {exc})") from exc
    except RecursionError as exc:
        raise SessionError(f"{name}: damaged session file (its JSON is nested too deeply to read)") from exc
    return session_from_dict(data, name)


def session_from_dict(data: Any, name: str = "session") -> SessionData:
    """The ``SessionData`` of a decoded session document; raise ``SessionError`` (starting with
    ``name``) when it is not a session of a version this library reads, or when any part of it
    cannot be turned back into messages (whatever the exception: a value out of range, nesting
    too deep, a wrong type)."""
    if not isinstance(data, dict) or data.get("format") != SESSION_FORMAT:
        raise SessionError(f"{name}: not a yiemagent session file")
    version = data.get("version")
    if version != SESSION_VERSION:
        raise SessionError(
            f"{name}: session format version {version!r} is not supported; this "
            f"yiemagent reads version {SESSION_VERSION}"
        )
    try:
        model = data.get("model")
        session_id = str(data["session_id"])
        check_whole_session_id(session_id)  # a file this library never writes, whose id could not be used
        paused = data.get("paused_batch")
        usage = data.get("usage")
        return SessionData(
            session_id=session_id,
            system_prompt=str(data["system_prompt"]),
            model=None if model is None else LlmModel.from_dict(model),
            messages=[AgentMessage.from_dict(m) for m in data["messages"]],
            paused=None if paused is None else paused_batch_from_dict(paused),
            usage=None if usage is None else RunUsage.from_dict(usage),
        )
    except RecursionError as exc:
        raise SessionError(f"{name}: damaged session file (nested too deeply to read)") from exc
    except Exception as exc:  # any failure to rebuild the messages means the file is damaged
        raise SessionError(f"{name}: damaged session file ({describe_error(exc)})") from exc

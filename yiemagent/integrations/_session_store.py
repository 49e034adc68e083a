"""Where sessions live between runs when they must outlive a process: pluggable session stores.

A store keeps session documents (the versioned JSON of ``session.py``) by session id, so that a
conversation can be saved by one process and taken up by another, on another machine. Two are
shipped: ``DirectoryStore`` (one file per session in a folder, for a shared file system) and
``RedisStore`` (one key per session on a Redis server; needs the ``redis`` package, imported only
when the store is first used). Stores travel to Ray actors, so they must be picklable: they hold
their settings, never an open connection. Nothing here imports Ray.
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
import threading
from typing import Any
from urllib.parse import quote, unquote

from yiemagent.agent._session import (
    SessionData,
    check_session_id,
    load_session,
    save_session,
    session_bytes,
    session_from_dict,
)
from yiemagent.errors import SessionError, SessionStoreError, describe_error

__all__ = ["DirectoryStore", "RedisStore", "SessionStore"]


class SessionStore(abc.ABC):
    """A place that keeps session documents by session id.

    ``load`` returns ``None`` for a session it does not have and raises ``SessionError`` for one
    it cannot read back (damaged, unknown version) and ``SessionStoreError`` when the store
    itself fails. ``save`` replaces the stored document as a whole (a reader sees the old or the
    new one, never a mix). One writer per session at a time is the caller's part: an
    ``AgentPool`` routes every session to one actor, which saves it after each run.
    """

    @abc.abstractmethod
    def load(self, session_id: str) -> SessionData | None:
        """The stored session ``session_id``, or ``None`` when there is none."""

    @abc.abstractmethod
    def save(self, data: SessionData) -> None:
        """Store ``data`` under ``data.session_id``, replacing what was there."""

    @abc.abstractmethod
    def delete(self, session_id: str) -> bool:
        """Remove the session; return whether there was one."""

    @abc.abstractmethod
    def session_ids(self) -> list[str]:
        """The ids of every stored session, sorted."""


def _decode(text: str, name: str) -> SessionData:
    """The session in the JSON ``text``; ``SessionError`` (starting with ``name``) when it is not a
    usable session, as ``load_session`` reports a damaged file."""
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise SessionError(f"{name}: damaged session (not valid JSON: {exc})") from exc
    except RecursionError as exc:
        raise SessionError(f"{name}: damaged session (its JSON is nested too deeply to read)") from exc
    return session_from_dict(document, name)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


# File names stay well under the usual 255-byte limit with room for a save's temporary name.
_MAX_NAME_BYTES = 150


class DirectoryStore(SessionStore):
    """Sessions as ``<folder>/<id>.json`` files, written atomically by ``save_session`` (a write
    that is killed leaves the old file whole). Put the folder on a file system every node
    mounts (NFS, a cloud file store) to share sessions across a cluster.

    The id is percent-encoded into the file name (``user/42`` is ``user%2F42.json``, and a leading
    dot is encoded too, so no session file is hidden or looks like a save's temporary); an id whose
    encoding is too long for a file name is stored as ``+<sha256>.json``. The folder is created
    when missing.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = os.path.abspath(os.fspath(folder))

    def __repr__(self) -> str:
        return f"DirectoryStore({self.folder!r})"

    def path_of(self, session_id: str) -> str:
        """The file that holds session ``session_id``."""
        check_session_id(session_id)
        name = quote(session_id, safe="-_.")
        if name.startswith("."):  # no hidden files, and never the ".<name>.<hex>.tmp" of a save
            name = "%2E" + name[1:]
        if len(name.encode("ascii")) > _MAX_NAME_BYTES:
            # "+" is never left unencoded by quote(), so a hashed name cannot be a quoted id.
            name = "+" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
        return os.path.join(self.folder, name + ".json")

    def load(self, session_id: str) -> SessionData | None:
        path = self.path_of(session_id)
        if not os.path.exists(path):
            return None
        return load_session(path)

    def save(self, data: SessionData) -> None:
        try:
            os.makedirs(self.folder, exist_ok=True)
            save_session(data, self.path_of(data.session_id))
        except OSError as exc:
            raise SessionStoreError(
                f"{self!r}: cannot save session {data.session_id!r}: {describe_error(exc)}"
            ) from exc

    def delete(self, session_id: str) -> bool:
        try:
            os.unlink(self.path_of(session_id))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise SessionStoreError(
                f"{self!r}: cannot delete session {session_id!r}: {describe_error(exc)}"
            ) from exc
        return True

    def session_ids(self) -> list[str]:
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return []
        ids: list[str] = []
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            if name.startswith("+"):  # a hashed name: the id is only in the file
                try:
                    ids.append(load_session(os.path.join(self.folder, name)).session_id)
                except SessionError:
                    continue
            else:
                ids.append(unquote(name[: -len(".json")]))
        return sorted(ids)


class RedisStore(SessionStore):
    """Sessions as JSON strings under ``<prefix><id>`` keys on a Redis server.

    ``url`` is a ``redis://`` (or ``rediss://``, ``unix://``) URL; ``ttl_s`` makes every save
    expire after that many seconds (``None``: kept until deleted); ``socket_timeout_s`` bounds
    each command, so a server that stops answering is a ``SessionStoreError``, not a hang. The
    client is made on first use in each process (a store that was pickled to an actor connects
    from there) and holds a pool of connections shared by that process's threads.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "yiemagent:session:",
        ttl_s: float | None = None,
        socket_timeout_s: float = 30.0,
    ) -> None:
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive or None, got {ttl_s!r}")
        self.url = url
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.socket_timeout_s = socket_timeout_s
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RedisStore({_without_password(self.url)!r}, prefix={self.prefix!r})"

    def __getstate__(self) -> dict[str, Any]:
        # A connection and a lock cannot travel; the copy connects on its first use.
        state = self.__dict__.copy()
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The ``redis.Redis`` client of this process, made on first use."""
        with self._lock:
            if self._client is None:
                import redis  # only a process that uses the store needs the package

                self._client = redis.Redis.from_url(
                    self.url,
                    socket_timeout=self.socket_timeout_s,
                    socket_connect_timeout=self.socket_timeout_s,
                    decode_responses=False,
                )
            return self._client

    def key_of(self, session_id: str) -> str:
        """The Redis key of session ``session_id``."""
        check_session_id(session_id)
        return self.prefix + session_id

    def _command(self, what: str, session_id: str | None, run: Any) -> Any:
        """Run ``run(client)``; a Redis failure becomes a ``SessionStoreError`` saying ``what``."""
        import redis

        try:
            return run(self.client())
        except redis.RedisError as exc:
            target = "" if session_id is None else f" session {session_id!r}"
            raise SessionStoreError(f"{self!r}: cannot {what}{target}: {describe_error(exc)}") from exc

    def load(self, session_id: str) -> SessionData | None:
        key = self.key_of(session_id)
        raw = self._command("load", session_id, lambda c: c.get(key))
        if raw is None:
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SessionError(f"{self!r} {session_id!r}: damaged session (not UTF-8: {exc})") from exc
        return _decode(text, f"{self!r} {session_id!r}")

    def save(self, data: SessionData) -> None:
        key = self.key_of(data.session_id)
        text = session_bytes(data)
        expiry = None if self.ttl_s is None else max(1, round(self.ttl_s * 1000))
        self._command("save", data.session_id, lambda c: c.set(key, text, px=expiry))

    def delete(self, session_id: str) -> bool:
        key = self.key_of(session_id)
        return bool(self._command("delete", session_id, lambda c: c.delete(key)))

    def session_ids(self) -> list[str]:
        pattern = _glob_escape(self.prefix) + "*"
        keys = self._command("list", None, lambda c: list(c.scan_iter(match=pattern, count=500)))
        start = len(self.prefix.encode("utf-8"))
        return sorted(k[start:].decode("utf-8", "surrogateescape") for k in keys)


def _glob_escape(text: str) -> str:
    """``text`` with Redis glob characters escaped, so a prefix matches only itself."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _without_password(url: str) -> str:
    """``url`` with any password replaced by ``***`` (a store's repr ends up in error texts)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in credentials else f"{scheme}://***@{host}"

"""The names under which an MCP server's tools are offered to a model: ones every provider accepts.

OpenAI and Anthropic both refuse a tool whose name does not match ``^[a-zA-Z0-9_-]{1,64}$``,
and one such tool fails every request it is offered in. MCP allows dots and 128 characters, and
servers send anything (spaces, slashes, any Unicode, control characters). ``tool_name`` keeps a
name that already fits and maps any other to one that does, the same way every time: the mapped
name depends only on the prefix and the server's name, never on the server's other tools, so a
tool keeps its name across connections and tool-list changes.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["MAX_NAME_LENGTH", "MAX_PREFIX_LENGTH", "check_prefix", "is_valid_name", "tool_name"]

MAX_NAME_LENGTH = 64
MAX_PREFIX_LENGTH = 32  # leaves a mapped name room for some of the server's name and the digest
_VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OTHERS = re.compile(r"[^A-Za-z0-9_-]+")
_DIGEST_CHARS = 8


def is_valid_name(name: str) -> bool:
    """Whether ``name`` is a tool name OpenAI and Anthropic accept (``^[a-zA-Z0-9_-]{1,64}$``)."""
    return _VALID.fullmatch(name) is not None


def check_prefix(prefix: str | None) -> str:
    """``prefix`` (``None``: ``""``) when it can start a valid name, else a ``ValueError`` saying
    what a prefix may hold."""
    prefix = "" if prefix is None else prefix
    if (
        not isinstance(prefix, str)
        or (prefix and not is_valid_name(prefix))
        or len(prefix) > MAX_PREFIX_LENGTH
    ):
        raise ValueError(
            f"prefix must be at most {MAX_PREFIX_LENGTH} ASCII letters, digits, '_' "
            f"or '-' (the characters providers accept in tool names), got {prefix!r}"
        )
    return prefix


def tool_name(prefix: str, server_name: str) -> str:
    """The name to register the server's tool ``server_name`` under: ``prefix + server_name``
    when that is a valid name, else the prefix and the server's name with accents dropped and
    each run of other characters made one ``_`` (``"tool"`` when nothing is left), cut to fit,
    then ``_`` and the first 8 hex digits of the SHA-256 of the server's name (UTF-8). The
    digest keeps apart names that read the same once mapped (``"a b"`` and ``"a/b"``), and
    any mapped name from a valid one."""
    name = prefix + server_name
    if is_valid_name(name):
        return name
    plain = unicodedata.normalize("NFKD", server_name).encode("ascii", "ignore").decode("ascii")
    room = MAX_NAME_LENGTH - _DIGEST_CHARS - 1 - len(prefix)
    readable = _OTHERS.sub("_", plain).strip("_")[:room].rstrip("_")
    stem = prefix + readable or "tool"
    digest = hashlib.sha256(server_name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    return f"{stem}{'' if stem.endswith(('_', '-')) else '_'}{digest}"

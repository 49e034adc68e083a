"""``McpOptions``: how an MCP connection reaches its server and how long it waits, in one value.

``load_mcp_tools`` and ``McpConnection`` take the same connection settings; they live here once
instead of as the same keywords on both. The value is frozen and checked when it is made, so a
connection never starts with a timeout or a limit that makes no sense, and one ``McpOptions`` may
serve several servers. Whether a setting fits the server (``headers`` for a URL, ``env``, ``cwd``
and ``errlog`` for a command) is checked by the connection, which knows the server.
"""

from __future__ import annotations

import os
import types
from collections.abc import Mapping
from typing import Any, Literal, TextIO

import attrs

from yiemagent.core._tools import positive_seconds

try:
    from yiemagent.tools.mcp._bounds import DEFAULT_MAX_RESULT_BYTES, check_limit
except ModuleNotFoundError as exc:  # pragma: no cover - the extra is installed for the tests
    raise ImportError("MCP tools need the official MCP SDK: pip install 'yiemagent[mcp]'") from exc

__all__ = ["DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_TIMEOUT_S", "McpOptions"]

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 30.0

Mode = Literal["auto", "legacy"]


def _strings(what: str, value: Any) -> Mapping[str, str] | None:
    """``None``, or a read-only copy of ``value``, a mapping of strings to strings (so the
    options stay as they were made, whoever else holds them); ``ValueError`` for anything else,
    naming the entry but never showing a value (it may be a secret)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a dict of names to strings, got a {type(value).__name__}")
    for name, text in value.items():
        if not isinstance(name, str):
            raise ValueError(
                f"{what} must map names to strings; the name {name!r} is of type "
                f"{type(name).__name__}, not str"[:300]
            )
        if not isinstance(text, str):
            raise ValueError(
                f"{what} must map names to strings; the value of {name!r} is of "
                f"type {type(text).__name__}, not str"[:300]
            )
    return types.MappingProxyType(dict(value))


def _env(value: Any) -> Mapping[str, str] | None:
    return _strings("env", value)


def _headers(value: Any) -> Mapping[str, str] | None:
    return _strings("headers", value)


def _path(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"cwd must be a path (a str or os.PathLike) or None, got {value!r}")
    return os.fspath(value)


def _masked(mapping: Mapping[str, str] | None) -> str:
    """The repr of ``env`` or ``headers``: the names only, since their values are often secrets
    (a token in ``Authorization``, an API key for the server)."""
    if mapping is None:
        return "None"
    return "{" + ", ".join(f"{name!r}: '***'" for name in mapping) + "}"


def _timeout(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    positive_seconds(attr.name, value)


def _connect_timeout(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    # Unlike a call, a connect always has a bound: a server that never answers must not hang
    # load_mcp_tools.
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{attr.name} must be a positive number of seconds, got {value!r}")


def _mode(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("auto", "legacy"):
        raise ValueError(f"{attr.name} must be 'auto' or 'legacy', got {value!r}")


def _limit(_inst: object, _attr: attrs.Attribute[Any], value: Any) -> None:
    check_limit(value)


def _flag(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{attr.name} must be True or False, got {value!r}")


@attrs.define(frozen=True, kw_only=True)
class McpOptions:
    """How a connection to an MCP server is made; every field is checked when it is set.

    ``timeout_s`` (60 s; ``None``: no bound) bounds each tool call, ``connect_timeout_s``
    (30 s) each connect and listing. ``max_result_bytes`` (16 MiB) bounds each message the
    server sends: a larger answer is dropped unread and its call fails saying so. ``parallel``
    (default) lets the agent run the server's tools at once (``parallel_tool_execute``). For a
    command, ``env`` adds variables to the SDK's safe default environment (``PATH``, ``HOME``,
    ...: not the whole of ``os.environ``), ``cwd`` sets its working directory and ``errlog`` (a
    file with a descriptor) receives its stderr (default ``sys.stderr``); for a URL, ``headers``
    go with every request. ``mode`` is the SDK's protocol negotiation: ``"auto"`` (the newest
    protocol, falling back to the ``initialize`` handshake of older servers) or ``"legacy"``
    (the handshake only). The values of ``env`` and ``headers`` never show in the ``repr``.
    Raises ``ValueError`` naming the field for a value that makes no sense.
    """

    timeout_s: float | None = attrs.field(default=DEFAULT_TIMEOUT_S, validator=_timeout)
    connect_timeout_s: float = attrs.field(default=DEFAULT_CONNECT_TIMEOUT_S, validator=_connect_timeout)
    max_result_bytes: int = attrs.field(default=DEFAULT_MAX_RESULT_BYTES, validator=_limit)
    parallel: bool = attrs.field(default=True, validator=_flag)
    # (read-only mappings: equal options hash alike, whatever env and headers hold)
    env: Mapping[str, str] | None = attrs.field(default=None, converter=_env, repr=_masked, hash=False)
    cwd: str | None = attrs.field(default=None, converter=_path)
    errlog: TextIO | None = None
    headers: Mapping[str, str] | None = attrs.field(
        default=None, converter=_headers, repr=_masked, hash=False
    )
    mode: Mode = attrs.field(default="auto", validator=_mode)

    def __reduce__(self) -> tuple[Any, ...]:
        # A read-only mapping does not pickle; the fields do, as plain dicts.
        fields = {f.name: getattr(self, f.name) for f in attrs.fields(McpOptions)}
        for name in ("env", "headers"):
            if fields[name] is not None:
                fields[name] = dict(fields[name])
        return (_rebuild, (fields,))


def _rebuild(fields: dict[str, Any]) -> McpOptions:
    return McpOptions(**fields)

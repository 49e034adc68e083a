"""The size bound on one message from an MCP server: the error that stands in for an answer over
it, and, for a stdio line that is too long to keep, which request it answered.

The transports (``mcp_stdio``, ``mcp_http``) read a message only up to ``max_result_bytes``. A
message over it is dropped unread; when it answers a request, the transport hands the SDK a
JSON-RPC error for that request instead (code ``RESULT_TOO_LARGE``), so the call waiting for it
fails at once with a message that says the limit and how to raise it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp_types import ErrorData, JSONRPCError

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "EDGE_BYTES",
    "RESULT_TOO_LARGE",
    "answer_id",
    "check_limit",
    "is_answer",
    "too_large",
    "too_large_text",
]

# Far above any result a model could use (16 MiB of text is millions of tokens), far below a
# memory problem; a message bigger than this is almost always a mistake of the server.
DEFAULT_MAX_RESULT_BYTES = 16 * 2**20
# A JSON-RPC error code of this library's own (the -32000 to -32099 range is for implementations),
# used only between a transport and the connection in this process; never sent to a server.
RESULT_TOO_LARGE = -32080

# How much of a dropped message's start and end is kept to tell which request it answered.
EDGE_BYTES = 4096
# One member of a JSON object whose value is a string, number, literal or the start of an object
# or array: the top-level members of a JSON-RPC message other than its one big value.
_SIMPLE = rb'"(?:[^"\\]|\\.)*"|[-+.\w]+'
_HEAD_MEMBER = re.compile(
    rb'\s*"(?P<key>[^"\\]{1,16})"\s*:\s*(?:(?P<value>' + _SIMPLE + rb")\s*(?P<end>[,}])|[\[{])", re.DOTALL
)
_TAIL_MEMBER = re.compile(
    rb'(?P<start>[,{])\s*"(?P<key>[^"\\]{1,16})"\s*:\s*(?P<value>' + _SIMPLE + rb")\s*\Z", re.DOTALL
)


def check_limit(max_result_bytes: Any) -> int:
    """``max_result_bytes`` when it is a positive whole number, else a ``ValueError`` saying so."""
    if isinstance(max_result_bytes, bool) or not isinstance(max_result_bytes, int) or max_result_bytes <= 0:
        raise ValueError(
            f"max_result_bytes must be a positive whole number of bytes, got {max_result_bytes!r}"
        )
    return max_result_bytes


def too_large_text(limit: int, size: int | None) -> str:
    """What a call whose answer was over ``limit`` fails with: the limit, the size when known,
    and how to raise the limit."""
    seen = f"it was {size} bytes" if size is not None else "it was more"
    return (
        f"the server's answer is larger than max_result_bytes ({limit} bytes; {seen}) and "
        "was dropped unread; pass load_mcp_tools options=McpOptions(max_result_bytes=...) "
        "with a larger limit to accept it"
    )


def too_large(request_id: str | int | None, limit: int, size: int | None) -> JSONRPCError:
    """The JSON-RPC error that stands in for the answer to ``request_id`` that was over ``limit``
    (``None``: an answer to no known request, which the SDK reads and ignores)."""
    return JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=ErrorData(code=RESULT_TOO_LARGE, message=too_large_text(limit, size)),
    )


def answer_id(head: bytes, tail: bytes) -> str | int | None:
    """The id of the JSON-RPC answer (a ``result`` or ``error``, no ``method``) whose first bytes
    are ``head`` and last bytes ``tail``, or ``None`` when it is a request, a notification or
    cannot be told.

    Only the top-level members before and after the message's one big value are read: the Python
    SDK writes ``jsonrpc`` and ``id`` before ``result``, the TypeScript SDK after it. So a message
    of any size costs two short regular-expression passes.
    """
    members = _head_members(head)
    members.update(_tail_members(tail))
    if b"method" in members or not members.keys() & {b"result", b"error"}:
        return None
    raw = members.get(b"id")
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def is_answer(head: bytes) -> bool | None:
    """Whether the JSON-RPC message whose first bytes are ``head`` answers a request (``result``
    or ``error``: ``True``) or is a request or notification of the server's (``method`` or
    ``params``: ``False``); ``None`` when its start does not tell."""
    keys = _head_members(head).keys()
    if keys & {b"method", b"params"}:
        return False
    return True if keys & {b"result", b"error"} else None


def _head_members(head: bytes) -> dict[bytes, bytes | None]:
    """The top-level members at the start of a message, up to its first object or array value
    (whose key is included, with ``None`` for its value)."""
    members: dict[bytes, bytes | None] = {}
    start = head.lstrip()
    if not start.startswith(b"{"):
        return members
    pos = len(head) - len(start) + 1
    while (match := _HEAD_MEMBER.match(head, pos)) is not None:
        members[match["key"]] = match["value"]
        if match["value"] is None or match["end"] == b"}":
            break
        pos = match.end()
    return members


def _tail_members(tail: bytes) -> dict[bytes, bytes | None]:
    """The top-level members at the end of a message, back to its last object or array value."""
    members: dict[bytes, bytes | None] = {}
    end = len(tail.rstrip())
    if not tail[:end].endswith(b"}"):
        return members
    end -= 1
    while (match := _TAIL_MEMBER.search(tail, 0, end)) is not None:
        members[match["key"]] = match["value"]
        if match["start"] == b"{":
            break
        end = match.start()
    return members

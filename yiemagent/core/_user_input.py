"""Reading what a caller sends to an agent: strings, OpenAI-style user dicts and ``UserMessage``s.

Bad input fails here, in the caller's thread, with an error that shows the accepted forms.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from yiemagent.core._content import ContentBlock, ImageContent, TextContent, content_to_dict
from yiemagent.core._messages import UserMessage

__all__ = ["openai_to_user_message", "parse_data_url"]

_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+);base64,(.*)$", re.DOTALL)


def parse_data_url(url: Any) -> tuple[str, str] | None:
    """``(mime_type, base64_data)`` of a ``data:<mime>;base64,<data>`` URL, else ``None``."""
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    return None if match is None else (match.group(1), match.group(2))


def _user_part(part: Any) -> ContentBlock:
    if isinstance(part, str):
        return TextContent(part)
    if isinstance(part, (TextContent, ImageContent)):
        return part
    if not isinstance(part, Mapping):
        raise TypeError(f"a content part must be a dict or a string, got {type(part).__name__}")
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return TextContent(part["text"])
    if kind == "image_url":
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, Mapping) else url
        parsed = parse_data_url(url)
        if parsed is None:
            raise ValueError(
                "an image_url part must hold a base64 data URL "
                "('data:image/png;base64,...'); remote URLs are not fetched"
            )
        return ImageContent(parsed[1], parsed[0])
    if kind == "image" and isinstance(part.get("data"), str):
        return ImageContent(part["data"], str(part.get("mime_type") or part.get("mimeType") or "image/png"))
    raise ValueError(
        f"unsupported content part {content_to_dict(dict(part))!r}; use "
        "{'type': 'text', 'text': ...} or {'type': 'image_url', 'image_url': "
        "{'url': 'data:...'}}"
    )


def openai_to_user_message(msg: Any) -> UserMessage:
    """Convert a user input to a ``UserMessage``; raise ``TypeError``/``ValueError`` if unusable.

    Accepts a string, a ``UserMessage`` (returned as is), or an OpenAI-style dict
    ``{"role": "user", "content": str | [parts]}`` with text and base64 image parts.
    """
    if isinstance(msg, UserMessage):
        return msg
    if isinstance(msg, str):
        return UserMessage([TextContent(msg)])
    if not isinstance(msg, Mapping):
        raise TypeError(
            "a message must be a string, a UserMessage or a dict like "
            f"{{'role': 'user', 'content': ...}}, got {type(msg).__name__}"
        )
    role = msg.get("role", "user")
    if role != "user":
        raise ValueError(f"only user messages can be sent to an agent, got role {role!r}")
    if "content" not in msg:
        raise ValueError("a user message dict needs a 'content' (a string or a list of parts)")
    content = msg["content"]
    if isinstance(content, str):
        return UserMessage([TextContent(content)])
    if not isinstance(content, list):
        raise TypeError(f"'content' must be a string or a list of parts, got {type(content).__name__}")
    return UserMessage([_user_part(p) for p in content])

"""The errors a provider client raises, and how an HTTP error reply becomes one.

Every message is built from text that already went through ``Secret.scrub``, so no error of this
module ever carries an api key; texts are cut only by ``excerpt``, which scrubs first. The
runtime turns a raised error into an error response whose ``error_message`` is
``f"{type(exc).__name__}: {exc}"`` (docs/design.md, decision 10).
"""

from __future__ import annotations

import json
from typing import Any

from yiemagent.errors import LlmAbortedError, LlmError, LlmStreamError, LlmTimeoutError
from yiemagent.llm.http._redact import excerpt

__all__ = [
    "LlmAbortedError",
    "LlmError",
    "LlmStreamError",
    "LlmTimeoutError",
    "error_object_text",
    "provider_error_text",
]

_MAX_TEXT = 500


def _short(text: str) -> str:
    return excerpt(" ".join(text.split()), _MAX_TEXT)


def error_object_text(error: Any) -> tuple[str | None, str | None]:
    """Return ``(message, type)`` of a provider's ``error`` value: OpenAI's and Anthropic's
    ``{"type" or "code", "message"}`` object, or Ollama's plain string; ``None`` where absent."""
    if isinstance(error, str):
        return error, None
    if isinstance(error, dict):
        message = error.get("message")
        kind = error.get("type") or error.get("code")
        return (str(message) if message is not None else None), (str(kind) if kind else None)
    return None, None


def provider_error_text(body: bytes | str) -> tuple[str, str | None]:
    """Return ``(message, error_type)`` from an error reply body of any provider.

    Reads OpenAI's and Anthropic's ``{"error": {"type", "message"}}``, Ollama's ``{"error": "..."}``
    and FastAPI's ``{"detail": ...}``; any other body gives its own text, shortened. Never raises.
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except ValueError:
        return _short(text), None
    if isinstance(data, dict):
        message, kind = error_object_text(data.get("error"))
        if message is None and data.get("message") is not None:
            message = str(data["message"])
        if message is None and data.get("detail") is not None:
            detail = data["detail"]
            message = detail if isinstance(detail, str) else json.dumps(detail)
        if message is not None:
            return _short(message), kind
    return _short(text), None

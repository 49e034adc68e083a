"""Reading a model's context window from an OpenAI-compatible server's model listing
(``GET {base_url}/models``), where the server gives one.

The servers that do each name it their own way: vLLM ``max_model_len``, OpenRouter and
LiteLLM's proxy ``context_length``, LM Studio ``max_context_length``, others ``context_window``
or ``n_ctx`` (directly or under ``meta``). OpenAI's own listing and llama-cpp-python's give
none (llama.cpp's ``n_ctx_train`` is what the model was trained with, not what the server
runs, so it is not read). A value that is not a positive integer is ignored: the listing is
the server's word, not ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["WINDOW_FIELDS", "listed_window"]

WINDOW_FIELDS = ("max_model_len", "context_length", "max_context_length", "context_window", "n_ctx")


def _entry(body: Any, model: str) -> Mapping[str, Any] | None:
    """The listing's entry for ``model``: the one whose ``id`` it is, else the only one."""
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, Mapping)]
    for entry in entries:
        if entry.get("id") == model:
            return entry
    return entries[0] if len(entries) == 1 else None


def _window_in(fields: Any) -> int | None:
    """The first of ``WINDOW_FIELDS`` in ``fields`` that is a positive integer."""
    if not isinstance(fields, Mapping):
        return None
    for name in WINDOW_FIELDS:
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def listed_window(body: Any, model: str) -> int | None:
    """The context window of ``model`` in a ``/models`` reply's decoded ``body``, or ``None``
    when the listing gives none for it."""
    entry = _entry(body, model)
    if entry is None:
        return None
    return _window_in(entry) or _window_in(entry.get("meta"))

"""``OutputRequest``: the part of an ``LlmRequest`` that asks the model for data."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["OutputRequest"]


@attrs.frozen
class OutputRequest:
    """What a provider client reads from ``LlmRequest.output`` in the ``native`` and
    ``grammar`` modes: the schema the reply's text must match (always an object) and its name.
    Provider-neutral: each client builds its own wire form of it (OpenAI's ``json_schema``,
    llama-cpp-python's ``json_object``); the spec view's is ``response_format_view``."""

    name: str
    schema: dict[str, Any]
    mode: str

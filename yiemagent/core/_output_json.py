"""A run's output as JSON-ready data, whatever type the caller asked for."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

import attrs

from yiemagent.core._json_safety import json_ready

__all__ = ["output_json"]


def output_json(value: Any) -> Any:
    """``value`` as JSON-ready data: a pydantic model by ``model_dump(mode="json")``, a
    dataclass or attrs instance field by field, an enum by its value, containers item by item,
    anything else as ``json_ready`` makes it. Never raises."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return json_ready(dump(mode="json"))
        except Exception:  # a broken model: fall through to its fields
            pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: output_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if attrs.has(type(value)):
        return {a.name: output_json(getattr(value, a.name)) for a in attrs.fields(type(value))}
    if isinstance(value, enum.Enum):
        return output_json(value.value)
    if isinstance(value, Mapping):
        return {str(k): output_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [output_json(v) for v in value]
    return json_ready(value)

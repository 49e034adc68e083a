"""Reading the fields of one streamed chunk or event with their kinds checked.

The stream assemblers read every field they use through a ``FieldReader``: a field holding the
wrong kind of JSON value (an ``index`` that is a list, an ``id`` that is an object, a ``delta``
that is a number) raises ``LlmStreamError`` naming the field by its path in the chunk
(``choices[0].delta.tool_calls[0].index``), what it should hold and what it holds, with the
chunk itself; never a ``TypeError``, and never a reply quietly built from garbage. ``null`` counts
as absent, as providers send it for fields that carry nothing. Such an error is final: a server
that sends a malformed chunk sends it again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from yiemagent.llm.http._errors import LlmStreamError
from yiemagent.llm.http._redact import excerpt

__all__ = ["FieldReader", "join"]

_MISSING: Any = object()
_T = TypeVar("_T")


def _shown(value: Any, limit: int) -> str:
    """``value`` as JSON text, shortened (and scrubbed) by ``excerpt``; a value nested too deep
    to write again is only called that."""
    try:
        return excerpt(json.dumps(value, ensure_ascii=False), limit)
    except (ValueError, TypeError, RecursionError):
        return "(a value nested too deep to show)"


class FieldReader:
    """Reads the fields of ``whole``, one decoded ``what`` (``"chunk"``, ``"event"``) of a
    ``label`` stream; each getter returns the field's value, ``None`` when it is absent or null,
    and raises ``LlmStreamError`` when it holds another kind of value. ``path`` arguments name
    the object a field is read from (``""`` for ``whole`` itself)."""

    __slots__ = ("_label", "_what", "_whole")

    def __init__(self, label: str, what: str, whole: Any) -> None:
        self._label = label
        self._what = what
        self._whole = whole

    def problem(self, text: str) -> LlmStreamError:
        """Return the error for a malformed ``whole``, ``text`` saying what is wrong with it."""
        return LlmStreamError(
            f"{self._label} stream sent a malformed {self._what}: {text} "
            f"({self._what}: {_shown(self._whole, 300)})"
        )

    def error(self, path: str, expected: str, value: Any = _MISSING) -> LlmStreamError:
        """Return the error for the field at ``path``, which must be ``expected`` but holds
        ``value`` (or is missing, when no value is given)."""
        name = path or f"the {self._what}"
        held = "missing" if value is _MISSING else _shown(value, 100)
        return self.problem(f"{name} must be {expected}, but is {held}")

    def absent(self, obj: Mapping[str, Any], key: str, path: str, expected: str) -> LlmStreamError:
        """Return the error for field ``key`` of ``obj``, which must be ``expected`` but is
        absent or null."""
        return self.error(join(path, key), expected, obj.get(key, _MISSING))

    def object(self, value: Any, path: str) -> Mapping[str, Any]:
        """Return ``value``, the object at ``path``; raise when it is not an object."""
        if not isinstance(value, Mapping):
            raise self.error(path, "an object", value)
        return value

    def text(self, obj: Mapping[str, Any], key: str, path: str) -> str | None:
        """Return ``obj[key]`` when it is a string."""
        return self._get(obj, key, path, str, "a string")

    def mapping(self, obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
        """Return ``obj[key]`` when it is an object."""
        return self._get(obj, key, path, Mapping, "an object")  # type: ignore[type-abstract]

    def items(self, obj: Mapping[str, Any], key: str, path: str) -> list[Any] | None:
        """Return ``obj[key]`` when it is a list."""
        return self._get(obj, key, path, list, "a list")

    def index(self, obj: Mapping[str, Any], key: str, path: str) -> int | None:
        """Return ``obj[key]`` when it is a whole number from 0 up (``true`` is not one, nor is
        ``1.0``: JSON writes positions as plain integers)."""
        value = obj.get(key)
        if value is None or (type(value) is int and value >= 0):
            return value
        raise self.error(join(path, key), "a whole number from 0 up", value)

    def _get(self, obj: Mapping[str, Any], key: str, path: str, kind: type[_T], expected: str) -> _T | None:
        value = obj.get(key)
        if value is None or isinstance(value, kind):
            return value
        raise self.error(join(path, key), expected, value)


def join(path: str, key: str) -> str:
    """The path of field ``key`` of the object at ``path`` (``choices[0]`` + ``delta``)."""
    return f"{path}.{key}" if path else key

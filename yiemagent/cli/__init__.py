"""The ``yiemagent`` command (also ``python -m yiemagent``): ``chat``, ``run`` and ``tools``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_main": ("build_parser", "main"),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.cli._main import build_parser as build_parser
    from yiemagent.cli._main import main as main

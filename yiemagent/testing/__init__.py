"""Testing aids: ``ScriptedModel``, an ``llm_call`` that answers from a list of replies, and (in
``yiemagent.testing.parity``) the conformance suite other implementations are checked with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_scripted": ("ScriptError", "ScriptExhaustedError", "ScriptedModel", "reply_message"),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.testing._scripted import ScriptedModel as ScriptedModel
    from yiemagent.testing._scripted import ScriptError as ScriptError
    from yiemagent.testing._scripted import ScriptExhaustedError as ScriptExhaustedError
    from yiemagent.testing._scripted import reply_message as reply_message

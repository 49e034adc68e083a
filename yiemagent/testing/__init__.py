"""Testing aids: ``ScriptedModel``, an ``llm_call`` that answers from a list of replies;
``record(llm_call, path)`` and ``replay(path)``, which write a real model's run to a cassette and
answer from it offline; and (in ``yiemagent.testing.parity``) the conformance suite other
implementations are checked with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_scripted": ("ScriptError", "ScriptExhaustedError", "ScriptedModel", "reply_message"),
        "_record": ("RecordingLlmCall", "record"),
        "_replay": ("ReplayLlmCall", "replay"),
        "_cassette": ("Cassette", "Interaction", "read_cassette"),
        "yiemagent.errors": ("CassetteError", "ReplayMismatchError"),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.errors import CassetteError as CassetteError
    from yiemagent.errors import ReplayMismatchError as ReplayMismatchError
    from yiemagent.testing._cassette import Cassette as Cassette
    from yiemagent.testing._cassette import Interaction as Interaction
    from yiemagent.testing._cassette import read_cassette as read_cassette
    from yiemagent.testing._record import RecordingLlmCall as RecordingLlmCall
    from yiemagent.testing._record import record as record
    from yiemagent.testing._replay import ReplayLlmCall as ReplayLlmCall
    from yiemagent.testing._replay import replay as replay
    from yiemagent.testing._scripted import ScriptedModel as ScriptedModel
    from yiemagent.testing._scripted import ScriptError as ScriptError
    from yiemagent.testing._scripted import ScriptExhaustedError as ScriptExhaustedError
    from yiemagent.testing._scripted import reply_message as reply_message

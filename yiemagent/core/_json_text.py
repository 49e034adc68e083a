"""Tool-call arguments as JSON text, cheaply: the spec's request view and the providers' wire
forms write them on every turn.
"""

from __future__ import annotations

import json
import threading
from typing import Any

__all__ = ["to_json"]

_PROBE = {"text": 'é\n"', "n": [1, 2.5, -0.0, True, None], "deep": {"k": 1e300}}


class _JsonEncoding(threading.local):
    """``JSONEncoder(ensure_ascii=False).encode`` without building a C encoder on every call,
    which is most of its cost for small arguments: each thread builds one, with its own table
    of the containers being encoded (so a cycle still raises ``ValueError``), and uses it again.
    Where ``json`` has no C part, the plain ``encode`` is used."""

    def __init__(self) -> None:
        self.encoder = json.JSONEncoder(ensure_ascii=False)
        self.markers: dict[int, Any] = {}
        make = getattr(json.encoder, "c_make_encoder", None)
        self.c_encode = None
        if make is not None:
            try:
                c_encode = make(
                    self.markers,
                    self.encoder.default,
                    json.encoder.encode_basestring,
                    None,
                    ": ",
                    ", ",
                    False,
                    False,
                    True,
                )
                # The C encoder's signature is not public: use it only if it encodes as
                # ``encode`` does on this Python.
                if "".join(c_encode(_PROBE, 0)) == self.encoder.encode(_PROBE):
                    self.c_encode = c_encode
            except Exception:  # another signature: keep the plain encoder
                self.markers.clear()

    def encode(self, value: Any) -> str:
        if self.c_encode is None:
            return self.encoder.encode(value)
        try:
            return "".join(self.c_encode(value, 0))
        except BaseException:
            self.markers.clear()  # what a failed encoding left there must not fail the next
            raise


_encoding = _JsonEncoding()


def to_json(value: Any) -> str:
    """``value`` as JSON text, exactly as ``json.JSONEncoder(ensure_ascii=False).encode`` writes
    it (``NaN`` included, a cycle a ``ValueError``), at a third of its cost for small values."""
    return _encoding.encode(value)

"""Keeping the api key out of reprs, logs, errors, events and traceback locals."""

from __future__ import annotations

import requests

__all__ = ["MASK", "MIN_SECRET_LENGTH", "ApiKeyAuth", "Secret"]

MASK = "***"
# Keys shorter than this are not secrets worth hiding (real provider keys run to dozens of
# characters), and masking one would garble every text it happens to occur in ("ct***" for "ctx").
MIN_SECRET_LENGTH = 8


class Secret:
    """An api key that never shows itself: ``repr``/``str`` give ``'***'`` (or ``None`` when unset).

    ``reveal()`` returns the key for the one place that needs it (``ApiKeyAuth``, as a request
    is sent);
    ``scrub(text)`` removes it from any text before that text goes into an error or a log line.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value or None

    def reveal(self) -> str | None:
        """Return the key itself, or ``None`` when no key is set."""
        return self._value

    def __bool__(self) -> bool:
        return self._value is not None

    def scrub(self, text: str) -> str:
        """Return ``text`` with every occurrence of the key replaced by ``***``; a key shorter
        than ``MIN_SECRET_LENGTH`` (8) characters is left in place, as is the text around it."""
        if (self._value is None or len(self._value) < MIN_SECRET_LENGTH
                or self._value not in text):
            return text
        return text.replace(self._value, MASK)

    def __repr__(self) -> str:
        return repr(MASK) if self._value is not None else "None"

    __str__ = __repr__

    def __reduce__(self) -> tuple[type[Secret], tuple[None]]:
        # Pickling (e.g. a saved object graph) never writes the key.
        return (Secret, (None,))


class ApiKeyAuth(requests.auth.AuthBase):
    """Session auth that puts the key into a request's ``header`` (after ``prefix``) as it is sent.

    Set as ``session.auth``, it keeps the key out of every dict the clients build: the headers
    they pass around, and so the locals of any frame a traceback shows, never hold it. It adds
    nothing when no key is set, and its ``repr`` masks the key.
    """

    def __init__(self, secret: Secret, header: str, prefix: str = "") -> None:
        self._secret = secret
        self.header = header
        self.prefix = prefix

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        key = self._secret.reveal()
        if key:
            request.headers[self.header] = f"{self.prefix}{key}"
        return request

    def __repr__(self) -> str:
        return f"ApiKeyAuth(header={self.header!r}, key={self._secret!r})"

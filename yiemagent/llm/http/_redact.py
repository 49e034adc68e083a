"""Keeping the api key out of reprs, logs, errors, events and traceback locals.

Texts are scrubbed before they are cut (``excerpt``): a cut made first could split the key and
leave a piece of it that no longer matches. Where a text was cut all the same (a body read only
in part, or cut before the key was known), a piece of the key at the cut is masked as the key.
Replies that hold the key are scrubbed by ``reply_scrub``, with these rules.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import requests

__all__ = [
    "CUT_MARK",
    "MASK",
    "MIN_PIECE_LENGTH",
    "MIN_SECRET_LENGTH",
    "ApiKeyAuth",
    "Secret",
    "excerpt",
    "key_end_at_start",
    "key_start_at_end",
]

MASK = "***"
CUT_MARK = "…"  # ends every text ``excerpt`` cut, so a later scrub knows where the cut is
# Keys shorter than this are not secrets worth hiding (real provider keys run to dozens of
# characters), and masking one would garble every text it happens to occur in ("ct***" for "ctx").
MIN_SECRET_LENGTH = 8
# A piece of the key this long at a cut counts as the key: shorter pieces give away too little
# to matter, and masking them would hit ordinary text ending in the key's first letters.
MIN_PIECE_LENGTH = 6

# The key of the reply being read on this thread (see Secret.active); None outside a request.
_active: contextvars.ContextVar[Secret | None] = contextvars.ContextVar(
    "yiemagent_active_secret", default=None
)


def key_start_at_end(text: str, key: str) -> int:
    """How many characters at the end of ``text`` are the start of ``key`` (a cut there split
    it), counting only pieces of ``MIN_PIECE_LENGTH`` or more and shorter than the key; 0 for
    none."""
    longest = min(len(key) - 1, len(text))  # the whole key is found otherwise
    if key[:MIN_PIECE_LENGTH] in text[-longest:]:
        for size in range(longest, MIN_PIECE_LENGTH - 1, -1):
            if text.endswith(key[:size]):
                return size
    return 0


def key_end_at_start(text: str, key: str) -> int:
    """How many characters at the start of ``text`` are the end of ``key``; as
    ``key_start_at_end``, the other way round."""
    longest = min(len(key) - 1, len(text))
    if key[-MIN_PIECE_LENGTH:] in text[:longest]:
        for size in range(longest, MIN_PIECE_LENGTH - 1, -1):
            if text.startswith(key[-size:]):
                return size
    return 0


def _mask_cut_piece(part: str, key: str, mask: str) -> str:
    """Return ``part`` (a text between two cuts) with a piece of ``key`` of ``MIN_PIECE_LENGTH``
    or more characters replaced by ``mask`` where the cut split it: the key's beginning at the
    end of ``part`` and the key's end at its start."""
    size = key_start_at_end(part, key)
    if size:
        part = part[:-size] + mask
    size = key_end_at_start(part, key)
    if size:
        part = mask + part[size:]
    return part


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

    def scrub(self, text: str, mask: str = MASK) -> str:
        """Return ``text`` with every occurrence of the key replaced by ``mask`` (``***``), and
        any piece of the key of ``MIN_PIECE_LENGTH`` (6) or more characters that a cut left (at
        the start or end of ``text``, or beside a ``CUT_MARK``) too. A key shorter than
        ``MIN_SECRET_LENGTH`` (8) characters is left in place, as is the text around it."""
        key = self._value
        if key is None or len(key) < MIN_SECRET_LENGTH:
            return text
        if key in text:
            text = text.replace(key, mask)
        # The start and end of any text count as cuts: it may be part of a longer one.
        return CUT_MARK.join(_mask_cut_piece(part, key, mask) for part in text.split(CUT_MARK))

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Make this the key that ``excerpt`` scrubs, on the current thread, inside the block.

        The transport wraps each request in it, so code that cuts a reply's text into an error
        (the parsers, which never see the key) scrubs before it cuts.
        """
        token = _active.set(self)
        try:
            yield
        finally:
            _active.reset(token)

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


def excerpt(text: str, limit: int) -> str:
    """Return ``text`` cut to ``limit`` characters plus ``CUT_MARK`` when longer, for an error.

    Inside ``Secret.active()`` the key is scrubbed before the cut, so the cut never splits it,
    and once more after it, for a piece that an echo of part of the key left at the cut.
    """
    secret = _active.get()
    if secret is not None:
        text = secret.scrub(text)
    if len(text) <= limit:
        return text
    text = text[:limit] + CUT_MARK
    return secret.scrub(text) if secret is not None else text

"""Masking keys in a recorded reply's streamed pieces so that no way of joining them spells one.

Each delta is one string, and scrubbing each on its own misses a key that came a few characters
at a time (the embedded model token by token, a server's SSE echo): the joined deltas spell it.
Here the deltas are joined the ways a reader could join them (each stream, the kind, block and
call a delta belongs to, and all of them in order), every occurrence of a key in a joined text
is found (and the key's start at its end, its end at its start, as ``Secret.scrub`` does for a
cut text), and the pieces are rewritten so that their concatenation is the joined text with
each such span replaced by the mask: the span's characters are dropped, and the mask is put in
the delta where the span starts. Deltas keep their number and order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from yiemagent.llm.http._redact import MASK, MIN_SECRET_LENGTH, Secret, key_end_at_start, key_start_at_end

__all__ = ["key_forms", "mask_deltas", "mask_pieces"]

Span = tuple[int, int]


def key_forms(secrets: Iterable[Secret]) -> list[str]:
    """Every form in which a key may appear in a text: as it is, and as JSON writes it inside a
    string (with and without non-ASCII escapes), for the keys long enough to be masked."""
    forms: list[str] = []
    for secret in secrets:
        key = secret.reveal()
        if key is None or len(key) < MIN_SECRET_LENGTH:
            continue
        for form in (key, json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1]):
            if form not in forms:
                forms.append(form)
    return forms


def _edge_piece(text: str, form: str) -> list[Span]:
    """The key's start at the end of ``text`` and its end at its start, as ``Secret.scrub``
    finds them: the joined text may itself be cut (a stopped stream)."""
    spans: list[Span] = []
    if size := key_start_at_end(text, form):
        spans.append((len(text) - size, len(text)))
    if size := key_end_at_start(text, form):
        spans.append((0, size))
    return spans


def _spans(text: str, forms: Sequence[str]) -> list[Span]:
    """The spans of ``text`` to mask, sorted and merged where they overlap or touch."""
    found: list[Span] = []
    for form in forms:
        start = text.find(form)
        while start != -1:
            found.append((start, start + len(form)))
            start = text.find(form, start + 1)
        found += _edge_piece(text, form)
    merged: list[Span] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def mask_pieces(pieces: Sequence[str], forms: Sequence[str]) -> list[str]:
    """``pieces`` rewritten so that their concatenation is theirs with every key (each of
    ``forms``) replaced by ``MASK``; the pieces themselves when their concatenation holds none."""
    spans = _spans("".join(pieces), forms)
    if not spans:
        return list(pieces)
    out: list[str] = []
    offset = 0
    first = 0  # the first span not wholly before the current piece (both run left to right)
    for piece in pieces:
        end = offset + len(piece)
        while first < len(spans) and spans[first][1] <= offset:
            first += 1
        kept: list[str] = []
        position = offset
        n = first
        while n < len(spans) and spans[n][0] < end:
            span_start, span_end = spans[n]
            if span_start >= position:
                kept.append(piece[position - offset : span_start - offset])
                kept.append(MASK)  # the span starts in this piece
            position = max(position, min(span_end, end))
            n += 1
        kept.append(piece[position - offset :])
        out.append("".join(kept))
        offset = end
    return out


def _stream_of(delta: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a delta belongs to: its kind, content block and tool call."""
    return (delta.get("kind"), delta.get("content_index"), delta.get("tool_call_id"))


def _text(delta: Mapping[str, Any]) -> str:
    """A delta's text (``""`` when it has none)."""
    text = delta.get("delta")
    return text if isinstance(text, str) else ""


def mask_deltas(deltas: Sequence[Mapping[str, Any]], forms: Sequence[str]) -> list[dict[str, Any]]:
    """The recorded ``deltas`` with their ``delta`` texts rewritten so that neither any one
    stream's joined texts nor all of them joined in order hold a key (see the module
    docstring); the other fields are kept."""
    out = [dict(d) for d in deltas]
    if not forms:
        return out
    texts: list[str] = [_text(d) for d in out]
    streams: dict[tuple[Any, ...], list[int]] = {}
    for n, delta in enumerate(out):
        streams.setdefault(_stream_of(delta), []).append(n)
    for indexes in streams.values():
        for n, text in zip(indexes, mask_pieces([texts[i] for i in indexes], forms), strict=True):
            texts[n] = text
    texts = mask_pieces(texts, forms)
    for delta, text in zip(out, texts, strict=True):
        if isinstance(delta.get("delta"), str):
            delta["delta"] = text
    return out

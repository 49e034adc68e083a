"""Masking the api key in what a server sends back: replies and their streamed deltas.

A server that echoes the key (a proxy that quotes the request, a model shown it) would put it
into the history, the events and so saved sessions and event logs. ``scrub_reply`` masks it in a
reply as ``REPLY_MASK`` with ``Secret.scrub``'s rules, and ``DeltaScrubber`` in the deltas of a
streamed one, holding back the end of a delta while it could be the start of the key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs

from yiemagent.core._content import MessageContent
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage
from yiemagent.llm.http._redact import MIN_PIECE_LENGTH, MIN_SECRET_LENGTH, Secret

__all__ = ["REPLY_MASK", "DeltaScrubber", "scrub_reply"]

logger = logging.getLogger("yiemagent.llm")

# What stands for the key in a reply: the user reads it there, so it says what happened.
REPLY_MASK = "[api key masked]"


def scrub_reply(reply: AssistantMessage, secret: Secret) -> AssistantMessage:
    """Return ``reply`` with the key replaced by ``REPLY_MASK`` in every text it holds (``scrub``'s
    rules): the text of each block, every string of a tool call's arguments or a raw dict block
    (keys too, however deep), its ids and names, and the reply's own ``model`` and
    ``error_message``. A reply without the key (nearly all) is returned as it is; one with it is
    logged as a warning (which never shows the key), since only a server that echoes it back
    puts it there."""
    if not secret:
        return reply

    def scrub(text: str) -> str:
        return secret.scrub(text, REPLY_MASK)

    changes = _scrubbed_fields(reply, scrub, skip="content")
    content = [_scrubbed_block(block, scrub) for block in reply.content]
    if any(new is not old for new, old in zip(content, reply.content, strict=True)):
        changes["content"] = content
    if not changes:
        return reply
    logger.warning(
        "the reply held the api key (the server echoed it); it is masked as %s in the reply and the history",
        REPLY_MASK,
    )
    return attrs.evolve(reply, **changes)


def _scrubbed_fields(instance: Any, scrub: Callable[[str], str], skip: str = "") -> dict[str, Any]:
    """The fields of the attrs ``instance`` that ``scrub`` changes, with their scrubbed values
    (strings, and the JSON data of a tool call's arguments); ``skip`` names one to leave out."""
    changes: dict[str, Any] = {}
    for field in attrs.fields(type(instance)):
        if field.name == skip:
            continue
        value = getattr(instance, field.name)
        new = _scrubbed_data(value, scrub)
        if new is not value:
            changes[field.name] = new
    return changes


def _scrubbed_block(block: Any, scrub: Callable[[str], str]) -> Any:
    """``block`` with the key scrubbed out of it; the same object when it holds none."""
    if isinstance(block, MessageContent):
        changes = _scrubbed_fields(block, scrub)
        return attrs.evolve(block, **changes) if changes else block
    return _scrubbed_data(block, scrub)


def _scrubbed_data(value: Any, scrub: Callable[[str], str]) -> Any:
    """``value`` (a string or JSON data: dicts, lists, scalars) with ``scrub`` applied to every
    string in it, dict keys too; the same object when nothing changes. Containers are walked
    with a stack, not recursion, so data nested however deep cannot raise ``RecursionError``."""
    if isinstance(value, str):
        new = scrub(value)
        return value if new == value else new
    if not isinstance(value, (dict, list)) or not _holds_change(value, scrub):
        return value
    root = _shallow_copy(value)
    stack = [root]
    while stack:  # each node is a new copy, whose items are scrubbed (and copied) in place
        node = stack.pop()
        if isinstance(node, dict):
            entries = list(node.items())
            node.clear()
            for key, item in entries:
                node[scrub(key) if isinstance(key, str) else key] = _copied(item, scrub, stack)
        else:
            for index, item in enumerate(node):
                node[index] = _copied(item, scrub, stack)
    return root


def _copied(item: Any, scrub: Callable[[str], str], stack: list[Any]) -> Any:
    """``item`` scrubbed when a string; a shallow copy, put on ``stack`` to be walked, when a
    container; else ``item`` itself."""
    if isinstance(item, str):
        return scrub(item)
    if isinstance(item, (dict, list)):
        copy = _shallow_copy(item)
        stack.append(copy)
        return copy
    return item


def _shallow_copy(value: dict[Any, Any] | list[Any]) -> dict[Any, Any] | list[Any]:
    return dict(value) if isinstance(value, dict) else list(value)


def _holds_change(value: dict[Any, Any] | list[Any], scrub: Callable[[str], str]) -> bool:
    """Whether ``scrub`` changes any string in the container ``value`` (walked with a stack)."""
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        items = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        for item in items:
            if isinstance(item, str):
                if scrub(item) != item:
                    return True
            elif isinstance(item, (dict, list)):
                stack.append(item)
    return False


class DeltaScrubber:
    """An ``on_update`` callback that passes streamed deltas on with the key masked.

    Each stream (one kind and block index) is scrubbed as one text: a key split across deltas is
    masked too. A delta ending in ``MIN_PIECE_LENGTH`` (6) or more of the key's first characters
    keeps them back until the next delta shows whether the key follows; a shorter start of the
    key is passed on, and the rest of the key, when it follows, masked. Every delta is passed on
    (its text may be empty); ``finish`` (called once the reply is read, and when another stream
    begins) passes on what is held, masked: a stream that ends in a piece of the key that long
    ends in ``REPLY_MASK``, as ``scrub_reply`` ends the reply's text. Calls come from one thread.
    """

    def __init__(self, on_update: Callable[[MessageUpdateEvent], None], secret: Secret) -> None:
        self._on_update = on_update
        self._secret = secret
        self._stream: tuple[str, int] | None = None
        self._shown = ""  # the end of what this stream passed on, where a key may have begun
        self._held = ""
        self._last: MessageUpdateEvent | None = None

    def __call__(self, event: MessageUpdateEvent) -> None:
        key = self._secret.reveal() or ""
        if len(key) < MIN_SECRET_LENGTH:  # not scrubbed anywhere (see Secret.scrub)
            self._on_update(event)
            return
        stream = (event.kind, event.content_index)
        if stream != self._stream:
            self.finish()
            self._stream = stream
        text = _mask_across(self._shown, self._held + event.delta, key).replace(key, REPLY_MASK)
        held = min(_key_start_at_end(self._shown + text, key), len(text))
        out, self._held = text[: len(text) - held], text[len(text) - held :]
        self._shown = (self._shown + out)[-(len(key) - 1) :]
        self._last = event
        self._on_update(event if out == event.delta else attrs.evolve(event, delta=out))

    def finish(self) -> None:
        """Pass on what the current stream holds back (a piece of the key: masked), and start
        afresh."""
        if self._held and self._last is not None:
            self._on_update(attrs.evolve(self._last, delta=REPLY_MASK))
        self._stream, self._shown, self._held, self._last = None, "", "", None


def _mask_across(shown: str, text: str, key: str) -> str:
    """``text`` with the rest of a key that began in ``shown`` (the end of what was passed on)
    replaced by ``REPLY_MASK``."""
    window = shown + text
    for start in range(len(shown)):
        if window.startswith(key, start):
            return REPLY_MASK + text[start + len(key) - len(shown) :]
    return text


def _key_start_at_end(text: str, key: str) -> int:
    """The length of the longest start of ``key`` (shorter than the key, at least
    ``MIN_PIECE_LENGTH`` long) that ``text`` ends with; 0 when there is none."""
    if key[:MIN_PIECE_LENGTH] not in text[-(len(key) - 1) :]:  # nearly always: no need to look
        return 0
    for size in range(min(len(key) - 1, len(text)), MIN_PIECE_LENGTH - 1, -1):
        if text.endswith(key[:size]):
            return size
    return 0

"""Cassette files: a recorded run of a model as versioned JSON, checked against the shipped schema.

A cassette is ``{"format": "yiemagent-cassette", "version": 2, "interactions": [...]}``; each
interaction holds one call's ``request`` (``CassetteForm``'s form) and either its ``reply`` (with
the streamed ``deltas``, when there were any) or the ``error`` it raised. The text is written the
same way every time (two-space indents, keys in a fixed order, no timestamps), so two recordings
of the same run are the same file and a changed run diffs line by line in a review.

A request is stored as what it adds to the one before (version 2): ``kept``, how many of the
previous request's messages it starts with, then only its own ``messages``, and its ``tools``
only when they differ from the previous request's. A run's cassette so grows with the messages
added, not with the square of its length. Reading expands every request back to its whole form;
version 1 files, which hold whole requests, still read.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import attrs

from yiemagent.core._messages import AssistantMessage
from yiemagent.errors import CassetteError, FileProblem, describe_error, problem_lines
from yiemagent.testing.parity._files import parse_json, printable, read_text
from yiemagent.testing.parity._scenario import validation_problems

__all__ = [
    "CASSETTE_FORMAT",
    "CASSETTE_VERSION",
    "Cassette",
    "Interaction",
    "cassette_text",
    "dump_cassette",
    "interaction_text",
    "read_cassette",
    "shared_prefix",
    "shared_with",
    "stored_interaction",
    "write_cassette",
]

CASSETTE_FORMAT = "yiemagent-cassette"
CASSETTE_VERSION = 2
READABLE_VERSIONS = (1, 2)
# The messages all of a version-2 cassette's requests may hold once put back together: a small
# file whose every request keeps a long history could otherwise fill the memory. A 16 MiB
# version-1 file, whose requests were whole, held well under a million.
MAX_EXPANDED_MESSAGES = 5_000_000


@attrs.frozen
class Interaction:
    """One recorded call: the ``request`` in the cassette's form, and the ``reply`` (its dict
    form, without timestamp) with its streamed ``deltas``, or the ``error`` it raised
    (``{"type", "message", "status"?}``)."""

    request: dict[str, Any]
    reply: dict[str, Any] | None = None
    deltas: list[dict[str, Any]] = attrs.field(factory=list)
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The interaction as the file holds it (``deltas`` only when there are any)."""
        data: dict[str, Any] = {"request": self.request}
        if self.error is not None:
            data["error"] = self.error
        else:
            data["reply"] = self.reply
            if self.deltas:
                data["deltas"] = self.deltas
        return data

    def message(self, timestamp: int) -> AssistantMessage:
        """The recorded reply as an ``AssistantMessage`` stamped ``timestamp``."""
        data = {**(self.reply or {}), "role": "assistant", "timestamp": timestamp}
        return cast(AssistantMessage, AssistantMessage.from_dict(data))


@attrs.frozen
class Cassette:
    """A whole cassette: its interactions in call order, and the file it came from, if any."""

    interactions: list[Interaction]
    source: str = "<cassette>"

    def to_dict(self) -> dict[str, Any]:
        """The cassette as the file holds it: each request as what it adds to the one before."""
        stored: list[dict[str, Any]] = []
        previous: Mapping[str, Any] | None = None
        for interaction in self.interactions:
            stored.append(stored_interaction(interaction, *shared_with(previous, interaction.request)))
            previous = interaction.request
        return {"format": CASSETTE_FORMAT, "version": CASSETTE_VERSION, "interactions": stored}


def shared_prefix(before: Sequence[Any], after: Sequence[Any]) -> int:
    """How many leading items ``after`` shares (the same or equal) with ``before``."""
    size = min(len(before), len(after))
    i = 0
    while i < size and (before[i] is after[i] or before[i] == after[i]):
        i += 1
    return i


def shared_with(previous: Mapping[str, Any] | None, request: Mapping[str, Any]) -> tuple[int, bool]:
    """How many leading messages ``request`` shares with ``previous`` (the request stored
    before it), and whether their tools are the same; ``(0, False)`` for the first request."""
    if previous is None:
        return 0, False
    kept = shared_prefix(previous.get("messages") or [], request.get("messages") or [])
    return kept, request.get("tools") == previous.get("tools")


def stored_interaction(interaction: Interaction, kept: int, same_tools: bool) -> dict[str, Any]:
    """``interaction`` as the file holds it: its request as what it adds to the previous one
    (``kept`` messages of it, the tools left out when ``same_tools``)."""
    data = interaction.to_dict()
    request: dict[str, Any] = {}
    for key, value in interaction.request.items():
        if key == "messages":
            request["kept"] = kept
            request["messages"] = list(value)[kept:]
        elif key != "tools" or not same_tools:
            request[key] = value
    data["request"] = request
    return data


def _expanded(stored: Mapping[str, Any], previous: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """A version-2 request whole again: the previous request's first ``kept`` messages and its
    tools where it left them out. ``FileProblem`` when ``kept`` or a missing ``tools`` cannot be
    (more messages than the previous request had, no previous request)."""
    kept = stored.get("kept", 0)
    before = list(previous["messages"]) if previous is not None else []
    if kept > len(before):
        raise FileProblem(
            f"keeps {kept} messages of the previous request, which had {len(before)}", f"{where}.kept"
        )
    request = {k: v for k, v in stored.items() if k != "kept"}
    request["messages"] = before[:kept] + list(stored["messages"])
    if "tools" not in stored:
        if previous is None:
            raise FileProblem("the first request must list its tools", f"{where}.tools")
        request["tools"] = previous["tools"]
    return request


_EXPANDED_OBJECTS = 3  # objects down to a request or reply get a line per field
_EXPANDED_LISTS = 4  # lists down to a request's messages get a line per item


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _dump(value: Any, depth: int) -> str:
    """``value`` as JSON: the outer objects a line per field, the lists in them a line per item
    (a message, a tool, a delta), anything deeper on one line."""
    pad = "  " * (depth + 1)
    end = "  " * depth
    if isinstance(value, dict) and value and depth <= _EXPANDED_OBJECTS:
        fields = [f"{pad}{_compact(k)}: {_dump(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(fields) + f"\n{end}}}"
    if isinstance(value, list) and value and depth <= _EXPANDED_LISTS:
        items = [f"{pad}{_dump(v, depth + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{end}]"
    return _compact(value)


def interaction_text(stored: Mapping[str, Any]) -> str:
    """One interaction's text, as ``stored_interaction`` gives it, the way ``dump_cassette``
    writes it inside the list (a recorder keeps it, so a cassette rewritten after every call
    serialises each call once)."""
    return _dump(dict(stored), 2)


def cassette_text(interactions: Sequence[str]) -> str:
    """The text of a cassette made of ``interaction_text`` pieces."""
    head = f'{{\n  "format": "{CASSETTE_FORMAT}",\n  "version": {CASSETTE_VERSION},\n  "interactions": '
    if not interactions:
        return head + "[]\n}\n"
    return head + "[\n" + ",\n".join(f"    {t}" for t in interactions) + "\n  ]\n}\n"


def dump_cassette(cassette: Cassette) -> str:
    """The cassette's text: the outer objects a line per field, each message, tool, content
    block and delta on a line of its own (so a changed run diffs line by line), non-ASCII
    kept, a final newline."""
    return cassette_text([interaction_text(i) for i in cassette.to_dict()["interactions"]])


def write_cassette(path: str | os.PathLike[str], cassette: Cassette | str) -> None:
    """Write ``cassette`` (or a cassette's text) to ``path`` atomically (a file beside it, then
    renamed), so a reader or a crash never sees half a cassette; ``CassetteError`` naming the
    path when it cannot."""
    target = Path(path)
    text = cassette if isinstance(cassette, str) else dump_cassette(cassette)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise CassetteError(
            f"cannot write the cassette {printable(str(target))}: {exc.strerror or exc}; "
            "give a path in a folder that exists and can be written"
        ) from None


def _refused(source: str, problems: Sequence[tuple[str, str]]) -> CassetteError:
    return CassetteError(
        f"{printable(source)}: not a usable cassette (record it again with record() or "
        f"yiemagent run --record):\n{problem_lines(problems)}"
    )


def _interaction(data: Mapping[str, Any], index: int, source: str, request: dict[str, Any]) -> Interaction:
    interaction = Interaction(
        request=request,
        reply=dict(data["reply"]) if "reply" in data else None,
        deltas=[dict(d) for d in data.get("deltas", [])],
        error=dict(data["error"]) if "error" in data else None,
    )
    if interaction.reply is not None:
        try:
            interaction.message(0)
        except (TypeError, ValueError) as exc:
            raise _refused(source, [(f"$.interactions[{index}].reply", describe_error(exc))]) from None
    return interaction


def read_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Read and check the cassette at ``path``: the file (a regular UTF-8 file of at most 16
    MiB), its JSON, the schema and every reply. Raises ``CassetteError`` naming the file and the
    JSON path of each bad field, never a bare traceback."""
    source = os.fspath(path)
    try:
        data = parse_json(read_text(source))
    except FileProblem as exc:
        raise _refused(source, [(exc.where, str(exc))]) from None
    if isinstance(data, Mapping) and data.get("format") == CASSETTE_FORMAT:
        version = data.get("version")
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            readable = " and ".join(str(v) for v in READABLE_VERSIONS)
            raise _refused(
                source, [("$.version", f"version {version!r} is not one this yiemagent reads ({readable})")]
            )
    problems = validation_problems(data, "cassette")
    if problems:
        raise _refused(source, problems)
    try:
        requests = _requests(data["interactions"], data["version"])
    except FileProblem as exc:
        raise _refused(source, [(exc.where, str(exc))]) from None
    return Cassette(
        [_interaction(item, i, source, requests[i]) for i, item in enumerate(data["interactions"])], source
    )


def _requests(interactions: Sequence[Mapping[str, Any]], version: int) -> list[dict[str, Any]]:
    """Every interaction's whole request: as stored in version 1, expanded in version 2."""
    requests: list[dict[str, Any]] = []
    total = 0
    for index, item in enumerate(interactions):
        where = f"$.interactions[{index}].request"
        stored = item["request"]
        total += stored.get("kept", 0) + len(stored["messages"])
        if total > MAX_EXPANDED_MESSAGES:
            raise FileProblem(
                f"its requests hold more than {MAX_EXPANDED_MESSAGES:,} messages in all once put back "
                "together; split the run into shorter recordings",
                "$.interactions",
            )
        if version == 1:
            if "kept" in stored:
                raise FileProblem("is not part of a version 1 request", f"{where}.kept")
            if "tools" not in stored:
                raise FileProblem("a version 1 request must list its tools", f"{where}.tools")
            requests.append(dict(stored))
        else:
            requests.append(_expanded(stored, requests[-1] if requests else None, where))
    return requests

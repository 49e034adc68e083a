"""Conversation messages, token usage and model descriptions (spec section 18, message types).

Messages are frozen attrs classes. ``to_dict`` gives a JSON-ready dict and ``from_dict`` rebuilds
an equal message, so histories can be saved and compared losslessly.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Iterable, Iterator, Mapping, MutableSequence, Sequence
from typing import Any, ClassVar, overload

import attrs

from yiemagent.core._content import (
    ContentBlock,
    ContentInput,
    content_from_dict,
    content_list,
    content_to_dict,
)
from yiemagent.core._output_json import output_json

__all__ = [
    "AgentMessage",
    "AssistantMessage",
    "HistoryView",
    "LlmModel",
    "LlmUsage",
    "ToolResultMessage",
    "UserMessage",
    "now_ms",
]


# Building a frozen message from fields already checked: the object, then each slot.
_new = object.__new__
_set = object.__setattr__


def now_ms() -> int:
    """Milliseconds since the Unix epoch, the timestamp unit of every message."""
    return time.time_ns() // 1_000_000


def _token_count(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"LlmUsage.{attr.name} must be a whole number of tokens, got {value!r:.60}")
    if value < 0:
        raise ValueError(f"LlmUsage.{attr.name} must be 0 or more, got {value}")


def _cost(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"LlmUsage.{attr.name} must be a number, got {value!r:.60}")
    if not 0 <= value < float("inf"):
        raise ValueError(f"LlmUsage.{attr.name} must be a finite number, 0 or more, got {value}")


@attrs.define(frozen=True)
class LlmUsage:
    """Token counts (and optional cost) reported by a provider for one call. Each count is an
    ``int`` of 0 or more and the cost a finite number of 0 or more (else ``TypeError`` for the
    wrong type, ``ValueError`` for a negative or non-finite value), so usage read from a file or
    a server always adds up."""

    input: int = attrs.field(default=0, validator=_token_count)
    output: int = attrs.field(default=0, validator=_token_count)
    cache_read: int = attrs.field(default=0, validator=_token_count)
    cache_write: int = attrs.field(default=0, validator=_token_count)
    total_tokens: int = attrs.field(default=0, validator=_token_count)
    cost: float = attrs.field(default=0.0, validator=_cost)

    def to_dict(self) -> dict[str, Any]:
        """Return the usage as a JSON-ready dict."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LlmUsage:
        """Rebuild usage from ``to_dict`` output; missing counts are zero."""
        if not isinstance(data, Mapping):
            raise TypeError(f"usage must be an object of token counts, got {type(data).__name__}")
        names = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _usage_or_none(data: Mapping[str, Any] | None) -> LlmUsage | None:
    return None if data is None else LlmUsage.from_dict(data)


@attrs.define(frozen=True)
class LlmModel:
    """Which model an agent talks to; only ``name`` is essential."""

    name: str
    provider: str = ""
    api: str = ""
    base_url: str | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    reasoning: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return the model description as a JSON-ready dict."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LlmModel:
        """Rebuild a model description from ``to_dict`` output."""
        names = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _check_timestamp(_inst: Any, _attr: Any, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            f"timestamp must be an int (milliseconds since the epoch), got {value!r}; "
            "pass content first, e.g. UserMessage([TextContent('hi')])"
        )


# One converter per class, so that a bad ``content`` is refused naming the class and the field
# (named functions, which mypy's attrs plugin reads, unlike an ``attrs.Converter``).
def _user_content(value: ContentInput) -> list[ContentBlock]:
    return content_list(value, "UserMessage.content")


def _assistant_content(value: ContentInput) -> list[ContentBlock]:
    return content_list(value, "AssistantMessage.content")


def _result_content(value: ContentInput) -> list[ContentBlock]:
    return content_list(value, "ToolResultMessage.content")


def _check_role(expected: str) -> Any:
    def check(_inst: Any, _attr: Any, value: str) -> None:
        if value != expected:
            raise ValueError(f"role must be {expected!r}, got {value!r}")

    return check


def _check_fields(msg: Any, strings: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """Raise ``TypeError`` naming the first field of ``strings`` that is not a ``str`` (or of
    ``optional`` that is neither ``str`` nor ``None``), and for a ``usage`` that is not usage.
    Catches arguments given in the wrong order, e.g. the spec's role-first order."""
    for name in strings:
        value = getattr(msg, name)
        if type(value) is not str and not isinstance(value, str):
            raise TypeError(
                f"{type(msg).__name__}.{name} must be a str, got {type(value).__name__} "
                f"({value!r:.60}); pass fields by name, e.g. "
                f"{type(msg).__name__}(content=[TextContent('hi')])"
            )
    for name in optional:
        value = getattr(msg, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"{type(msg).__name__}.{name} must be a str or None, got "
                f"{type(value).__name__} ({value!r:.60})"
            )
    usage = getattr(msg, "usage", None)
    if usage is not None and not isinstance(usage, LlmUsage):
        raise TypeError(f"{type(msg).__name__}.usage must be an LlmUsage or None, got {type(usage).__name__}")


@attrs.define(frozen=True)
class AgentMessage:
    """Base class of every conversation message (spec ``agentMessage``)."""

    role_name: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """Return the message as a JSON-ready dict with a ``role`` key."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentMessage:
        """Rebuild a message from ``to_dict`` output, choosing the class by ``role``."""
        role = data.get("role")
        for sub in (UserMessage, AssistantMessage, ToolResultMessage):
            if role == sub.role_name and issubclass(sub, cls):
                return sub._from_dict(data)
        expected = cls.role_name or "user, assistant or toolResult"
        raise ValueError(
            f"cannot read a message of role {role!r} as {cls.__name__}; expected role {expected}"
        )

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> AgentMessage:
        raise NotImplementedError


def _contents(data: Mapping[str, Any]) -> list[ContentBlock]:
    return [content_from_dict(block) for block in data.get("content") or []]


def _str_or(value: Any, default: str) -> str:
    return default if value is None else str(value)


def _timestamp(data: Mapping[str, Any]) -> int:
    # ``is None``, not ``or``: a timestamp of 0 is a value to keep, not a missing one.
    value = data.get("timestamp")
    return now_ms() if value is None else int(value)


@attrs.define(frozen=True)
class UserMessage(AgentMessage):
    """A user turn (spec ``userMessage``); a string ``content`` becomes one text block."""

    content: list[ContentBlock] = attrs.field(converter=_user_content, factory=list)
    timestamp: int = attrs.field(factory=now_ms, validator=_check_timestamp)
    role: str = attrs.field(default="user", kw_only=True, validator=_check_role("user"))
    role_name: ClassVar[str] = "user"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"role": "user", "content": [...], "timestamp": ...}``."""
        return {
            "role": "user",
            "content": [content_to_dict(b) for b in self.content],
            "timestamp": self.timestamp,
        }

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> UserMessage:
        return cls(content=_contents(data), timestamp=_timestamp(data))


@attrs.define(frozen=True)
class AssistantMessage(AgentMessage):
    """A model reply (spec ``assistantMessage``): content blocks plus provider metadata."""

    # A field added here must be added to ``_with_checked_content`` too (tests check it).
    content: list[ContentBlock] = attrs.field(converter=_assistant_content, factory=list)
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: LlmUsage | None = None
    stop_reason: str = "stop"
    error_message: str | None = None
    timestamp: int = attrs.field(factory=now_ms, validator=_check_timestamp)
    role: str = attrs.field(default="assistant", kw_only=True, validator=_check_role("assistant"))
    # A run's structured answer (docs/output.md): set on the run's response only, never on the
    # reply kept in the history, so sessions hold plain data. ``object``, not ``Any``: it is
    # whatever the run's output_schema converts to, so a reader narrows it (isinstance, cast).
    output: object = attrs.field(default=None, kw_only=True)
    # A run's totals (a ``usage.RunUsage``), set on the run's response when the run ends; not
    # compared and not in ``to_dict`` (the agent_end event and the CLI's --json carry it).
    run_usage: Any = attrs.field(default=None, kw_only=True, eq=False, repr=False)
    role_name: ClassVar[str] = "assistant"

    def __attrs_post_init__(self) -> None:
        _check_fields(self, ("api", "provider", "model", "stop_reason"), ("error_message",))

    def _with_checked_content(self, content: list[ContentBlock]) -> AssistantMessage:
        """This reply with ``content`` in its place: what ``attrs.evolve(self, content=...)``
        gives, without running the converter and checks again on fields checked when this
        reply was built. ``content`` must be a new list of checked blocks (``content_list``'s
        output). A subclass, which may check fields of its own, goes through ``attrs.evolve``."""
        cls = type(self)
        if cls is not AssistantMessage:
            return attrs.evolve(self, content=content)
        msg = _new(cls)
        _set(msg, "content", content)
        _set(msg, "api", self.api)
        _set(msg, "provider", self.provider)
        _set(msg, "model", self.model)
        _set(msg, "usage", self.usage)
        _set(msg, "stop_reason", self.stop_reason)
        _set(msg, "error_message", self.error_message)
        _set(msg, "timestamp", self.timestamp)
        _set(msg, "role", self.role)
        _set(msg, "output", self.output)
        _set(msg, "run_usage", self.run_usage)
        return msg

    def to_dict(self) -> dict[str, Any]:
        """Return the reply as a JSON-ready dict (usage as a nested dict or ``None``); a run's
        ``output``, when set, as ``"output"`` in its JSON form (an instance as its fields)."""
        data = {
            "role": "assistant",
            "content": [content_to_dict(b) for b in self.content],
            "api": self.api,
            "provider": self.provider,
            "model": self.model,
            "usage": None if self.usage is None else self.usage.to_dict(),
            "stop_reason": self.stop_reason,
            "error_message": self.error_message,
            "timestamp": self.timestamp,
        }
        if self.output is not None:
            data["output"] = output_json(self.output)
        return data

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> AssistantMessage:
        return cls(
            content=_contents(data),
            api=str(data.get("api") or ""),
            provider=str(data.get("provider") or ""),
            model=str(data.get("model") or ""),
            usage=_usage_or_none(data.get("usage")),
            stop_reason=_str_or(data.get("stop_reason"), "stop"),
            error_message=data.get("error_message"),
            timestamp=_timestamp(data),
            output=data.get("output"),
        )


@attrs.define(frozen=True)
class ToolResultMessage(AgentMessage):
    """The result of one tool call as it enters the history (spec ``toolResultMessage``).

    The role is ``"toolResult"`` inside the library; ``format_msg_for_llm`` sends it as ``"tool"``.
    """

    # A field added here must be added to ``_checked_fields`` too (tests check it).
    tool_call_id: str
    tool_name: str
    content: list[ContentBlock] = attrs.field(converter=_result_content, factory=list)
    details: dict[str, Any] = attrs.field(factory=dict)
    usage: LlmUsage | None = None
    added_tool_names: list[str] = attrs.field(factory=list)
    is_error: bool = False
    timestamp: int = attrs.field(factory=now_ms, validator=_check_timestamp)
    role: str = attrs.field(default="toolResult", kw_only=True, validator=_check_role("toolResult"))
    # Beyond the spec: the whole text of a result that max_tool_result_chars cut (the model saw
    # its start), kept here rather than in the tool's own details, which stay as the tool made them.
    full_text: str | None = attrs.field(default=None, kw_only=True)
    role_name: ClassVar[str] = "toolResult"

    def __attrs_post_init__(self) -> None:
        _check_fields(self, ("tool_call_id", "tool_name"))
        if self.full_text is not None and not isinstance(self.full_text, str):
            raise TypeError(
                f"ToolResultMessage.full_text must be a str or None, got {type(self.full_text).__name__}"
            )
        if not isinstance(self.details, dict):
            raise TypeError(f"ToolResultMessage.details must be a dict, got {type(self.details).__name__}")
        if type(self.is_error) is not bool:
            raise TypeError(f"ToolResultMessage.is_error must be a bool, got {self.is_error!r}")
        if not isinstance(self.added_tool_names, list) or not all(
            isinstance(n, str) for n in self.added_tool_names
        ):
            raise TypeError(
                f"ToolResultMessage.added_tool_names must be a list of str, got {self.added_tool_names!r:.60}"
            )

    @classmethod
    def _checked_fields(
        cls,
        tool_call_id: str,
        tool_name: str,
        content: list[ContentBlock],
        details: dict[str, Any],
        usage: LlmUsage | None,
        added_tool_names: list[str],
        is_error: bool,
        timestamp: int,
    ) -> ToolResultMessage:
        """A result built from fields its caller has already checked (the tool pipeline, which
        made them itself), skipping the converter and the checks of ``__init__``: equal to
        ``ToolResultMessage(...)`` of the same fields, and a few microseconds cheaper on every
        tool call. ``content`` must be a new list of blocks, not shared with anything."""
        msg = _new(cls)
        _set(msg, "tool_call_id", tool_call_id)
        _set(msg, "tool_name", tool_name)
        _set(msg, "content", content)
        _set(msg, "details", details)
        _set(msg, "usage", usage)
        _set(msg, "added_tool_names", added_tool_names)
        _set(msg, "is_error", is_error)
        _set(msg, "timestamp", timestamp)
        _set(msg, "role", "toolResult")
        _set(msg, "full_text", None)
        return msg

    def to_dict(self) -> dict[str, Any]:
        """Return the result as a JSON-ready dict (details deep-copied)."""
        return {
            "role": "toolResult",
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "content": [content_to_dict(b) for b in self.content],
            "details": copy.deepcopy(self.details),
            "usage": None if self.usage is None else self.usage.to_dict(),
            "added_tool_names": list(self.added_tool_names),
            "is_error": self.is_error,
            "timestamp": self.timestamp,
            **({"full_text": self.full_text} if self.full_text is not None else {}),
        }

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> ToolResultMessage:
        full_text = data.get("full_text")
        return cls(
            tool_call_id=str(data.get("tool_call_id", "")),
            tool_name=str(data.get("tool_name", "")),
            content=_contents(data),
            details=copy.deepcopy(dict(data.get("details") or {})),
            usage=_usage_or_none(data.get("usage")),
            added_tool_names=list(data.get("added_tool_names") or []),
            is_error=bool(data.get("is_error", False)),
            timestamp=_timestamp(data),
            full_text=full_text if isinstance(full_text, str) else None,
        )


class HistoryView(Sequence[AgentMessage]):
    """A read-only view of a history list: indexing, slicing (to a new list), iteration,
    ``len`` and comparison with lists, but no way to change it. Hooks get the history this way,
    so one cannot clear or reorder the live conversation; it copies nothing."""

    __slots__ = ("_messages",)

    def __init__(self, messages: list[AgentMessage]) -> None:
        self._messages = messages

    @overload
    def __getitem__(self, index: int) -> AgentMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[AgentMessage]: ...

    def __getitem__(self, index: int | slice) -> AgentMessage | list[AgentMessage]:
        return self._messages[index]

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[AgentMessage]:
        return iter(self._messages)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HistoryView):
            return self._messages == other._messages
        return isinstance(other, list) and self._messages == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HistoryView({self._messages!r})"


class HistorySnapshot(MutableSequence[AgentMessage]):
    """The history as one LLM call sees it: the first ``len`` messages of the agent's history
    list, copying nothing until someone changes it. The loop and the agent only ever append to
    the list they run on (a new history replaces the list, never changes it in place), so the
    snapshot stays what the list was when it was taken, as a copy would. The first change made
    through the snapshot (``append``, ``del``, ``insert``, item assignment, ...) copies those
    messages into a list of its own, so a ``prepare_context`` or ``transform_context`` hook may
    edit it as it edited the copy it used to get, and the agent's history is never touched. It
    compares equal to a list of the same messages, ``+`` with a list gives a new list, and it
    pickles as a plain list of its messages."""

    __slots__ = ("_length", "_messages", "_owned")

    def __init__(self, messages: list[AgentMessage], length: int | None = None) -> None:
        size = len(messages)
        if length is not None and not 0 <= length <= size:
            raise ValueError(f"a snapshot of {size} messages cannot hold {length}")
        self._messages = messages
        self._length = size if length is None else length
        self._owned = False

    def _own(self) -> list[AgentMessage]:
        """The snapshot's messages in a list of its own, copied from the shared one once."""
        if not self._owned:
            self._messages = self._messages[: self._length]
            self._owned = True
        return self._messages

    @overload
    def __getitem__(self, index: int) -> AgentMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[AgentMessage]: ...

    def __getitem__(self, index: int | slice) -> AgentMessage | list[AgentMessage]:
        if self._owned:
            return self._messages[index]
        length = self._length
        if isinstance(index, slice):
            start, stop, step = index.indices(length)
            if step == 1:
                return self._messages[start:stop]
            return [self._messages[i] for i in range(start, stop, step)]
        position = index + length if index < 0 else index
        if not 0 <= position < length:
            raise IndexError("history index out of range")
        return self._messages[position]

    @overload
    def __setitem__(self, index: int, value: AgentMessage) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[AgentMessage]) -> None: ...

    def __setitem__(self, index: int | slice, value: Any) -> None:
        self._own()[index] = value

    def __delitem__(self, index: int | slice) -> None:
        del self._own()[index]

    def insert(self, index: int, value: AgentMessage) -> None:
        self._own().insert(index, value)

    def __len__(self) -> int:
        return len(self._messages) if self._owned else self._length

    def __iter__(self) -> Iterator[AgentMessage]:
        if self._owned:
            return iter(self._messages)
        return itertools.islice(self._messages, self._length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, HistoryView, HistorySnapshot)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return False

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[AgentMessage]) -> list[AgentMessage]:
        return [*self, *other]

    def __radd__(self, other: Sequence[AgentMessage]) -> list[AgentMessage]:
        return [*other, *self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (HistorySnapshot, (list(self),))

    def __copy__(self) -> HistorySnapshot:
        return HistorySnapshot(list(self))

    def __repr__(self) -> str:
        return f"HistorySnapshot({list(self)!r})"

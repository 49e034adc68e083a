"""The agent's grouped settings: ``OutputOptions``, ``ToolOptions``, ``ContextOptions`` and
``QueueOptions``, each checked when it is built, and ``option_of``, which checks that a
keyword got the option type it takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

import attrs

from yiemagent.core._context_window import check_strategy
from yiemagent.core._output import OUTPUT_MODES, OutputMode
from yiemagent.core._repeated_calls import check_max_repeated_calls
from yiemagent.core._result_caps import check_cap
from yiemagent.core._tools import positive_int, positive_seconds

__all__ = [
    "QUEUE_MODES",
    "ContextOptions",
    "OutputOptions",
    "QueueMode",
    "QueueOptions",
    "ToolOptions",
    "check_queue_mode",
    "option_of",
    "output_options",
]

QueueMode = Literal["all", "one-at-a-time"]
QUEUE_MODES = ("all", "one-at-a-time")
_Option = TypeVar("_Option")

# The messages name the setting as the agent's attributes do (``agent.tool_execution``), which
# is also how they read when an old keyword is given.


def check_queue_mode(name: str, value: Any) -> QueueMode:
    """``value`` when it is ``"all"`` or ``"one-at-a-time"``; ``ValueError`` naming ``name``."""
    if value not in QUEUE_MODES:
        raise ValueError(f"{name} must be 'all' or 'one-at-a-time', got {value!r}")
    return value  # type: ignore[no-any-return]


def _output_mode(_inst: Any, _attr: Any, value: Any) -> None:
    if value is not None and value not in OUTPUT_MODES:
        raise ValueError(f"output_mode must be one of {', '.join(map(repr, OUTPUT_MODES))}, got {value!r}")


def _output_retries(_inst: Any, _attr: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"output_retries must be an int >= 0, got {value!r}")


def _output_validate(_inst: Any, _attr: Any, value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"validate_output must be callable, got {type(value).__name__}")


@attrs.define(frozen=True)
class OutputOptions:
    """How a run ends in data (docs/output.md): ``schema`` (a JSON Schema dict, a dataclass,
    ``TypedDict``, attrs class, pydantic model or type hint, or an ``OutputSpec``), ``mode``
    (``"tool"``, ``"native"`` or ``"grammar"``), ``retries`` (refused outputs sent back to the
    model before the run ends in an error) and ``validate`` (``fn(value)``, the caller's own
    check). A field left ``None`` is not set: the agent then uses mode ``"tool"``, 2 retries
    and no check, and a prompt uses the agent's setting. The mode, retries and check are
    checked here (``ValueError``/``TypeError``); the schema where it is used, by ``YiemAgent``
    or ``prompt``, since turning it into a JSON Schema needs the mode."""

    schema: Any = None
    mode: OutputMode | None = attrs.field(default=None, validator=_output_mode, kw_only=True)
    retries: int | None = attrs.field(default=None, validator=_output_retries, kw_only=True)
    validate: Callable[[Any], Any] | None = attrs.field(
        default=None, validator=_output_validate, kw_only=True
    )

    def is_empty(self) -> bool:
        """Whether no field is set (a prompt with these options uses the agent's output)."""
        return self == OutputOptions()


def _execution(_inst: Any, _attr: Any, value: Any) -> None:
    if value not in ("sequential", "parallel"):
        raise ValueError(f"tool_execution must be 'sequential' or 'parallel', got {value!r}")


def _timeout(_inst: Any, _attr: Any, value: Any) -> None:
    positive_seconds("tool_timeout_s", value)


def _pool(_inst: Any, _attr: Any, value: Any) -> None:
    positive_int("max_parallel_tools", value)


def _result_cap(value: Any) -> int | None:
    return check_cap("max_tool_result_chars", value)


@attrs.define(frozen=True, kw_only=True)
class ToolOptions:
    """How the agent runs the tool calls of a reply: ``execution`` (``"sequential"``, or
    ``"parallel"`` for the calls whose tools allow it), ``timeout_s`` (seconds a call may take
    when its tool sets none; ``None``: no limit), ``max_parallel`` (the parallel pool's size;
    ``None``: a thread per call), ``max_repeated_calls`` (in how many turns of a run a tool may
    be called with the same arguments; ``None``: no limit), ``skip_on_steer`` (a message that
    arrives during a sequential batch skips the calls not yet started) and
    ``max_result_chars`` (a result's text is cut to this many characters before the model sees
    it; ``None``: no cut). A value that makes no sense raises ``ValueError`` here."""

    execution: Literal["sequential", "parallel"] = attrs.field(default="sequential", validator=_execution)
    timeout_s: float | None = attrs.field(default=None, validator=_timeout)
    max_parallel: int | None = attrs.field(default=None, validator=_pool)
    max_repeated_calls: int | None = attrs.field(default=2, converter=check_max_repeated_calls)
    skip_on_steer: bool = attrs.field(default=False, converter=bool)
    max_result_chars: int | None = attrs.field(default=None, converter=_result_cap)


def _window(_inst: Any, _attr: Any, value: Any) -> None:
    if value != "auto":
        positive_int("context_window", value)


@attrs.define(frozen=True, kw_only=True)
class ContextOptions:
    """How each request is kept inside the model's context window (docs/budgets.md):
    ``window`` in tokens (``None``: the one the ``llm_call`` knows of itself, if any;
    ``"auto"``: that, else the one its server lists) and ``strategy`` for a request that would
    not fit: ``"error"`` (the run ends with ``stop_reason="context_overflow"``), ``"trim"``
    (the oldest turns are left out) or a callable. A value that makes no sense raises
    ``ValueError`` here."""

    window: int | Literal["auto"] | None = attrs.field(default=None, validator=_window)
    strategy: Any = attrs.field(default="error", converter=check_strategy)


def _steering(_inst: Any, _attr: Any, value: Any) -> None:
    check_queue_mode("steering_mode", value)


def _follow_up(_inst: Any, _attr: Any, value: Any) -> None:
    check_queue_mode("follow_up_mode", value)


@attrs.define(frozen=True, kw_only=True)
class QueueOptions:
    """How queued messages join runs: ``steering`` for messages sent with ``run_agent`` during
    a run (``"all"`` join before its next LLM call, ``"one-at-a-time"`` one per LLM call) and
    ``follow_up`` for follow-ups (``"one-at-a-time"``: each starts its own run; ``"all"``: those
    queued during a run share the next). Another value raises ``ValueError`` here."""

    steering: QueueMode = attrs.field(default="all", validator=_steering)
    follow_up: QueueMode = attrs.field(default="one-at-a-time", validator=_follow_up)


def option_of(keyword: str, kind: type[_Option], value: Any) -> _Option:
    """``value`` when it is a ``kind``, the defaults for ``None``; ``TypeError`` saying what to
    pass for anything else (a dict of settings, say)."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        name = kind.__name__
        raise TypeError(
            f"{keyword} must be a {name} (from yiemagent), got {type(value).__name__}; "
            f"e.g. {keyword}={name}(...)"
        )
    return value


def output_options(value: Any) -> OutputOptions:
    """``output=`` as ``OutputOptions``: those given, or a schema alone (short for
    ``OutputOptions(schema)``); empty options for ``None``."""
    if isinstance(value, OutputOptions):
        return value
    return OutputOptions() if value is None else OutputOptions(value)

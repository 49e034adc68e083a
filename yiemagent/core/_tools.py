"""Tools, tool calls, results, pipeline outcomes, contexts and the abort signal.

These are the spec's tool and lifecycle types (section 18) as attrs classes. Results, outcomes and
batches are frozen; contexts, state and config are plain mutable records.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from yiemagent.core._approval import NeedsApproval, PausedBatch
from yiemagent.core._content import AgentToolCall, ContentBlock
from yiemagent.core._json_safety import clip
from yiemagent.core._messages import (
    AgentMessage,
    AssistantMessage,
    LlmModel,
    LlmUsage,
    ToolResultMessage,
    now_ms,
)
from yiemagent.core._repeated_calls import RepeatedCalls
from yiemagent.core._schema_fast import compile_fast_check
from yiemagent.core._schema_safety import NO_FETCH_REGISTRY, safe_validator_class, schema_problem
from yiemagent.core._tool_result import AgentToolResult

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = [
    "AbortSignal",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentContext",
    "AgentLoopConfig",
    "AgentState",
    "AgentTool",
    "AgentToolCallBatch",
    "AgentToolResult",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "ExecutedOutcome",
    "FinalizedOutcome",
    "ImmediateOutcome",
    "NeedsApproval",
    "PreparedToolCall",
    "ToolMapping",
    "shared_tool_mapping",
    "tool_mapping",
]

ToolExecution = Literal["sequential", "parallel"]
logger = logging.getLogger("yiemagent")


def compile_schema_validator(name: str | None, schema: Any, *, untrusted: bool = False) -> Validator:
    """Return a validator for ``schema`` that never fetches anything and matches patterns with
    RE2 (see ``schema_safety``); raise ``ValueError``, naming the tool when ``name`` is given, if
    ``schema`` is not a valid JSON Schema or has a reference that does not resolve within it.
    With ``untrusted`` (a schema from an MCP server), a pattern RE2 cannot run in linear time is
    refused too, instead of being matched with Python's ``re``."""
    owner = f'Tool "{name}": input_schema' if name is not None else "input_schema"
    if not isinstance(schema, Mapping):
        raise ValueError(f"{owner} must be a JSON Schema object (a dict), got {type(schema).__name__}")
    schema = dict(schema)
    stock = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        stock.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise ValueError(
            f"{owner} is not a valid JSON Schema: {clip(exc.message, 400)} (at {clip(where, 200)})"
        ) from None
    except RecursionError:
        raise ValueError(f"{owner} is nested too deeply to be checked") from None
    cls = safe_validator_class(stock, untrusted=untrusted)
    problem = schema_problem(cls, schema, untrusted=untrusted)
    if problem is not None:
        raise ValueError(f"{owner} {problem}")
    return cls(schema, registry=NO_FETCH_REGISTRY)


def _check_name(_inst: Any, _attr: Any, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"tool name must be a non-empty string, got {value!r}")


def _check_callable(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f'Tool "{inst.name}": {attr.name} must be callable, got {value!r}')


def check_needs_approval(_inst: Any, _attr: Any, value: Any) -> None:
    if not (isinstance(value, bool) or callable(value)):
        raise TypeError(
            "needs_approval must be True, False or a function (args, context) -> bool, "
            f"got {type(value).__name__}"
        )


@attrs.define(frozen=True, eq=False)
class AgentTool:
    """A tool the model may call (spec ``agentTool``), compared by identity.

    ``execute(tool_call_id, args, signal, on_partial_result)`` returns an ``AgentToolResult``.
    ``input_schema`` is checked when the tool is created: an invalid schema, or one with a
    ``$ref`` that does not resolve within it, raises ``ValueError`` naming the tool (nothing is
    ever fetched). ``timeout_s`` bounds one call (beyond the spec); ``None`` uses the loop's
    default. ``untrusted_schema`` (beyond the spec; MCP tools set it) marks a schema from a
    source you do not control: a pattern in it that RE2 cannot match in linear time is refused
    here instead of being matched with Python's ``re``. ``needs_approval`` (beyond the spec):
    ``True``, or ``fn(args, context) -> bool`` deciding from the prepared arguments, makes a
    call wait for a decision before it runs (docs/approval.md). ``max_tool_result_chars``
    (beyond the spec) caps the text of its results the model sees (docs/budgets.md).
    """

    name: str = attrs.field(validator=_check_name)
    label: str
    description: str
    input_schema: dict[str, Any]
    execute: Callable[..., Any] = attrs.field(validator=_check_callable)
    prepare_arguments: Callable[[dict[str, Any]], Any] | None = attrs.field(
        default=None, validator=_check_callable
    )
    validate_required_args: Callable[[dict[str, Any]], str | None] | None = attrs.field(
        default=None, validator=_check_callable
    )
    parallel_tool_execute: bool = False
    timeout_s: float | None = None
    untrusted_schema: bool = attrs.field(default=False, kw_only=True)
    needs_approval: NeedsApproval = attrs.field(default=False, kw_only=True, validator=check_needs_approval)
    max_tool_result_chars: int | None = attrs.field(default=None, kw_only=True)
    schema_validator: Validator = attrs.field(init=False, repr=False)
    fast_check: Callable[[Any], bool] | None = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        positive_seconds(f'Tool "{self.name}": timeout_s', self.timeout_s)
        cap = self.max_tool_result_chars
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ValueError(
                f'Tool "{self.name}": max_tool_result_chars must be an int >= 1 or None, got {cap!r}'
            )
        object.__setattr__(
            self,
            "schema_validator",
            compile_schema_validator(self.name, self.input_schema, untrusted=self.untrusted_schema),
        )
        object.__setattr__(self, "fast_check", compile_fast_check(self.input_schema))


ToolMapping = dict[str, AgentTool]


def tool_mapping(tools: Mapping[str, AgentTool] | Iterable[AgentTool] | None) -> ToolMapping:
    """A new ordered ``name -> AgentTool`` dict from a mapping or an iterable of tools.

    Raises ``TypeError`` for a value that is not an ``AgentTool`` and ``ValueError`` for a key
    that is not its tool's name (the model would be shown one name and refused the other).
    """
    if tools is None:
        return {}
    items = list(tools.items()) if isinstance(tools, Mapping) else [(None, t) for t in tools]
    out: ToolMapping = {}
    for key, tool in items:
        if not isinstance(tool, AgentTool):
            raise TypeError(f"tools must hold AgentTool instances, got {type(tool).__name__}")
        if key is not None and key != tool.name:
            raise ValueError(
                f"tools maps the key {key!r} to the tool named {tool.name!r}; the key must be the tool's name"
            )
        out[tool.name] = tool
    return out


def shared_tool_mapping(tools: Mapping[str, AgentTool] | Iterable[AgentTool] | None) -> ToolMapping:
    """The tools of a context or loop config: a plain ``dict`` is used as given (shared with the
    agent's state, as in the spec, and not re-checked on every turn); anything else goes
    through ``tool_mapping``."""
    return tools if type(tools) is dict else tool_mapping(tools)


@attrs.define(frozen=True)
class AgentToolCallBatch:
    """The result messages of one batch of tool calls and whether the loop should stop; or,
    with ``paused`` set, no results yet: the batch waits for approval decisions."""

    messages: list[ToolResultMessage]
    terminate: bool = False
    paused: Any = None  # a PausedBatch (core._approval), which imports this module
    # The first output a successful result of the batch gave (call order), with its call's id.
    output: tuple[str, Any] | None = None


@attrs.define(frozen=True)
class PreparedToolCall:
    """A call that passed preparation: the resolved tool, the call, and the validated arguments."""

    tool: AgentTool
    tool_call: AgentToolCall
    args: dict[str, Any]


@attrs.define(frozen=True)
class ImmediateOutcome:
    """A call that ended during preparation (not found, invalid, blocked, aborted): an error
    unless said otherwise."""

    result: AgentToolResult
    is_error: bool = True


@attrs.define(frozen=True)
class ExecutedOutcome:
    """A call after ``execute`` and before ``after_tool_call``."""

    result: AgentToolResult
    is_error: bool = False


@attrs.define(frozen=True)
class FinalizedOutcome:
    """A call after every phase: the call, its final result and whether it failed."""

    tool_call: AgentToolCall
    result: AgentToolResult
    is_error: bool = False


@attrs.define
class AgentContext:
    """What one LLM call sees: system prompt, messages and an ordered ``name -> tool`` mapping."""

    # A field added here must be checked by ``run._Run.hooks_context`` too (tests check it).
    system_prompt: str = ""
    messages: Sequence[AgentMessage] = attrs.field(factory=list)
    tools: ToolMapping = attrs.field(factory=dict, converter=shared_tool_mapping)


# Plain attribute writes (no attrs __setattr__ hook): the worker updates the state on every
# run. The tools mapping is converted and checked at construction only.
@attrs.define(on_setattr=attrs.setters.NO_OP)
class AgentState:
    """The agent's mutable runtime state (spec ``agentState``): ``messages`` is the history,
    ``pending_tool_calls`` the ids of the batch being executed, ``active_run`` whether a run is
    under way, ``error_message`` the error of the last run (``None`` when it did not fail).
    The loop only appends to ``messages``; to change the history, assign a new list (requests
    of earlier turns hold snapshots of the list, docs/design.md, decision 6)."""

    system_prompt: str = "You are helpful assistant."
    model: LlmModel | None = None
    tools: ToolMapping = attrs.field(factory=dict, converter=tool_mapping)
    messages: list[AgentMessage] = attrs.field(factory=list)
    pending_tool_calls: set[str] = attrs.field(factory=set)
    active_run: bool = False
    error_message: str | None = None
    paused_batch: PausedBatch | None = None  # the batch waiting for approval decisions


@attrs.define(frozen=True)
class BeforeToolCallResult:
    """What ``before_tool_call`` may return to block a call (``reason`` is shown to the model)."""

    block: bool = False
    reason: str | None = None


@attrs.define(frozen=True)
class AfterToolCallResult:
    """Fields ``after_tool_call`` overrides; ``None`` keeps the executed value."""

    content: list[ContentBlock] | None = None
    details: dict[str, Any] | None = None
    usage: LlmUsage | None = None
    terminate: bool | None = None
    is_error: bool | None = None


@attrs.define(frozen=True)
class BeforeToolCallContext:
    """What ``before_tool_call`` sees: the assistant message, the call, its arguments, the context."""

    message: AssistantMessage
    tool_call: AgentToolCall
    args: dict[str, Any]
    context: AgentContext

    @property
    def assistant_message(self) -> AssistantMessage:
        """The assistant message that requested the call (alias of ``message``)."""
        return self.message


@attrs.define(frozen=True)
class AfterToolCallContext:
    """What ``after_tool_call`` sees: the call, its arguments, result and error flag, the context."""

    message: AssistantMessage
    tool_call: AgentToolCall
    args: dict[str, Any]
    result: AgentToolResult
    is_error: bool
    context: AgentContext

    @property
    def assistant_message(self) -> AssistantMessage:
        """The assistant message that requested the call (alias of ``message``)."""
        return self.message


BeforeHook = Callable[[BeforeToolCallContext, "AbortSignal | None"], Any]
AfterHook = Callable[[AfterToolCallContext, "AbortSignal | None"], Any]


@attrs.define
class AgentLoopConfig:
    """How a batch runs: tools, hooks, mode, and (beyond the spec) timeouts and pool size.

    ``tool_timeout_s`` is the default per-call timeout for tools without their own;
    ``max_parallel_tools`` caps the thread pool (``None``: one thread per call in the batch).
    ``skip_remaining``, when set, is asked after each call of a sequential batch: once it
    returns true, the calls not yet started get error results saying they were skipped (the
    agent's ``skip_tools_on_steer`` uses it to give a new message the floor). ``clock()`` gives
    the millisecond timestamps of the result messages (``now_ms`` unless a test fixes it).
    ``repeated_calls``, when set, counts the calls of a run (identical calls of one batch once)
    and refuses one made with the same tool and prepared arguments in more batches than its
    limit (the agent's ``max_repeated_calls``).
    ``refused_by_limit(call)``, when set, is asked first for each call: a result it gives
    refuses the call with that error result (the run's tool-call limits).
    ``needs_approval(tool, args, context)`` is the agent's policy: a call it (or the tool's own
    ``needs_approval``) asks about waits for a decision. ``approval_checkpoint()`` is called
    whenever a resumed batch's calls are about to start or have ended (the agent saves its
    session there, so a call is never run twice after a crash).
    """

    tools: ToolMapping = attrs.field(factory=dict, converter=shared_tool_mapping)
    before_tool_call: BeforeHook | None = None
    after_tool_call: AfterHook | None = None
    tool_execution: ToolExecution = attrs.field(default="sequential")
    tool_timeout_s: float | None = attrs.field(default=None)
    max_parallel_tools: int | None = attrs.field(default=None)
    skip_remaining: Callable[[], bool] | None = attrs.field(default=None, kw_only=True)
    clock: Callable[[], int] = attrs.field(default=now_ms, kw_only=True)
    repeated_calls: RepeatedCalls | None = attrs.field(default=None, kw_only=True)
    refused_by_limit: Callable[[AgentToolCall], AgentToolResult | None] | None = attrs.field(
        default=None, kw_only=True
    )
    needs_approval: Callable[[AgentTool, dict[str, Any], AgentContext], bool] | None = attrs.field(
        default=None, kw_only=True
    )
    approval_checkpoint: Callable[[], None] | None = attrs.field(default=None, kw_only=True)

    @tool_execution.validator
    def _check_mode(self, _attr: Any, value: str) -> None:
        if value not in ("sequential", "parallel"):
            raise ValueError(f"tool_execution must be 'sequential' or 'parallel', got {value!r}")

    @tool_timeout_s.validator
    def _check_timeout(self, _attr: Any, value: float | None) -> None:
        positive_seconds("tool_timeout_s", value)

    @max_parallel_tools.validator
    def _check_pool(self, _attr: Any, value: int | None) -> None:
        positive_int("max_parallel_tools", value)


def _run_callback(callback: Callable[[], None]) -> None:
    try:
        callback()
    except BaseException:  # even SystemExit: one broken callback must not skip the others
        logger.exception("an on_abort callback raised")


def positive_seconds(what: str, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is ``None`` or a positive number of seconds."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
    ):
        raise ValueError(f"{what} must be a positive number of seconds or None, got {value!r}")


def positive_int(what: str, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is ``None`` or an int of at least 1."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{what} must be a positive int or None, got {value!r}")


@attrs.define(init=False, eq=False)
class AbortSignal:
    """A thread-safe abort flag (spec ``abortSignal``): ``abort()`` once, read ``aborted`` anywhere.

    Callbacks registered with ``on_abort`` run once, on the aborting thread (immediately if the
    signal is already aborted); one that raises anything, ``SystemExit`` included, is logged and
    the others still run, so ``abort()`` never raises.
    ``wait`` blocks until abort or timeout.
    """

    _aborted: bool
    _lock: threading.Lock
    _callbacks: list[Callable[[], None]]
    _event: threading.Event | None  # made by the first ``wait``: most signals are never waited on
    reason: str | None

    def __init__(self, aborted: bool = False, reason: str | None = None) -> None:
        self._aborted = False
        self._lock = threading.Lock()
        self._callbacks = []
        self._event = None
        self.reason = None
        if aborted:
            self.abort(reason)

    @property
    def aborted(self) -> bool:
        """Whether ``abort`` has been called."""
        return self._aborted

    def abort(self, reason: str | None = None) -> None:
        """Set the flag (idempotent) and run the registered callbacks once."""
        with self._lock:
            if self._aborted:
                return
            self.reason = reason
            self._aborted = True
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _run_callback(callback)

    def on_abort(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` on abort (now, if already aborted); return a function that
        unregisters it. A callback that raises is logged, never raised to the caller."""
        with self._lock:
            if not self._aborted:
                self._callbacks.append(callback)
                return lambda: self._remove(callback)
        _run_callback(callback)
        return lambda: None

    def _remove(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until aborted or ``timeout`` seconds pass; return ``aborted``."""
        with self._lock:
            if self._aborted:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted})"

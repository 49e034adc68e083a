"""Every exception the library raises, and how the loop describes and contains the exceptions of
code it calls (tools, hooks, models).

One module, imported by the others and importing none of them, so a caller can catch any of
these without knowing which part of the library raised it. Every class derives from
``YiemAgentError``; the tree is drawn in ``docs/architecture.md``.
"""

from __future__ import annotations

import queue
from collections.abc import Sequence
from typing import Any

__all__ = [
    "AgentActorDiedError",
    "AgentClosedError",
    "ApprovalError",
    "CassetteError",
    "CliError",
    "ClusterError",
    "FileProblem",
    "HarnessError",
    "LlmAbortedError",
    "LlmError",
    "LlmStreamError",
    "LlmTimeoutError",
    "McpToolError",
    "OutputRejected",
    "PatternRefused",
    "RayToolError",
    "ReplayMismatchError",
    "ResponseTimeout",
    "RunError",
    "ScenarioError",
    "ScriptError",
    "ScriptExhaustedError",
    "SessionError",
    "SessionStoreError",
    "TextTooLong",
    "ToolArgumentError",
    "ToolLoadError",
    "UnreadableFileError",
    "YiemAgentError",
    "describe_error",
    "problem_lines",
    "reraise_interrupt",
]


class YiemAgentError(Exception):
    """The root of every exception the library raises: ``except YiemAgentError`` catches any of
    them. Each also keeps the built-in base callers already catch (``ValueError`` for bad input,
    ``RuntimeError`` for a closed agent, ``TimeoutError`` for a response that did not come)."""


class AgentClosedError(YiemAgentError, RuntimeError):
    """The agent was shut down: it takes no new messages and has no responses left."""


class AgentActorDiedError(AgentClosedError):
    """The Ray actor hosting an agent died (killed, crashed, or its node was lost): the agent and
    whatever it had not saved are gone. An ``AgentClosedError``, since no call can reach it."""


class ClusterError(YiemAgentError, RuntimeError):
    """Something on the Ray cluster failed that is not the agent's own doing: an actor that could
    not start (its settings could not be resolved, its tools not loaded), a shared sink that is
    gone. The message says what and why."""


class RayToolError(YiemAgentError, RuntimeError):
    """A tool call run as a Ray task did not come back with a result: the task was cancelled, its
    worker or node died, or its result was lost. The call gets an error result saying so."""


class SessionStoreError(YiemAgentError, RuntimeError):
    """A session store could not read, write or delete a session (a server that is down, a file
    system error); the message names the store and the session."""


class ResponseTimeout(YiemAgentError, queue.Empty, TimeoutError):
    """No response arrived within the timeout. It is a ``TimeoutError`` (what ``take_response``
    documents) and a ``queue.Empty`` (what ``output_channel.get`` callers catch)."""


class RunError(YiemAgentError):
    """A step of a run failed; the message says which step and why."""


class ApprovalError(YiemAgentError, ValueError):
    """Decisions for calls waiting for approval that cannot be used (a missing or unknown id,
    an edit that breaks the tool's schema, an agent not waiting for them); nothing ran."""


class SessionError(YiemAgentError, ValueError):
    """A session file cannot be read: damaged, not a session, or of an unknown version."""


class OutputRejected(YiemAgentError, ValueError):
    """Raised by a ``validate_output`` hook to refuse a run's output: the message goes back to
    the model, which may answer again (``output_retries``)."""


class ToolArgumentError(YiemAgentError, ValueError):
    """The arguments of a tool call are unusable; the message is written for the model.

    ``kind`` is the stable error kind the pipeline gives the call's error result (see
    ``error_kinds``): ``"invalid_arguments"`` unless the raiser names another one.
    """

    def __init__(self, *args: object, kind: str = "invalid_arguments") -> None:
        super().__init__(*args)
        self.kind = kind


class ToolLoadError(YiemAgentError):
    """One or more tool files could not be loaded.

    ``problems`` lists ``(path, message)`` pairs, one per bad file, in load order; ``tools`` is
    the store's mapping after the good files were registered.
    """

    def __init__(self, problems: list[tuple[str, str]], tools: dict[str, Any] | None = None):
        self.problems = list(problems)
        self.tools = tools if tools is not None else {}
        lines = "\n".join(f"  - {path}: {message}" for path, message in self.problems)
        count = len(self.problems)
        super().__init__(f"{count} tool file{'s' if count != 1 else ''} could not be loaded:\n{lines}")


class McpToolError(YiemAgentError, RuntimeError):
    """An MCP server could not be reached, refused a call, answered it with an error result
    (``isError``), or did not answer in time; also raised by ``load_mcp_tools`` when the server's
    tools cannot be registered. The message names the server and says what failed."""


class LlmError(YiemAgentError):
    """A provider call that failed: the message says what failed, with the HTTP status and the
    provider's own error text when there was a reply.

    ``status`` is the HTTP status (``None`` without a reply), ``provider_message`` the provider's
    own error text, ``retryable`` whether another attempt may succeed and ``retry_after_s`` the
    delay the server asked for. Never holds the api key: callers build it from scrubbed text.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider_message: str | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.provider_message = provider_message
        self.retryable = retryable
        self.retry_after_s = retry_after_s

    def final(self, note: str) -> LlmError:
        """Return a copy of this error (same class) that is not retryable, with ``note`` appended."""
        return type(self)(
            f"{self.message} ({note})",
            status=self.status,
            provider_message=self.provider_message,
            retryable=False,
            retry_after_s=self.retry_after_s,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status!r})"


class LlmAbortedError(LlmError):
    """The caller's ``AbortSignal`` fired during the request or a retry wait."""


class LlmTimeoutError(LlmError):
    """The server did not connect or send the next bytes within the client's ``timeout``, or the
    whole call (retries included) took longer than the client's ``deadline_s``."""


class LlmStreamError(LlmError):
    """A streamed reply that cannot be used: it broke off before its terminator (``[DONE]`` or
    ``message_stop``; retryable when nothing was streamed yet), or sent a chunk that is not JSON
    or holds a field of the wrong kind (final: the text names the field)."""


# -- the command line, the conformance suite and the scripted model -----------------------------

MAX_PROBLEMS_SHOWN = 20  # a scenario file of a million bad lines is reported in a screenful


def _printable(text: str) -> str:
    """``text`` safe to print to any UTF-8 stream (lone surrogates become escapes)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class CliError(YiemAgentError):
    """A problem the command reports in one message and exits with ``exit_code`` (2: the
    command cannot start as asked)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ScenarioError(YiemAgentError, ValueError):
    """A scenario (or trace, per ``what``) file that cannot be used; ``problems`` lists
    ``(json_path, message)`` pairs and the text names the file."""

    def __init__(self, source: str, problems: Sequence[tuple[str, str]], what: str = "scenario") -> None:
        self.source = source
        self.problems = list(problems)
        super().__init__(_printable(f"{source}: not a usable {what}:\n{problem_lines(self.problems)}"))


class FileProblem(YiemAgentError, ValueError):
    """Why a file cannot be used: ``where`` is the JSON path of the bad value (``$`` for the
    file as a whole) and the text says what is wrong."""

    def __init__(self, message: str, where: str = "$") -> None:
        super().__init__(message)
        self.where = where


class CassetteError(YiemAgentError, ValueError):
    """A cassette file (a recorded run) that cannot be used: the text names the file and, for
    each bad field, its JSON path (``$.interactions[2].reply``), and says what to do."""


class ReplayMismatchError(LlmError):
    """A strict replay got a request the cassette does not hold at that point: the text names the
    call, the first field that differs and what was recorded there. Raised inside ``llm_call``,
    so the run ends with an error response that says it."""


class HarnessError(YiemAgentError):
    """A wait of the harness itself ran out: the scenario, not the implementation, is stuck."""


class ScriptError(YiemAgentError, ValueError):
    """A script (or one of its replies) cannot be read; the message says which reply and why."""


class ScriptExhaustedError(YiemAgentError, RuntimeError):
    """The model was called more often than the script has replies."""


class UnreadableFileError(YiemAgentError, ValueError):
    """A file that cannot be read as a regular file within the size limit; the text says why
    (``it is a folder, not a file``, ``cannot read the file: Permission denied``, ...)."""


class PatternRefused(YiemAgentError, ValueError):
    """RE2 cannot compile the pattern, so it cannot be matched in linear time; the message says
    why (RE2's own words)."""


class TextTooLong(YiemAgentError, ValueError):
    """The text is longer than the pattern's ``max_bytes``: matching it could take too long."""


def problem_lines(problems: Sequence[tuple[str, str]]) -> str:
    """``(json_path, message)`` pairs as indented lines, at most ``MAX_PROBLEMS_SHOWN`` of them
    and a count of the rest: a file of a million bad lines is reported in a screenful."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    lines = "\n".join(f"  {path}: {message}" for path, message in shown)
    if len(problems) > len(shown):
        lines += f"\n  … and {len(problems) - len(shown)} more problems"
    return lines


def describe_error(exc: BaseException) -> str:
    """``"<Type>: <text>"`` for an exception (just the type when the text is empty)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def reraise_interrupt(exc: BaseException) -> None:
    """Re-raise ``exc`` if it is a ``KeyboardInterrupt``: the one exception the loop must not
    turn into a result. Everything else (``SystemExit`` and ``asyncio.CancelledError`` raised by
    a tool or hook included) becomes an error result or an error response instead."""
    if isinstance(exc, KeyboardInterrupt):
        raise exc

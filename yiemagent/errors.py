"""Every exception the library raises, and how the loop describes and contains the exceptions of
code it calls (tools, hooks, models).

One module, imported by the others and importing none of them, so a caller can catch any of
these without knowing which part of the library raised it.
"""

from __future__ import annotations

import queue
from typing import Any

__all__ = [
    "AgentActorDiedError",
    "AgentClosedError",
    "ClusterError",
    "LlmAbortedError",
    "LlmError",
    "LlmStreamError",
    "LlmTimeoutError",
    "McpToolError",
    "RayToolError",
    "ResponseTimeout",
    "RunError",
    "SessionError",
    "SessionStoreError",
    "ToolArgumentError",
    "ToolLoadError",
    "describe_error",
    "reraise_interrupt",
]


class AgentClosedError(RuntimeError):
    """The agent was shut down: it takes no new messages and has no responses left."""


class AgentActorDiedError(AgentClosedError):
    """The Ray actor hosting an agent died (killed, crashed, or its node was lost): the agent and
    whatever it had not saved are gone. An ``AgentClosedError``, since no call can reach it."""


class ClusterError(RuntimeError):
    """Something on the Ray cluster failed that is not the agent's own doing: an actor that could
    not start (its settings could not be resolved, its tools not loaded), a shared sink that is
    gone. The message says what and why."""


class RayToolError(RuntimeError):
    """A tool call run as a Ray task did not come back with a result: the task was cancelled, its
    worker or node died, or its result was lost. The call gets an error result saying so."""


class SessionStoreError(RuntimeError):
    """A session store could not read, write or delete a session (a server that is down, a file
    system error); the message names the store and the session."""


class ResponseTimeout(queue.Empty, TimeoutError):
    """No response arrived within the timeout. It is a ``TimeoutError`` (what ``take_response``
    documents) and a ``queue.Empty`` (what ``output_channel.get`` callers catch)."""


class RunError(Exception):
    """A step of a run failed; the message says which step and why."""


class SessionError(ValueError):
    """A session file cannot be read: damaged, not a session, or of an unknown version."""


class ToolArgumentError(ValueError):
    """The arguments of a tool call are unusable; the message is written for the model.

    ``kind`` is the stable error kind the pipeline gives the call's error result (see
    ``error_kinds``): ``"invalid_arguments"`` unless the raiser names another one.
    """

    def __init__(self, *args: object, kind: str = "invalid_arguments") -> None:
        super().__init__(*args)
        self.kind = kind


class ToolLoadError(Exception):
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


class McpToolError(RuntimeError):
    """An MCP server could not be reached, refused a call, answered it with an error result
    (``isError``), or did not answer in time; also raised by ``load_mcp_tools`` when the server's
    tools cannot be registered. The message names the server and says what failed."""


class LlmError(Exception):
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

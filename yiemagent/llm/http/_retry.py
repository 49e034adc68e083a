"""Retrying failed provider requests with tenacity: which failures, how long to wait, when to stop.

Connection errors, timeouts and HTTP 408, 409, 429 and 5xx are retried with exponential backoff and
jitter, or after the delay the server asked for (``retry-after-ms``, ``Retry-After`` in seconds or
as an HTTP date). A server that asks for more than ``max_retry_delay_ms`` gets an error at once.
Waits watch the caller's ``AbortSignal``, so an abort ends a wait at once, and a call's
``Deadline``: a wait that would end past it ends the call instead.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from datetime import timezone
from typing import Any, TypeVar

import attrs
import tenacity

from yiemagent.core._tools import AbortSignal
from yiemagent.llm.http._errors import LlmAbortedError, LlmError, LlmTimeoutError

__all__ = [
    "Deadline",
    "RetryPolicy",
    "backoff_delay",
    "call_with_retries",
    "is_retryable_status",
    "parse_retry_after",
]

T = TypeVar("T")

_RETRYABLE_STATUSES = frozenset({408, 409, 429})


def _non_negative(_inst: object, attr: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attr.name} must not be negative, got {value!r}")


@attrs.define(frozen=True)
class RetryPolicy:
    """How a client retries: ``max_retries`` further attempts after the first, backoff from
    ``base_delay_s`` doubling up to ``max_backoff_s`` (plus up to ``base_delay_s`` of jitter), and
    ``max_retry_delay_ms``, the longest server-requested delay the client agrees to wait.
    """

    max_retries: int = attrs.field(default=2, validator=_non_negative)
    base_delay_s: float = attrs.field(default=0.5, validator=_non_negative)
    max_backoff_s: float = attrs.field(default=8.0, validator=_non_negative)
    max_retry_delay_ms: float = attrs.field(default=60_000, validator=_non_negative)


@attrs.define(frozen=True)
class Deadline:
    """When a whole call (every attempt and every wait between them) must be over: ``seconds``
    after it started, which is ``at`` on the ``time.monotonic()`` clock."""

    seconds: float
    at: float

    @classmethod
    def start(cls, seconds: float | None) -> Deadline | None:
        """Return the deadline of a call starting now, or ``None`` when ``seconds`` is ``None``."""
        return None if seconds is None else cls(seconds, time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds left until the deadline; 0 once it has passed."""
        return max(0.0, self.at - time.monotonic())

    def error(self, label: str, detail: str = "") -> LlmTimeoutError:
        """Return the final ``LlmTimeoutError`` of a call past this deadline; ``detail`` is
        appended to its message."""
        return LlmTimeoutError(
            f"{label} call did not finish within its deadline_s of {self.seconds:g} s{detail}"
        )


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another attempt: 408, 409, 429 and every 5xx."""
    return status in _RETRYABLE_STATUSES or status >= 500


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value.strip()
    return None


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Return the delay in seconds a reply asks for, or ``None`` when it asks for none.

    ``retry-after-ms`` wins over ``Retry-After``; the latter may be seconds or an HTTP date (a date
    in the past means no wait). Unreadable values count as absent; never raises, never negative.
    """
    millis = _header(headers, "retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _refuse_long_delays(error: LlmError, policy: RetryPolicy) -> LlmError:
    asked = error.retry_after_s
    if error.retryable and asked is not None and asked * 1000.0 > policy.max_retry_delay_ms:
        return error.final(
            f"the server asked to retry after {asked:g} s, more than max_retry_delay_ms="
            f"{policy.max_retry_delay_ms:g}; not retrying"
        )
    return error


def backoff_delay(policy: RetryPolicy, attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (from 1) when the server named no
    delay: ``base_delay_s * 2**(attempt - 1)`` plus up to ``base_delay_s`` of random jitter,
    never more than ``max_backoff_s``."""
    exponential = policy.base_delay_s * float(2 ** max(0, attempt - 1))
    return min(policy.max_backoff_s, exponential + random.uniform(0, policy.base_delay_s))


def _wait_strategy(policy: RetryPolicy) -> Callable[[tenacity.RetryCallState], float]:
    def wait(state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, LlmError) and error.retry_after_s is not None:
            return error.retry_after_s
        return backoff_delay(policy, state.attempt_number)

    return wait


def _sleeper(signal: AbortSignal | None, label: str) -> Callable[[float], None]:
    def sleep(seconds: float) -> None:
        if signal is None:
            time.sleep(seconds)
        elif signal.wait(seconds):
            raise LlmAbortedError(f"{label} request aborted while waiting to retry")

    return sleep


def _is_retryable(error: BaseException) -> bool:
    return isinstance(error, LlmError) and error.retryable


def call_with_retries(
    attempt: Callable[[], T],
    policy: RetryPolicy,
    *,
    signal: AbortSignal | None = None,
    label: str = "LLM",
    logger: logging.Logger | None = None,
    deadline: Deadline | None = None,
) -> T:
    """Call ``attempt`` until it returns, retrying a retryable ``LlmError`` as ``policy`` says.

    Raises the last error when retries are spent (its message then says how many attempts were
    made, when there was more than one), any non-retryable error at once, ``LlmAbortedError``
    when ``signal`` fires during a wait, and ``LlmTimeoutError`` (naming the last failure)
    instead of a wait that would end past ``deadline``. Log lines carry only error messages,
    which never hold the api key.
    """
    log = logger or logging.getLogger("yiemagent.llm")
    attempts = 0

    def guarded() -> T:
        nonlocal attempts
        attempts += 1
        try:
            return attempt()
        except LlmError as error:
            raise _refuse_long_delays(error, policy) from None

    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        # Waiting only to fail at the deadline would hide the real failure: end with it now.
        if deadline is not None and delay >= deadline.remaining():
            raise deadline.error(
                label, f": the retry due in {delay:.2f} s would start past it; last failure: {error}"
            )
        log.warning(
            "%s request failed (%s); retrying in %.2f s (attempt %d of %d)",
            label,
            error,
            delay,
            attempts + 1,
            policy.max_retries + 1,
        )

    retrying = tenacity.Retrying(
        sleep=_sleeper(signal, label),
        stop=tenacity.stop_after_attempt(policy.max_retries + 1),
        wait=_wait_strategy(policy),
        retry=tenacity.retry_if_exception(_is_retryable),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return retrying(guarded)
    except LlmError as error:
        if error.retryable and attempts > 1:
            raise error.final(f"gave up after {attempts} attempts") from None
        if error.retryable:  # one attempt, as max_retries=0 asked: no count to report
            raise type(error)(
                error.message,
                status=error.status,
                provider_message=error.provider_message,
                retryable=False,
                retry_after_s=error.retry_after_s,
            ) from None
        raise

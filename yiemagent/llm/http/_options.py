"""``HttpOptions``: how a provider client's requests travel, in one value the clients share.

Every HTTP client (``OpenAIChatClient``, ``AnthropicMessagesClient``) takes the same transport
settings; they live here once instead of as the same keywords on every constructor. The value is
frozen and checked when it is made, so a client never starts with a limit that makes no sense,
and one ``HttpOptions`` may serve any number of clients.
"""

from __future__ import annotations

from typing import Any

import attrs

from yiemagent.llm.http._retry import RetryPolicy

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "HttpOptions", "http_options"]

DEFAULT_MAX_RESPONSE_BYTES = 64 * 2**20  # far above any real reply, far below a memory problem


def _is_number(value: Any) -> bool:
    # bool is an int to Python, but True seconds or retries is a mistake, not a number.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if not _is_number(value) or not value > 0:
        raise ValueError(f"{attr.name} must be a positive number of seconds, got {value!r}")


def _non_negative(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if not _is_number(value) or not value >= 0:  # (NaN is neither)
        raise ValueError(f"{attr.name} must be a number that is not negative, got {value!r}")


def _retry_count(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"{attr.name} must be a whole number of further attempts (0 for none), got {value!r}"
        )


def _byte_limit(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{attr.name} must be a positive int, got {value!r}")


def _deadline(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not _is_number(value) or not value > 0):
        raise ValueError(f"{attr.name} must be positive or None, got {value!r}")


def _flag_or_none(_inst: object, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{attr.name} must be True, False or None, got {value!r}")


@attrs.define(frozen=True, kw_only=True)
class HttpOptions:
    """How a provider client's HTTP requests are made; every field is checked when it is set.

    ``timeout`` (600 s) bounds the wait to connect and for each next piece of a reply;
    ``deadline_s`` (when set) a whole call, retries and their waits included, after which it is
    an ``LlmTimeoutError``. A failed request is tried ``max_retries`` (2) more times, waiting
    from ``retry_base_delay_s`` (0.5 s), doubling up to ``retry_max_backoff_s`` (8 s), or as
    long as the server asks up to ``max_retry_delay_ms`` (60 s; a longer ask fails at once). A
    reply larger than ``max_response_bytes`` (64 MiB, counted unpacked) is an ``LlmError``.
    ``log_bodies`` logs request and reply bodies at DEBUG on ``yiemagent.llm`` (``None``: when
    ``$YIEM_LOG_BODIES=1``, read at each call); ``send_session_id`` sends the agent's session
    id where the provider keeps one. Raises ``ValueError`` naming the field for a value that
    makes no sense (a timeout that is not positive, a negative retry count, ...).
    """

    timeout: float = attrs.field(default=600.0, validator=_positive)
    max_retries: int = attrs.field(default=2, validator=_retry_count)
    max_retry_delay_ms: float = attrs.field(default=60_000, validator=_non_negative)
    retry_base_delay_s: float = attrs.field(default=0.5, validator=_non_negative)
    retry_max_backoff_s: float = attrs.field(default=8.0, validator=_non_negative)
    max_response_bytes: int = attrs.field(default=DEFAULT_MAX_RESPONSE_BYTES, validator=_byte_limit)
    deadline_s: float | None = attrs.field(default=None, validator=_deadline)
    log_bodies: bool | None = attrs.field(default=None, validator=_flag_or_none)
    send_session_id: bool = attrs.field(default=True, converter=bool)

    @property
    def retry(self) -> RetryPolicy:
        """The ``RetryPolicy`` these options describe."""
        return RetryPolicy(
            self.max_retries, self.retry_base_delay_s, self.retry_max_backoff_s, self.max_retry_delay_ms
        )

    @classmethod
    def field_names(cls) -> frozenset[str]:
        """The names of the fields, for code that sorts keywords into options and the rest."""
        return frozenset(field.name for field in attrs.fields(cls))


def http_options(value: Any) -> HttpOptions:
    """``value`` when it is an ``HttpOptions``, the defaults for ``None``; ``TypeError`` saying
    what to pass for anything else (a dict of settings, say)."""
    if value is None:
        return HttpOptions()
    if not isinstance(value, HttpOptions):
        raise TypeError(
            f"http must be an HttpOptions (from yiemagent.llm), got "
            f"{type(value).__name__}; e.g. http=HttpOptions(timeout=30)"
        )
    return value

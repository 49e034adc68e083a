"""Provider clients usable as an agent's ``llm_call``: ``create_llm_call("openai:gpt-4o-mini")``,
``OpenAIChatClient`` (OpenAI and the servers that copy its API), ``AnthropicMessagesClient``,
and ``LlamaCppClient`` (a model in this process). Each provider owns its wire format; the HTTP
transport they share is ``yiemagent.llm.http``, set by one ``HttpOptions`` value (timeouts,
retries, limits). Nothing here is imported before it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_base": ("LlmClient",),
        "_factory": ("PROVIDERS", "ProviderPreset", "create_llm_call", "parse_llm_spec"),
        "http._options": ("HttpOptions",),
        "http._retry": ("RetryPolicy",),
        "openai._client": ("OpenAIChatClient",),
        "anthropic._client": ("AnthropicMessagesClient",),
        "llamacpp._client": ("LlamaCppClient", "default_model_path"),
        "yiemagent.errors": ("LlmAbortedError", "LlmError", "LlmStreamError", "LlmTimeoutError"),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.errors import LlmAbortedError as LlmAbortedError
    from yiemagent.errors import LlmError as LlmError
    from yiemagent.errors import LlmStreamError as LlmStreamError
    from yiemagent.errors import LlmTimeoutError as LlmTimeoutError
    from yiemagent.llm._base import LlmClient as LlmClient
    from yiemagent.llm._factory import PROVIDERS as PROVIDERS
    from yiemagent.llm._factory import ProviderPreset as ProviderPreset
    from yiemagent.llm._factory import create_llm_call as create_llm_call
    from yiemagent.llm._factory import parse_llm_spec as parse_llm_spec
    from yiemagent.llm.anthropic._client import AnthropicMessagesClient as AnthropicMessagesClient
    from yiemagent.llm.http._options import HttpOptions as HttpOptions
    from yiemagent.llm.http._retry import RetryPolicy as RetryPolicy
    from yiemagent.llm.llamacpp._client import LlamaCppClient as LlamaCppClient
    from yiemagent.llm.llamacpp._client import default_model_path as default_model_path
    from yiemagent.llm.openai._client import OpenAIChatClient as OpenAIChatClient

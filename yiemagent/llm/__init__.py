"""Provider clients usable as an agent's ``llm_call``: OpenAI-compatible and Anthropic over HTTP,
and a model embedded in the process.

``OpenAIChatClient`` talks to OpenAI and the servers that copy its chat-completions API (Ollama,
vLLM, llama.cpp's server, LM Studio, OpenRouter); ``AnthropicMessagesClient`` to Anthropic's
Messages API; ``LlamaCppClient`` runs a GGUF model in-process (SmolLM2-135M by default, from the
``local`` extra); ``create_llm_call("openai:gpt-4o-mini")`` or ``create_llm_call("local")``
builds any of them from one string. Both retry
transient failures, stream when asked, stop promptly on abort, and never reveal the api key.
``RequestInterrupter`` and ``interruptible_session`` give any tool the same prompt abort for its own
``requests`` calls (see ``tools/getWeather.py``).
"""

from yiemagent.llm.abortable import RequestInterrupter, interruptible_session
from yiemagent.llm.anthropic import ANTHROPIC_VERSION, AnthropicMessagesClient
from yiemagent.llm.anthropic_parse import ANTHROPIC_API
from yiemagent.llm.base import LlmClient
from yiemagent.llm.errors import LlmAbortedError, LlmError, LlmStreamError, LlmTimeoutError
from yiemagent.llm.factory import PROVIDERS, ProviderPreset, create_llm_call, parse_llm_spec
from yiemagent.llm.llamacpp import LlamaCppClient, default_model_path
from yiemagent.llm.openai import OpenAIChatClient
from yiemagent.llm.openai_parse import OPENAI_API
from yiemagent.llm.retry import RetryPolicy
from yiemagent.llm.sse import SSEEvent, SSEParser, iter_sse

__all__ = [
    "ANTHROPIC_API",
    "ANTHROPIC_VERSION",
    "OPENAI_API",
    "PROVIDERS",
    "AnthropicMessagesClient",
    "LlamaCppClient",
    "LlmAbortedError",
    "LlmClient",
    "LlmError",
    "LlmStreamError",
    "LlmTimeoutError",
    "OpenAIChatClient",
    "ProviderPreset",
    "RequestInterrupter",
    "RetryPolicy",
    "SSEEvent",
    "SSEParser",
    "create_llm_call",
    "default_model_path",
    "interruptible_session",
    "iter_sse",
    "parse_llm_spec",
]

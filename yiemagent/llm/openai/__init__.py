"""The chat-completions API of OpenAI and of the servers that copy it (Ollama, vLLM, llama.cpp,
LM Studio, OpenRouter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_client": ("OpenAIChatClient",),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.llm.openai._client import OpenAIChatClient as OpenAIChatClient

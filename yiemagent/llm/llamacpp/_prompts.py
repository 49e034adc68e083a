"""What ``LlamaCppClient`` asks a small local model, and the grammars that hold it to the answer.

A 135M-parameter model does not follow a tool-calling format on its own: asked "What time is it
in Tokyo?" with four tools described in its system prompt, SmolLM2-135M just makes up an answer.
It does well at narrower tasks, so a turn with tools is split into steps whose output is
constrained by llama.cpp grammars (GBNF):

1. **Choose**: the tools the question is about are the candidates (``candidates``): it shares a
   topic word with the tool's name or description, not just a request verb ("write" does not
   make "Write an email" a job for writeTool) nor a name among its examples ("Tokyo" does not
   make "How hot is it in Tokyo?" one for getTime; such a question gets ``clarification``). The
   model, which favours the first option it reads whatever the question, would otherwise call
   a tool for a greeting. A short multiple-choice prompt lists the candidates, most relevant
   first (name and first sentence of the description), with the question, and the grammar
   allows only a candidate's name or ``none``.
2. **Fill**: the chosen tool's arguments are generated after ``<tool_call>{"name": ...,
   "arguments": `` under a grammar made from the tool's JSON schema, so they follow it
   (strings without control characters, so a looping model cannot run on for lines); the
   client never sends arguments the token limit cut off.
3. **Answer**: after a tool result, the conversation shows the call and the result, and the
   grammar makes the answer one sentence that states the result's value (the text after its
   ``Label:``) word for word, after a lead such as "The current time in Tokyo is" (``grounding``).

Everything here is pure text work, testable without a model.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = [
    "ANSWER_HINT",
    "DEFAULT_SYSTEM",
    "GLUE_WORDS",
    "LEAD_WORDS",
    "NONE_CHOICE",
    "Grounding",
    "Relevance",
    "answer_grammar",
    "answer_leads",
    "answer_words",
    "candidates",
    "choice_grammar",
    "choice_prompt_messages",
    "clarification",
    "failed_result",
    "fill_prefix",
    "fill_prompt_messages",
    "first_sentence",
    "gbnf_literal",
    "grounding",
    "message_text",
    "output_prompt_messages",
    "output_schema_of",
    "relevance",
    "result_label",
    "result_value",
    "sentence_end",
    "transcript",
]

DEFAULT_SYSTEM = "You are a helpful assistant."
ANSWER_HINT = "Answer my question with this result, in one sentence."
NONE_CHOICE = "none"
LEAD_WORDS = 12  # the most words a grounded answer has before the tool result's value
# Words any grounded answer may need besides the question's and the result's.
GLUE_WORDS = (
    "the",
    "is",
    "are",
    "was",
    "it",
    "it's",
    "in",
    "at",
    "of",
    "for",
    "on",
    "now",
    "right",
    "currently",
    "current",
    "today",
    "here",
    "there",
    "this",
    "and",
    "with",
)
MAX_VALUE_CHARS = 1000  # a longer result is grounded on its start only
FAILED_LEAD = "Sorry, that did not work: "
_FAILED = re.compile(r'Tool "[^"\n]{1,200}" failed: ')
_SENTENCE_END = re.compile(r"[.!?]\s+(?=[A-Z])")
_SENTENCE_BREAK = re.compile(r"[.!?][\"')\]]*(?=\s)|\n")
_FINAL_END = re.compile(r"[.!?][\"')\]]*(?=\s|$)|\n")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.")
_ANSWER_WORD = re.compile(r"[^\W\d_]+")  # letters only: no number can be written with them
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
# Words too common to tie a question to a tool.
_STOP_WORDS_TEXT = (
    "a an and any are as at be by can current do does for from get give how i in is it its me my "
    "now of on or please right show tell that the this to today what whats when where which who "
    "why will with you your e g eg such like well known city name"
)
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
# Verbs that ask for something without saying what about (stemmed as ``_stem`` does): no reason
# on their own to call a tool whose name or description has them.
_REQUEST_VERBS_TEXT = (
    "add ask build call check compose create draft fetch find generate get help know let list "
    "look make need new put read run say search see send set start try use want write"
)
_REQUEST_VERBS = frozenset(_REQUEST_VERBS_TEXT.split())


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


def sentence_end(text: str, final: bool) -> int:
    """Return where the last full sentence or line of ``text`` ends (0 when none does): after a
    line break, or after a ``.``, ``!`` or ``?`` (and any closing quote or bracket) that is
    followed by white space, or (``final``: nothing more will come) by the end of the text. A
    full stop inside a number (``2.5``) ends nothing."""
    ends = _FINAL_END if final else _SENTENCE_BREAK
    found = 0
    for match in ends.finditer(text):
        found = match.end()
    return found


def message_text(content: Any) -> str:
    """Return the text of an OpenAI ``content`` value: a string as it is, text parts joined by
    lines, anything else empty (images are dropped: the local model reads text only)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
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
    with tool results, ``ANSWER_HINT`` follows them: with it, a small model answering under
    ``grounding``'s grammar picks "The current time in Tokyo is" over a copy of the label."""
    systems = [
        message_text(m.get("content"))
        for m in messages
        if isinstance(m, Mapping) and m.get("role") in ("system", "developer")
    ]
    out: list[dict[str, str]] = [
        {"role": "system", "content": "\n\n".join(s for s in systems if s) or system}
    ]
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


def output_schema_of(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema a request's ``response_format`` asks the reply to match, or ``None``
    (OpenAI's ``json_schema`` form, or llama.cpp's ``json_object`` with a ``schema``)."""
    fmt = request.get("response_format")
    if not isinstance(fmt, Mapping):
        return None
    inner = fmt.get("json_schema")
    schema = inner.get("schema") if isinstance(inner, Mapping) else fmt.get("schema")
    if isinstance(schema, Mapping):
        return dict(schema)
    return {"type": "object"} if fmt.get("type") in ("json_object", "json_schema") else None


def output_prompt_messages(
    messages: Sequence[Any], system: str, schema: Mapping[str, Any]
) -> list[dict[str, str]]:
    """The conversation for an answer that is data: the transcript, its system message asking
    for JSON that matches ``schema``, and after tool results a request to put them in it."""
    convo = transcript(messages, system)
    shown = json.dumps(schema, ensure_ascii=False)
    convo[0] = {
        "role": "system",
        "content": f"{convo[0]['content']}\nAnswer with only a JSON object that matches this "
        f"JSON Schema: {shown}",
    }
    last = convo[-1]["content"]
    if last.endswith(ANSWER_HINT):
        asked = "Answer my question with this result, as the JSON object."
        convo[-1] = {"role": "user", "content": last[: -len(ANSWER_HINT)] + asked}
    return convo


def choice_prompt_messages(tools: Sequence[Mapping[str, Any]], question: str) -> list[dict[str, str]]:
    """Return the step-1 conversation: which of ``tools`` (OpenAI ``function`` entries) answers
    ``question``, to be answered with a tool name or ``none`` (see ``choice_grammar``)."""
    lines = "\n".join(f"{t['name']}: {first_sentence(t.get('description') or '')}" for t in tools)
    ask = (
        f"Tools:\n{lines}\n\nQuestion: {question}\n"
        f"Which tool answers the question? Reply with the tool name, or {NONE_CHOICE}."
    )
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


def fill_prompt_messages(
    messages: Sequence[Any], tool: Mapping[str, Any], system: str
) -> list[dict[str, str]]:
    """Return the step-2 conversation: the request's conversation with a system message naming
    only the chosen ``tool``, so the model's attention is on its arguments."""
    described = f"Tool {tool['name']}: {first_sentence(tool.get('description') or '')}"
    convo = transcript(messages, system)
    convo[0] = {"role": "system", "content": f"{convo[0]['content']}\n{described}"}
    return convo


def fill_prefix(name: str) -> str:
    """Return the text the assistant's reply is started with in step 2, up to the arguments."""
    return '<tool_call>{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '


def _labelled(text: str) -> tuple[str, str]:
    """Split a one-line result ``Label: value`` into its label and value; ``("", text)`` for a
    result without a short leading label, of several lines, or of a failed call."""
    if "\n" not in text and not _FAILED.match(text):
        label, colon, value = text.partition(": ")
        if colon and value.strip() and 0 < len(label) <= 80:
            return label.strip(), value.strip()
    return "", text


def result_label(result: str) -> str:
    """Return the label of a one-line ``Label: value`` tool result (``Current time in Tokyo``),
    or ``""`` when it has none (see ``result_value``)."""
    return _labelled(result.strip())[0]


def result_value(result: str) -> str:
    """Return the part of a tool result an answer must state, at most ``MAX_VALUE_CHARS`` long:
    a one-line result after its leading ``Label:`` and before its first bracket
    (``Current time in Tokyo: 2026-12-01T01:16:10+09:00 (Tuesday, ...)`` gives
    ``2026-12-01T01:16:10+09:00``), a result of several lines whole, and a failed call's error after the
    pipeline's ``Tool "name" failed:`` prefix."""
    text = result.strip()
    failed = _FAILED.match(text)
    if failed:
        return text[failed.end() :][:MAX_VALUE_CHARS]
    if "\n" not in text:
        text = _labelled(text)[1]
        # The fact itself, not the remarks in brackets after it: a model that states the fact
        # in its own words keeps to it, instead of inventing more before the bracketed part.
        fact = text.split(" (", 1)[0].rstrip(" ,;")
        if len(fact) >= 4:
            text = fact
    return text[:MAX_VALUE_CHARS]


def failed_result(result: str) -> bool:
    """Whether a tool result is the pipeline's report of a failed call."""
    return _FAILED.match(result.strip()) is not None


def answer_words(sources: Iterable[str]) -> list[str]:
    """The words a grounded answer may use besides the value: those of ``sources`` (the question
    and the tool's result) and ``GLUE_WORDS``, each as written and capitalised (a name is never
    offered in lower case: a small model took "tokyo")."""
    out: dict[str, None] = {}
    for word in [*_ANSWER_WORD.findall(" ".join(sources)), *GLUE_WORDS]:
        for form in (word, word[:1].upper() + word[1:]):
            out.setdefault(form, None)
    return list(out)


def answer_leads(label: str) -> list[str]:
    """Return the ways a grounded answer may begin when the result has ``label``: ``The <label>
    is``, ``The <label> are`` (the label's first letter in lower case) and ``<label>:``."""
    lowered = label[:1].lower() + label[1:]
    return [f"The {lowered} is ", f"The {lowered} are ", f"{label}: "]


def _ending(value: str) -> str:
    """The full stop a grounded answer ends with: none after a value that ends a sentence."""
    return "" if value.rstrip()[-1:] in (".", "!", "?") else "."


def answer_grammar(value: str, leads: Sequence[str] = (), words: Sequence[str] = ()) -> str:
    """Return the GBNF of a one-sentence answer that states ``value`` word for word and ends
    (see ``_ending``): after one of ``leads`` when there are any, else after up to
    ``LEAD_WORDS`` of ``words`` (or "The result is") and a space or a colon."""
    rules = [f"root ::= lead {gbnf_literal(value)} {gbnf_literal(_ending(value))}"]
    if leads:
        rules.append("lead ::= " + " | ".join(gbnf_literal(lead) for lead in leads))
    else:
        rules.append(f'lead ::= word ((" " | ", ") word){{0,{LEAD_WORDS - 1}}} (" " | ": ")')
        rules.append("word ::= " + " | ".join(gbnf_literal(w) for w in words or ("The", "result", "is")))
    return "\n".join(rules) + "\n"


class Grounding(NamedTuple):
    """How step 3 answers one tool result: the ``value`` it states, the ``grammar`` it is
    generated under, and the ``leads`` it may begin with (empty: words, see ``grounding``)."""

    value: str
    grammar: str
    leads: tuple[str, ...]

    def answer(self, text: str) -> str | None:
        """Return the whole answer once ``text``, generated under ``grammar``, has begun the
        value: from there on the grammar allows only the rest of the value and the full stop,
        so they need not be generated token by token. ``None`` while ``text`` is in its lead.
        Without ``leads`` the value has begun where ``text`` ends in a start of it that follows
        a space or a colon (the longest such start; either way the answer is one the grammar
        allows)."""
        value, ending = self.value, _ending(self.value)
        if self.leads:
            for lead in self.leads:
                rest = text[len(lead) :]
                if text.startswith(lead) and rest and value.startswith(rest):
                    return lead + value + ending
            return None
        for start in range(1, len(text)):
            if text[:start].endswith((" ", ":")) and value.startswith(text[start:]):
                return text[:start] + value + ending
        return None


def grounding(result: str, question: str) -> Grounding | None:
    """Return how to answer ``question`` with a tool's ``result`` (``None`` when the result
    states nothing): a one-sentence answer that states ``result_value(result)`` word for word.

    What comes before the value is narrow, because a small model given free rein there
    apologised ("I'm sorry for your loss, but as a text-based AI"), echoed its instructions,
    glued the value to a word or went on to invent a second value. A labelled result is
    answered after one of the ``answer_leads`` of its label ("The current time in Tokyo is"),
    the model choosing which; another after words taken from ``answer_words`` of the question
    and the result, so that no number and no word of the model's own can be written; a failed
    call after ``FAILED_LEAD``, as a small model asked about a failure makes up the answer it
    could not get."""
    value = result_value(result)
    if not value:
        return None
    label = result_label(result)
    if failed_result(result):
        leads: tuple[str, ...] = (FAILED_LEAD,)
    elif label:
        leads = tuple(answer_leads(label))
    else:
        leads = ()
    words = () if leads else tuple(answer_words([question, result.replace(value, " ")]))
    return Grounding(value, answer_grammar(value, leads, words), leads)


def _stem(word: str) -> str:
    """``word`` in lower case without a plural or ``-ing`` ending (``tools`` -> ``tool``)."""
    word = word.lower()
    for ending in ("ing", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def _words(text: str) -> set[str]:
    """The content words of ``text``: camelCase and snake_case split, stemmed (``_stem``), stop
    words left out."""
    return {_stem(w) for w in _WORD.findall(text) if w.lower() not in _STOP_WORDS and len(w) >= 3}


def _proper_nouns(text: str) -> set[str]:
    """The content words of ``text`` (as ``_words``) written with a capital where no sentence
    starts and no camelCase word goes on: names such as ``Tokyo`` or ``UTC`` in a tool's
    examples, which say what its arguments may be, not what it is about."""
    out = set()
    for match in _WORD.finditer(text):
        word, before = match[0], text[: match.start()].rstrip()
        if not word[:1].isupper() or word.lower() in _STOP_WORDS or len(word) < 3:
            continue
        camel = match.start() > 0 and text[match.start() - 1].isalpha()
        starts = not before or (
            before.endswith((".", "!", "?")) and not before.lower().endswith(_ABBREVIATIONS)
        )
        if not camel and not starts:
            out.add(_stem(word))
    return out


def _name_verb(name: str) -> str:
    """The leading verb of a tool name of several words (``get`` of ``getTime``, ``write`` of
    ``write_tool``), stemmed; empty for a one-word name, whose one word is its topic."""
    parts = _WORD.findall(name)
    return _stem(parts[0]) if len(parts) > 1 else ""


class Relevance(NamedTuple):
    """How strongly a question is about a tool (see ``relevance``); greater is stronger."""

    topic: int  # 2: a topic word of the tool's name; 1: of its description only; 0: none
    in_name: int  # content words shared with the tool's name, verbs included
    shared: int  # content words shared with the name and description, verbs included
    names: frozenset[str]  # names from the tool's description (its examples) it shares


def relevance(question: str, tool: Mapping[str, Any]) -> Relevance:
    """How strongly ``question`` is about ``tool``. Its ``topic`` is 2 when the question shares
    a topic word with the tool's name (``time`` of ``getTime``), 1 when only with its
    description (``temperature`` of getWeather's), 0 when with neither. A request verb
    (``write``, ``get``, ``list``, the verb of the tool's name) counts in ``in_name`` and
    ``shared`` but is no topic: "Write an email" shares only ``write`` with writeTool and is
    not about it. Nor is a name in the description (``Tokyo`` among getTime's examples): "How
    hot is it in Tokyo?" is not about the time; such names are ``names``."""
    asked = _words(question)
    name = str(tool.get("name", ""))
    description = str(tool.get("description") or "")
    verbs = _REQUEST_VERBS | {_name_verb(name)}
    names = _proper_nouns(description)
    in_name = asked & _words(name)
    in_description = asked & _words(description)
    topic = 2 if in_name - verbs else 1 if in_description - verbs - names else 0
    return Relevance(topic, len(in_name), len(in_name | in_description), frozenset(in_description & names))


def candidates(question: str, tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The tools step 1 may choose from for ``question``, most relevant first: those it shares
    a topic word with (``relevance``), and when some share one with their name, only those. The
    order matters: a small model favours the first option it reads (and, given one option,
    takes it whatever the question: the choice is only as good as this list)."""
    scored = [(relevance(question, tool), index, tool) for index, tool in enumerate(tools)]
    best = max((score.topic for score, _index, _tool in scored), default=0)
    kept = [(score, index, tool) for score, index, tool in scored if score.topic == best > 0]
    kept.sort(key=lambda item: (-item[0].in_name, -item[0].shared, item[1]))
    return [tool for _score, _index, tool in kept]


def clarification(question: str, tools: Sequence[Mapping[str, Any]]) -> str | None:
    """Return the reply to ``question`` when it is about no tool (no ``candidates``) but names
    what some tool's examples name ("Quel temps fait-il à Tokyo ?", "How hot is it in Tokyo?"
    and getTime's ``Tokyo``): that it cannot tell what is asked about that name, and what
    those tools do. ``None`` when no tool's examples are named. Calling the tool would answer
    another question, and a small model left to answer alone makes up facts about the place."""
    named: dict[str, str] = {}
    for tool in tools:
        shared = relevance(question, tool).names
        if shared:
            named.setdefault(first_sentence(tool.get("description") or ""), "")
            for word in _WORD.findall(question):
                if _stem(word) in shared:
                    named.setdefault(word, word)
    places = [w for w in named.values() if w]
    if not places:
        return None
    abilities = "; ".join(k for k, v in named.items() if not v)
    return (
        f"I can't tell what you want to know about {' and '.join(places)}. What I can do: "
        f"{abilities} Ask me about that in other words, or use a larger model."
    )

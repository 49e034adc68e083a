"""What a user would not accept in an answer, as lists of problems (empty: the answer is fine).

The bar "the output contains getTime, Tokyo and a time" let through answers that began "I'm
sorry for your loss, but as a text-based AI, I don't see2026-12-01T18:17:05+09:00" (issue 19);
these checks read the answer as its user does: the tool's value stated once and not glued to a
word, no apology, no second date, time or number the tool did not give, no talk about the
prompt or the tools, at most two sentences, and a clean end. ``tests/cli/test_first_answers.py``
applies them to the embedded model's answers, and tests them on the issue's bad answers.
"""

from __future__ import annotations

import re

APOLOGY = re.compile(
    r"\b(?:sorry|apologi[sz]e|unfortunately|condolences|as an? (?:ai|text-based "
    r"ai|language model))\b",
    re.IGNORECASE,
)
CANNOT = re.compile(
    r"\b(?:i (?:can ?not|can't|can’t|am (?:not able|unable))|i'm (?:not able|"
    r"unable)|i (?:do not|don't|don’t) have (?:access|the ability|real-time))\b",
    re.IGNORECASE,
)
DATE_OR_TIME = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?|"
    r"(?<![\d.])\d{1,2}:\d{2}(?::\d{2})?(?![\d.])"
)
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Words of the machinery, not of an answer: the prompt's instructions, tags, tool names.
MACHINERY = re.compile(
    r"in one sentence|<|>|tool_(?:call|response)|\b(?:getTime|getWeather|"
    r"writeTool|listTools|JSON)\b",
    re.IGNORECASE,
)
SENTENCE_END = re.compile(r"[.!?]+[\"'’”)\]]*(?=\s|$)")
CLEAN_END = tuple(".!?)]\"'’”")
MASK = "VALUE"


def sentence_count(text: str) -> int:
    """How many sentences ``text`` has: each ``.``, ``!`` or ``?`` followed by white space or
    the end closes one (a decimal point does not), and text after the last one is one more."""
    ends = list(SENTENCE_END.finditer(text))
    rest = text[ends[-1].end() :] if ends else text
    return len(ends) + (1 if rest.strip() else 0)


def ends_cleanly(text: str) -> bool:
    """Whether ``text`` ends a sentence (or a bracket or quote), or a short last line such as
    the name under an email: not a word cut off by the token limit."""
    stripped = text.rstrip()
    if stripped.endswith(CLEAN_END):
        return True
    last_line = stripped.rsplit("\n", 1)[-1]
    return "\n" in stripped and len(last_line.split()) <= 4


def numbers_in(text: str) -> set[str]:
    """The numbers written in ``text`` (``22.5``, ``2026``), leading zeros kept."""
    return set(NUMBER.findall(text))


def found(pattern: re.Pattern[str], text: str) -> str | None:
    """The first match of ``pattern`` in ``text``, or ``None``."""
    match = pattern.search(text)
    return match[0] if match else None


def common_problems(answer: str, apology: bool = False) -> list[str]:
    """Problems any answer can have: empty, an apology (unless ``apology``: an honest "I'm
    sorry, I can't" is fine), talk of the machinery, a cut-off end."""
    if not answer.strip():
        return ["the answer is empty"]
    problems = []
    if not apology and found(APOLOGY, answer):
        problems.append(f"it apologises ({found(APOLOGY, answer)!r})")
    if found(MACHINERY, answer):
        problems.append(f"it talks about its prompt or tools ({found(MACHINERY, answer)!r})")
    if not ends_cleanly(answer):
        problems.append(f"it does not end cleanly (…{answer.rstrip()[-20:]!r})")
    return problems


def grounded_problems(answer: str, value: str, result: str, question: str = "") -> list[str]:
    """What is wrong with ``answer`` to ``question``, which should state a tool's ``value``
    (found in its ``result`` text): missing, glued to the word before it or stated twice; an
    apology or a refusal; another date or time, or a number neither the result nor the question
    holds; more than two sentences; the question repeated; talk of the machinery; a cut-off
    end."""
    problems = common_problems(answer)
    if not answer.strip():
        return problems
    where = answer.find(value)
    if where < 0:
        problems.append(f"the tool's value {value!r} is missing")
    else:
        if where > 0 and answer[where - 1].isalnum():
            problems.append(f"the value is glued to the word before it ({answer[:where][-12:]!r})")
        if answer.count(value) > 1:
            problems.append("the value is stated more than once")
    if found(CANNOT, answer):
        problems.append(f"it says it cannot ({found(CANNOT, answer)!r})")
    masked = answer.replace(value, MASK)
    others = [d for d in DATE_OR_TIME.findall(masked) if d not in result]
    if others:
        problems.append(f"a date or time the tool did not give: {others}")
    invented = sorted(numbers_in(masked) - numbers_in(result) - numbers_in(question))
    if invented and not others:
        problems.append(f"numbers the tool did not give: {invented}")
    count = sentence_count(masked)
    if count > 2:
        problems.append(f"{count} sentences (at most two)")
    asked = question.strip().rstrip("?!. ").lower()
    if len(asked) >= 10 and asked in answer.lower():
        problems.append("it repeats the question")
    return problems


def says_cannot(answer: str) -> bool:
    """Whether ``answer`` honestly says it cannot do what was asked ("I can't", "I'm unable")."""
    return CANNOT.search(answer) is not None

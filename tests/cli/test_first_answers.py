"""The embedded model's first answers, read as a newcomer reads them (issue 19).

The README's first command, ``yiemagent run "What time is it in Tokyo?"``, runs 20 times as a
real subprocess with the embedded model (SmolLM2-135M) and the command's defaults, and so does
the weather question against the loopback Open-Meteo server. Decoding is greedy, so what varies
between runs is what varies for a user: the time the tool reads (its seconds, minutes, hours),
and, for the weather, the conditions the server reports (a different sky, temperature, humidity
and wind each run). Every answer is checked with ``answer_checks``: the tool's value stated,
no apology, no date, time or number the tool did not give, at most two sentences; at least 19
of 20 must pass. Five more first questions (a question no tool answers, a small sum, a question
in French, a request to write something, a greeting; two phrasings each) run in one process
through the same client, system prompt and tools as the command, since a model load per
question would double the file's time; each reply is fixed for its question, so one run each
says all there is. A developer's default run (``YIEMAGENT_TEST_SIZE=quick``) runs each command 5
times, all but one to pass; CI runs the issue's 20 (see ``tests/tiers.py``).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import openmeteo_server
import pytest
from answer_checks import common_problems, grounded_problems, numbers_in, says_cannot
from cli_helpers import clean_env
from openmeteo_server import OpenMeteoServer
from paths import ROOT
from tiers import sized

from yiemagent import (
    AgentToolCall,
    TextContent,
    ToolResultMessage,
    ToolStore,
    YiemAgent,
    get_tools,
    load_tools,
)
from yiemagent.cli._session import DEFAULT_SYSTEM_PROMPT
from yiemagent.llm import LlamaCppClient

pytestmark = pytest.mark.timeout(900)  # 20 runs of the model per test; about 3 s each when idle

TOOLS = ROOT / "tools"
RUNS = sized(quick=5, full=20)
ACCEPTED = RUNS - 1  # the issue's bar: 19 of 20
RUN_TIMEOUT_S = 240  # one command, on a 2-core machine other work shares
TOKYO_COORDS = (35.69, 139.69)  # the key of Tokyo's conditions in the loopback server
WMO_CODES = (0, 1, 2, 3, 45, 51, 53, 61, 63, 65, 71, 73, 80, 95)


# --- the checks themselves, on the issue's bad answers --------------------------------------------

ISO = "2026-12-01T18:17:05+09:00"
RESULT = f"Current time in Tokyo: {ISO} (Tuesday, time zone Asia/Tokyo, JST)"
QUESTION = "What time is it in Tokyo?"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        # The issue's answers, written out whole as the old code gave them.
        (
            f"I'm sorry for your loss, but as a text-based AI, I don't see{ISO} (Tuesday, time zone "
            "Asia/Tokyo, JST) and you're asking about the current time in Tokyo.",
            "apologises",
        ),
        (
            f"I'm sorry for your loss, but as a text-based AI, I don't see{ISO} (Tuesday, time zone "
            "Asia/Tokyo, JST) and you're asking about the current time in Tokyo.",
            "glued",
        ),
        (
            f"I'm sorry for your loss, but as a text-based AI, I don't see{ISO}. You need to use "
            "2023-04-22T12:00:00Z.",
            "a date or time the tool did not give: ['2023-04-22T12:00:00']",
        ),
        (
            f"The answer is in one sentence. The tool responds with a time{ISO} (Tuesday, time zone "
            "Asia/Tokyo, JST)",
            "talks about its prompt",
        ),
        (
            f'The answer is in one sentence. The result of the "getTime" ({ISO}) time zone Japan\'s '
            f"current local time, which is {ISO}.",
            "stated more than once",
        ),
        # And others the old code or a loose grammar wrote.
        (f"It is {ISO}. In Tokyo the sun sets at 16:28. Have a good evening.", "did not give"),
        (f"It is {ISO}. The sun has set. It is dark. Good night.", "sentences (at most two)"),
        (f"What time is it in Tokyo, Tuesday, time zone Asia, JST: {ISO}.", "repeats the question"),
        ("I don't know the time in Tokyo.", "is missing"),
        (f"The current time in Tokyo is {ISO}, and the sun is sett", "does not end cleanly"),
    ],
)
def test_the_checks_reject_the_issues_bad_answers(answer: str, problem: str) -> None:
    problems = grounded_problems(answer, ISO, RESULT, QUESTION)
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    "answer",
    [
        f"The current time in Tokyo is {ISO}.",
        f"Current time in Tokyo: {ISO}.",
        f"It is {ISO} in Tokyo (Tuesday, JST). Have a good evening!",
    ],
)
def test_the_checks_accept_good_answers(answer: str) -> None:
    assert grounded_problems(answer, ISO, RESULT, QUESTION) == []


def test_the_checks_judge_the_weather_by_the_tools_numbers() -> None:
    result = (
        "Weather in Tokyo, Tokyo, Japan: partly cloudy, 22.5°C (feels like 21.0°C), "
        "humidity 40%, wind 10.0 km/h (observed 2026-03-26T16:15 local time)"
    )
    value = "partly cloudy, 22.5°C"
    assert grounded_problems(f"The weather in Tokyo is {value}, humidity 40%.", value, result) == []
    assert grounded_problems(f"The weather in Tokyo is {value}, humidity 75%.", value, result) == [
        "numbers the tool did not give: ['75']"
    ]


# --- the README's first command and the weather question, 20 runs each ----------------------------


@attrs.define
class Run:
    """One ``yiemagent run``: what it printed on stdout (the answer) and its tool calls."""

    answer: str
    exit_code: int
    stderr: str
    calls: list[dict[str, Any]]  # tool_execution_end events: tool_name, text, result.details
    arguments: list[dict[str, Any]]


def run_command(question: str, events: Path) -> Run:
    """Run ``yiemagent run QUESTION`` as a newcomer does (no key in the environment: the
    embedded model; the default tools and system prompt), recording its events in ``events``."""
    done = subprocess.run(
        [sys.executable, "-m", "yiemagent", "run", question, "--events-file", str(events)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    lines = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    return Run(
        done.stdout.strip(),
        done.returncode,
        done.stderr,
        [e for e in lines if e["type"] == "tool_execution_end"],
        [e["arguments"] for e in lines if e["type"] == "tool_execution_start"],
    )


def call_problems(run: Run, tool: str) -> list[str]:
    """What is wrong with the tool calls of ``run``, which should be one good call of ``tool``
    for Tokyo."""
    if run.exit_code != 0:
        return [f"exit code {run.exit_code}: {run.stderr[-300:]}"]
    names = [c["tool_name"] for c in run.calls]
    if names != [tool]:
        return [f"the tools called were {names}, not [{tool!r}]"]
    if run.calls[0]["is_error"]:
        return [f"the call failed: {run.calls[0]['text']}"]
    if run.arguments[0].get("city") not in ("Tokyo", "Asia/Tokyo"):
        return [f"the call's arguments were {run.arguments[0]}"]
    return []


def tally(results: list[tuple[str, list[str]]], what: str) -> int:
    """Print how many answers were accepted (and each refused one); return the count."""
    good = sum(not problems for _answer, problems in results)
    print(f"\n{what}: {good} of {len(results)} answers accepted")
    for answer, problems in results:
        if problems:
            print(f"  refused {answer!r}: {problems}")
    return good


@pytest.mark.needs("local")
def test_the_readme_first_command_answers_well(tmp_path: Path) -> None:
    results = []
    for index in range(RUNS):
        run = run_command(QUESTION, tmp_path / f"events-{index}.jsonl")
        problems = call_problems(run, "getTime")
        if not problems:
            call = run.calls[0]
            problems = grounded_problems(run.answer, call["result"]["details"]["iso"], call["text"], QUESTION)
        results.append((run.answer, problems))
    assert tally(results, QUESTION) >= ACCEPTED, results


def conditions(rng: random.Random) -> dict[str, float | int]:
    """A current weather the loopback server reports for Tokyo in one run."""
    temperature = round(rng.uniform(-12.0, 38.0), 1)
    return {
        "temperature_2m": temperature,
        "apparent_temperature": round(temperature - rng.uniform(0.0, 4.0), 1),
        "relative_humidity_2m": rng.randint(12, 100),
        "weather_code": rng.choice(WMO_CODES),
        "wind_speed_10m": round(rng.uniform(0.0, 55.0), 1),
    }


@pytest.mark.needs("local")
def test_the_weather_question_answers_well(
    meteo: OpenMeteoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = "What's the weather in Tokyo?"
    rng = random.Random(19)
    results = []
    for index in range(RUNS):
        served = conditions(rng)
        monkeypatch.setitem(openmeteo_server.CONDITIONS, TOKYO_COORDS, served)
        run = run_command(question, tmp_path / f"events-{index}.jsonl")
        problems = call_problems(run, "getWeather")
        if not problems:
            call = run.calls[0]
            details = call["result"]["details"]
            assert details["current"]["temperature_2m"] == served["temperature_2m"]  # loopback
            value = (
                f"{details['conditions']}, {details['current']['temperature_2m']}"
                f"{details['current_units']['temperature_2m']}"
            )
            problems = grounded_problems(run.answer, value, call["text"], question)
        results.append((run.answer, problems))
    assert tally(results, question) >= ACCEPTED, results


# --- five other first questions ---------------------------------------------------------------------


@attrs.define
class Reply:
    """The answer to one question, and the tool calls made for it (with their result texts)."""

    answer: str
    calls: list[tuple[str, dict[str, Any], str]]


@pytest.fixture(scope="module")
def ask(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Reply]]:
    """Ask a question as ``yiemagent run`` does, in this process: the embedded model (loaded
    once), the command's default system prompt, and a fresh copy of the example tools."""
    llm = LlamaCppClient()
    folder = tmp_path_factory.mktemp("first-answers") / "tools"

    def asking(question: str) -> Reply:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(TOOLS, folder, ignore=shutil.ignore_patterns("__pycache__"))
        with ToolStore("first-answers") as store:
            load_tools(store, folder)
            with YiemAgent(
                llm_call=llm, tools=get_tools(store), tool_store=store, system_prompt=DEFAULT_SYSTEM_PROMPT
            ) as agent:
                reply = agent.prompt(question, timeout=RUN_TIMEOUT_S)
                history = list(agent.messages)
        calls = [b for m in history for b in m.content if isinstance(b, AgentToolCall)]
        results = [
            "".join(b.text for b in m.content if isinstance(b, TextContent))
            for m in history
            if isinstance(m, ToolResultMessage)
        ]
        text = "".join(b.text for b in reply.content if isinstance(b, TextContent))
        return Reply(text, [(c.name, dict(c.arguments), r) for c, r in zip(calls, results, strict=True)])

    try:
        yield asking
    finally:
        llm.close()


def no_tool(reply: Reply) -> list[str]:
    """A problem when tools were called for a question no tool answers."""
    return [f"it called {[c[0] for c in reply.calls]}"] if reply.calls else []


def mentions(*words: str) -> Callable[[Reply], list[str]]:
    """An expectation: no tool, and a correct answer (naming each of ``words``) or an honest "I
    can't"."""

    def check(reply: Reply) -> list[str]:
        problems = no_tool(reply) + common_problems(reply.answer)
        missing = [w for w in words if not re.search(rf"\b{w}\b", reply.answer, re.IGNORECASE)]
        if missing and not says_cannot(reply.answer):
            problems.append(f"neither says {missing} nor that it cannot")
        return problems

    return check


def cannot(reply: Reply) -> list[str]:
    """An expectation: no tool, and an honest "I can't" (an apology with it is fine)."""
    problems = no_tool(reply) + common_problems(reply.answer, apology=True)
    return problems + ([] if says_cannot(reply.answer) else ["it does not say it cannot"])


def sum_of(a: int, b: int) -> Callable[[Reply], list[str]]:
    """An expectation: no tool, and ``a + b`` answered with no other number (or "I can't")."""

    def check(reply: Reply) -> list[str]:
        problems = no_tool(reply) + common_problems(reply.answer)
        numbers = numbers_in(reply.answer)
        if says_cannot(reply.answer):
            return problems
        if str(a + b) not in numbers or numbers - {str(a), str(b), str(a + b)}:
            problems.append(f"the numbers {sorted(numbers)}, not {a} + {b} = {a + b}")
        return problems

    return check


def tool_or_cannot(tool: str) -> Callable[[Reply], list[str]]:
    """An expectation: a good call of ``tool`` answered with its value, or an honest "I can't"
    and no tool; never another tool."""

    def check(reply: Reply) -> list[str]:
        if not reply.calls:
            return cannot(reply)
        (name, _arguments, result), *more = reply.calls
        if name != tool or more:
            return [f"it called {[c[0] for c in reply.calls]}"]
        value = result.split(": ", 1)[-1].split(" (", 1)[0]
        return grounded_problems(reply.answer, value, result)

    return check


def written(*words: str) -> Callable[[Reply], list[str]]:
    """An expectation: no tool, and a text about ``words`` that ends cleanly (or "I can't")."""

    def check(reply: Reply) -> list[str]:
        problems = no_tool(reply) + common_problems(reply.answer)
        missing = [w for w in words if w.lower() not in reply.answer.lower()]
        if missing and not says_cannot(reply.answer):
            problems.append(f"nothing about {missing}")
        return problems

    return check


def greeting(reply: Reply) -> list[str]:
    """An expectation: no tool, and a short greeting back."""
    problems = no_tool(reply) + common_problems(reply.answer)
    if not re.match(
        r"(hello|hi|hey|good (morning|afternoon|evening)|greetings)\b", reply.answer, re.IGNORECASE
    ):
        problems.append("it does not greet back")
    return problems


@pytest.mark.parametrize(
    ("kind", "question", "expectation"),
    [
        ("no tool can answer", "What is the capital of France?", mentions("Paris")),
        ("no tool can answer", "Can you book me a flight to Paris?", cannot),
        ("a small sum", "What is 2 + 2?", sum_of(2, 2)),
        ("a small sum", "What is 3 + 4?", sum_of(3, 4)),
        ("a question in French", "Quelle heure est-il à Tokyo ?", tool_or_cannot("getTime")),
        ("a question in French", "Quel temps fait-il à Tokyo ?", tool_or_cannot("getWeather")),
        ("a request to write", "Write an email to my boss asking for Friday off.", written("Friday")),
        ("a request to write", "Write two sentences about the sea.", written("sea")),
        ("a greeting", "Hello!", greeting),
        ("a greeting", "Hi, who are you?", greeting),
    ],
)
@pytest.mark.needs("local")
def test_other_first_questions(
    ask: Callable[[str], Reply], kind: str, question: str, expectation: Callable[[Reply], list[str]]
) -> None:
    reply = ask(question)
    print(f"\n{kind}: {question!r} -> {reply.answer!r} (tools: {[c[0] for c in reply.calls]})")
    assert expectation(reply) == [], reply

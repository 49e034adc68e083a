"""``LlmUsage`` holds counts that add up: whole numbers of tokens and a finite cost, never a string a
damaged file or a server put there; and the clients read a server's odd counts as 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yiemagent import LlmUsage
from yiemagent.agent import load_session
from yiemagent.errors import SessionError
from yiemagent.llm.anthropic._parse import usage_from_anthropic
from yiemagent.llm.openai._parse import usage_from_openai


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input", "lots"),
        ("output", -1),
        ("total_tokens", 1.5),
        ("cache_read", True),
        ("cost", "free"),
        ("cost", float("nan")),
        ("cost", float("inf")),
        ("cost", -0.5),
    ],
)
def test_a_count_that_does_not_add_up_is_refused_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises((TypeError, ValueError), match=rf"LlmUsage\.{field} must be"):
        LlmUsage(**{field: value})


def test_usage_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(TypeError, match="usage must be an object of token counts, got list"):
        LlmUsage.from_dict([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("usage", [{"input": "lots"}, {"output": -3}, {"cost": "free"}, [1, 2]])
def test_a_session_file_with_bad_usage_is_a_session_error(tmp_path: Path, usage: Any) -> None:
    message = {"role": "assistant", "content": [], "usage": usage, "stop_reason": "stop", "timestamp": 1}
    session = {
        "format": "yiemagent.session",
        "version": 1,
        "session_id": "s",
        "system_prompt": "",
        "model": None,
        "messages": [message],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(session), encoding="utf-8")
    with pytest.raises(SessionError, match="damaged session file"):
        load_session(path)


def test_the_clients_read_negative_and_non_finite_counts_as_zero() -> None:
    # Python's JSON reader accepts NaN and Infinity, so a server can send them.
    body = json.loads('{"prompt_tokens": -5, "completion_tokens": Infinity, "total_tokens": NaN}')
    assert usage_from_openai(body) == LlmUsage()
    counts = json.loads('{"input_tokens": 3, "output_tokens": -Infinity, "cache_read_input_tokens": -2}')
    assert usage_from_anthropic(counts) == LlmUsage(input=3, total_tokens=3)

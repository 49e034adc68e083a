"""``LlmUsage`` holds counts that add up: whole numbers of tokens and a finite cost, never a string a
damaged file or a server put there; and a server's counts that are not counts make the reply's
usage unknown (unpriced), never 0 tokens costing 0."""

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


UNUSABLE_COUNTS = ["-5", "null", '"12"', "{}", "1e400", "1e300", "9" * 400, "Infinity", "NaN", "1.5", "true"]


@pytest.mark.parametrize("count", UNUSABLE_COUNTS)
def test_an_openai_usage_that_cannot_be_read_is_no_usage(count: str) -> None:
    """Read as 0 tokens, such a reply was priced at 0.0: it is unpriced instead (``None``)."""
    body = json.loads(f'{{"prompt_tokens": {count}, "completion_tokens": 7, "total_tokens": 9}}')
    assert usage_from_openai(body) is None
    assert usage_from_openai(json.loads(f'{{"prompt_tokens": 2, "completion_tokens": {count}}}')) is None
    cached = f'{{"cached_tokens": {count}}}'
    details = f'{{"prompt_tokens": 2, "completion_tokens": 7, "prompt_tokens_details": {cached}}}'
    if count != "null":
        assert usage_from_openai(json.loads(details)) is None
    assert usage_from_openai({}) is None and usage_from_openai({"total_tokens": 5}) is None


@pytest.mark.parametrize("count", UNUSABLE_COUNTS)
def test_an_anthropic_usage_that_cannot_be_read_is_no_usage(count: str) -> None:
    assert usage_from_anthropic(json.loads(f'{{"input_tokens": {count}, "output_tokens": 7}}')) is None
    assert usage_from_anthropic(json.loads(f'{{"input_tokens": 3, "output_tokens": {count}}}')) is None
    if count != "null":
        cached = f'{{"input_tokens": 3, "output_tokens": 7, "cache_read_input_tokens": {count}}}'
        assert usage_from_anthropic(json.loads(cached)) is None
    assert usage_from_anthropic({}) is None


def test_readable_usage_is_read_as_before() -> None:
    body = {"prompt_tokens": 12.0, "completion_tokens": 3, "prompt_tokens_details": None}
    assert usage_from_openai(body) == LlmUsage(input=12, output=3, total_tokens=15)
    counts = {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": None}
    assert usage_from_anthropic(counts) == LlmUsage(input=3, output=4, total_tokens=7)

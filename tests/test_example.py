"""The README's example script runs offline and answers through a real tool call."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "example.py"


def load_example() -> object:
    spec = importlib.util.spec_from_file_location("yiem_example", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_answers_with_the_time_in_tokyo(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_example().main([]) == 0  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert "-> getTime(" in out
    assert "<- getTime [ok]: Current time in Tokyo:" in out
    assert "answer: Here you go: Current time in Tokyo:" in out


def test_example_reports_tool_errors_to_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_example().main(["What time is it in Atlantis?"]) == 0  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert "<- getTime [error]" in out and "Unknown place" in out

"""``scripts/mcp_example.py`` runs offline against the real ``mcp-server-time`` and leaves nothing
running."""

from __future__ import annotations

import importlib.util
import threading

import pytest
from paths import ROOT
from tiers import absent

pytest.importorskip("mcp_server_time", reason=absent("mcp"))

SCRIPT = ROOT / "scripts" / "mcp_example.py"


def load_example() -> object:
    spec = importlib.util.spec_from_file_location("yiem_mcp_example", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_mcp_example_answers_through_the_time_server(capsys: pytest.CaptureFixture[str]) -> None:
    threads = set(threading.enumerate())
    assert load_example().main([]) == 0  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert "tools: time_get_current_time, time_convert_time" in out
    assert '-> time_get_current_time({"timezone": "Asia/Tokyo"})' in out
    assert '<- time_get_current_time [ok]: { "timezone": "Asia/Tokyo"' in out
    assert '<- time_convert_time [ok]: { "source": { "timezone": "Europe/London"' in out
    assert "answer: In Tokyo it is " in out and "09:30 in London is " in out
    for thread in set(threading.enumerate()) - threads:
        thread.join(10)
    assert set(threading.enumerate()) - threads == set()

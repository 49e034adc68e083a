"""Issue 10 (hardening), item 19: tools/getWeather.py's timeout is a deadline for each request as
a whole, so a server that keeps sending a byte now and then cannot hold a lookup forever.

The trickling server sends one byte every 0.05 s, far within the 0.3 s read timeout, and would
need about 20 s for its geocoding answer; it stops by itself, and sooner once the test is over.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from openmeteo_server import OpenMeteoServer
from paths import ROOT

from yiemagent.core._tools import AbortSignal, AgentTool, AgentToolResult
from yiemagent.tools._store import check_tool_file

TOOL_FILE = ROOT / "tools" / "getWeather.py"


@pytest.fixture(scope="module")
def get_weather() -> AgentTool:
    return check_tool_file(TOOL_FILE)


@pytest.fixture
def meteo(meteo: OpenMeteoServer, monkeypatch: pytest.MonkeyPatch) -> OpenMeteoServer:
    """The shared Open-Meteo server, with getWeather's timeout cut to 0.3 s."""
    monkeypatch.setenv("YIEM_WEATHER_TIMEOUT_S", "0.3")
    return meteo


def look_up(tool: AgentTool, signal: AbortSignal | None = None) -> AgentToolResult | Exception:
    """Run the tool for Tokyo; return its result, or the exception it raised."""
    try:
        return tool.execute("call-1", {"city": "Tokyo"}, signal, lambda _p: None)
    except Exception as exc:
        return exc


def test_a_trickling_server_is_cut_off_at_the_timeout(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    meteo.trickle_s = 0.05
    outcome = look_up(get_weather)
    assert isinstance(outcome, RuntimeError), outcome
    assert "The geocoding service did not answer within 0.3 s" in str(outcome)
    assert [path for path, _ in meteo.requests] == ["/v1/search"]


def test_a_quick_answer_is_not_cut_off(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    outcome = look_up(get_weather)  # both requests, each well within its 0.3 s
    assert isinstance(outcome, AgentToolResult), outcome
    assert outcome.details["conditions"] == "partly cloudy"


def test_an_abort_still_ends_a_trickling_request_at_once(
    get_weather: AgentTool, meteo: OpenMeteoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YIEM_WEATHER_TIMEOUT_S", "30")  # only the abort can end it in time
    meteo.trickle_s = 0.05
    signal = AbortSignal()
    outcomes: list[Any] = []
    worker = threading.Thread(target=lambda: outcomes.append(look_up(get_weather, signal)))
    worker.start()
    try:
        assert meteo.request_seen.wait(10)
        signal.abort()
        worker.join(10)  # the trickle alone would take about 20 s
        assert not worker.is_alive()
    finally:
        meteo.stopped.set()
        worker.join()
    [outcome] = outcomes
    assert isinstance(outcome, RuntimeError) and "aborted" in str(outcome)

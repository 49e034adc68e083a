"""Fixtures shared by several test files: the scripted LLM server, and the loopback Open-Meteo
server with getWeather pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llm_server import ScriptedServer
from openmeteo_server import OpenMeteoServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """A scripted loopback HTTP server, stopped (and every blocked reply released) at the end."""
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def meteo(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenMeteoServer]:
    """The loopback Open-Meteo server, with ``tools/getWeather.py``'s endpoints pointed at it and
    its default timeout; stopped at the end."""
    with OpenMeteoServer() as srv:
        monkeypatch.setenv("YIEM_GEOCODING_URL", srv.geocoding_url)
        monkeypatch.setenv("YIEM_FORECAST_URL", srv.forecast_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.delenv("YIEM_WEATHER_TIMEOUT_S", raising=False)
        yield srv

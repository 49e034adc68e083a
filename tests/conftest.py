"""Fixtures shared by several test files: the scripted LLM server, the loopback Open-Meteo
server with getWeather pointed at it, and the real llama-cpp-python server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llama_server import serve
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


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """``http://127.0.0.1:<port>/v1`` of the real llama-cpp-python server, started once for the
    session (its tests and the CLI's share it) and stopped at the end."""
    yield from serve()

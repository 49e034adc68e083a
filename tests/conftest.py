"""Fixtures shared by several test files: the scripted LLM server, the loopback Open-Meteo
server with getWeather pointed at it, and the real llama-cpp-python server; and the
``needs(extra)`` marker, which skips a test whose optional extra is not installed (or fails it
in CI and at ``YIEMAGENT_TEST_SIZE=full``: see ``tiers.py``)."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest
from llama_server import serve
from llm_server import ScriptedServer
from openmeteo_server import OpenMeteoServer
from tiers import EXTRAS, SIZE_VARIABLE, is_missing_extra, require, size, strict


def pytest_configure(config: pytest.Config) -> None:
    size()  # a misspelt YIEMAGENT_TEST_SIZE stops the run before any test
    config.addinivalue_line(
        "markers", f"needs(*extras): the test needs these optional extras ({', '.join(EXTRAS)})"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Check a test's ``needs`` extras before its fixtures start anything."""
    for mark in item.iter_markers("needs"):
        for extra in mark.args:
            require(extra)


def fail_a_missing_extra(report: pytest.CollectReport | pytest.TestReport) -> None:
    """In CI and the full tier (``tiers.strict``), turn the skip of a test or a module for a
    missing extra into a failure, whichever way it was skipped (``tiers``' helpers, the
    ``needs`` marker or a plain ``pytest.importorskip``)."""
    if not (report.skipped and isinstance(report.longrepr, tuple) and strict()):
        return
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    if is_missing_extra(reason):
        report.outcome = "failed"
        report.longrepr = f"{reason}, and CI and {SIZE_VARIABLE}=full need every extra"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    fail_a_missing_extra(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    fail_a_missing_extra(outcome.get_result())


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
    session (its tests and the CLI's share it) and stopped at the end; needs the local extra."""
    require("local")
    yield from serve()

"""tools/getWeather.py against a local server that answers like Open-Meteo."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from openmeteo_server import OpenMeteoServer
from paths import ROOT

from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._events import ToolExecUpdateEvent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage
from yiemagent.core._pipeline import execute_tool_calls
from yiemagent.core._tools import AbortSignal, AgentContext, AgentLoopConfig, AgentTool
from yiemagent.tools._store import check_tool_file

TOOL_FILE = ROOT / "tools" / "getWeather.py"


@pytest.fixture(scope="module")
def get_weather() -> AgentTool:
    return check_tool_file(TOOL_FILE)


def call(tool: AgentTool, args: dict[str, Any], events: list[Any] | None = None) -> ToolResultMessage:
    calls = [AgentToolCall("call-1", tool.name, args)]
    sink = events.append if events is not None else None
    batch = execute_tool_calls(
        AgentContext("", [], {tool.name: tool}),
        AssistantMessage(content=calls),
        calls,
        AgentLoopConfig(),
        None,
        sink,
    )
    return batch.messages[0]


def text(message: Any) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


@pytest.mark.usefixtures("meteo")
def test_current_weather_in_metric_units(get_weather: AgentTool) -> None:
    message = call(get_weather, {"city": "Tokyo"})
    assert not message.is_error, text(message)
    assert text(message) == (
        "Weather in Tokyo, Japan: partly cloudy, 22.5°C (feels like 21.0°C), humidity 40%, "
        "wind 10.0 km/h (observed 2026-03-26T16:15 local time)"
    )
    assert message.details["place"]["latitude"] == 35.6895
    assert message.details["current"]["weather_code"] == 2
    assert message.details["conditions"] == "partly cloudy"
    assert message.details["units"] == "metric"


def test_requests_follow_open_meteo_parameters(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    call(get_weather, {"city": "Berlin"})
    (search_path, search), (forecast_path, forecast) = meteo.requests
    assert search_path == "/v1/search"
    assert search["name"] == ["Berlin"] and search["count"] == ["1"]
    assert forecast_path == "/v1/forecast"
    assert forecast["latitude"] == ["52.52437"] and forecast["longitude"] == ["13.41053"]
    assert set(forecast["current"][0].split(",")) >= {"temperature_2m", "weather_code", "wind_speed_10m"}
    assert forecast["temperature_unit"] == ["celsius"]


def test_imperial_units(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    message = call(get_weather, {"city": "Berlin", "units": "imperial"})
    assert not message.is_error, text(message)
    forecast = meteo.requests[1][1]
    assert forecast["temperature_unit"] == ["fahrenheit"] and forecast["wind_speed_unit"] == ["mph"]
    assert "moderate rain, 41.0°F (feels like 34.7°F)" in text(message)
    assert "wind 12.4 mp/h" in text(message)


def test_units_must_be_metric_or_imperial(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    message = call(get_weather, {"city": "Berlin", "units": "kelvin"})
    assert message.is_error and "is not one of ['metric', 'imperial']" in text(message)
    assert meteo.requests == []


@pytest.mark.usefixtures("meteo")
def test_progress_goes_out_as_partial_results(get_weather: AgentTool) -> None:
    events: list[Any] = []
    call(get_weather, {"city": "Tokyo"}, events)
    updates = [text(e.partial_result) for e in events if isinstance(e, ToolExecUpdateEvent)]
    assert updates == ["Looking up Tokyo…", "Fetching weather for Tokyo, Japan…"]


def test_an_unknown_city(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    message = call(get_weather, {"city": "Atlantis"})
    assert message.is_error
    assert 'No place called "Atlantis" was found' in text(message)
    assert [path for path, _ in meteo.requests] == ["/v1/search"]


def test_http_500_reports_status_and_body(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    meteo.forecast_failure = (500, "upstream database exploded")
    message = call(get_weather, {"city": "Tokyo"})
    assert message.is_error
    assert "The forecast service answered HTTP 500: upstream database exploded" in text(message)


def test_an_open_meteo_error_object_shows_its_reason(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    meteo.forecast_failure = (400, '{"error": true, "reason": "Latitude must be in range of -90 to 90°."}')
    message = call(get_weather, {"city": "Tokyo"})
    assert message.is_error
    assert "HTTP 400: Latitude must be in range of -90 to 90°." in text(message)


def test_a_timeout_is_an_error_result(
    get_weather: AgentTool, meteo: OpenMeteoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YIEM_WEATHER_TIMEOUT_S", "0.2")
    meteo.hold = threading.Event()
    try:
        message = call(get_weather, {"city": "Tokyo"})
    finally:
        meteo.hold.set()
    assert meteo.request_seen.is_set()
    assert message.is_error
    assert "The geocoding service did not answer within 0.2 s" in text(message)


def test_an_unreachable_service(get_weather: AgentTool, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("YIEM_GEOCODING_URL", f"http://127.0.0.1:{port}/v1/search")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    message = call(get_weather, {"city": "Tokyo"})
    assert message.is_error
    assert text(message) == (
        'Tool "getWeather" failed: WeatherLookupError: Could not reach the geocoding service: '
        "127.0.0.1 refused the connection."
    )


def test_an_offline_machine_is_said_in_one_line(
    get_weather: AgentTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that cannot be resolved (the weather example on a machine without a network):
    one line saying what failed and why, not urllib3's chain of wrapped exceptions."""
    monkeypatch.setenv("YIEM_GEOCODING_URL", "http://geocoding.invalid/v1/search")
    message = call(get_weather, {"city": "Tokyo"})
    assert message.is_error and "\n" not in text(message)
    assert text(message).endswith(
        "Could not reach the geocoding service: the name geocoding.invalid could not be resolved "
        "(is this machine offline?)."
    )
    assert "urllib3" not in text(message) and "Max retries" not in text(message)


def test_an_aborted_signal_stops_before_any_request(get_weather: AgentTool, meteo: OpenMeteoServer) -> None:
    with pytest.raises(RuntimeError, match="aborted"):
        get_weather.execute("call-1", {"city": "Tokyo"}, AbortSignal(aborted=True), lambda _p: None)
    assert meteo.requests == []


def test_an_abort_during_a_request_ends_the_lookup_at_once(
    get_weather: AgentTool, meteo: OpenMeteoServer
) -> None:
    meteo.hold = threading.Event()  # the geocoding request waits until the test releases it
    signal = AbortSignal()
    failures: list[BaseException] = []

    def look_up() -> None:
        try:
            get_weather.execute("call-1", {"city": "Tokyo"}, signal, lambda _p: None)
        except BaseException as exc:
            failures.append(exc)

    worker = threading.Thread(target=look_up)
    worker.start()
    try:
        assert meteo.request_seen.wait(10)
        signal.abort()
        worker.join(5)  # the request's timeout is 10 s and the server holds it for 30 s
        assert not worker.is_alive()
    finally:
        meteo.hold.set()
        worker.join()
    [error] = failures
    assert isinstance(error, RuntimeError) and "aborted" in str(error)
    assert [path for path, _ in meteo.requests] == ["/v1/search"]


def test_tool_shape(get_weather: AgentTool) -> None:
    assert get_weather.name == "getWeather"
    assert get_weather.parallel_tool_execute is True
    assert get_weather.input_schema["properties"]["units"]["enum"] == ["metric", "imperial"]
    assert get_weather.input_schema["required"] == ["city"]


def test_weather_codes_become_words(get_weather: AgentTool) -> None:
    describe = get_weather.execute.__globals__["describe_code"]
    assert describe(0) == "clear sky"
    assert describe(95) == "thunderstorm"
    assert describe(42) == "unknown conditions (code 42)"

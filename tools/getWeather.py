"""getWeather: the current weather in a city, from the free Open-Meteo API (no API key).

Two HTTP requests with ``requests``: the geocoding API turns the city into coordinates, then the
forecast API returns the current conditions. Progress goes out as partial results; timeouts,
HTTP errors (status and a body excerpt) and unknown cities become error results. An abort ends
the lookup at once, even in the middle of a request (its socket is shut down), and so does a
request that outlasts its timeout, even while the server still sends a byte now and then.

Environment variables (read at every call):

- ``YIEM_GEOCODING_URL``: geocoding endpoint (default ``https://geocoding-api.open-meteo.com/v1/search``)
- ``YIEM_FORECAST_URL``: forecast endpoint (default ``https://api.open-meteo.com/v1/forecast``)
- ``YIEM_WEATHER_TIMEOUT_S``: seconds each request may take, from connecting to its last byte
  (default ``10``)
"""

from __future__ import annotations

import os
import threading
import urllib.parse
from typing import Any

import requests

from yiemagent import AbortSignal, AgentTool, AgentToolResult, TextContent
from yiemagent.llm.http import RequestInterrupter, interruptible_session

GEOCODING_URL = "https://geocoding-api.open-meteo.com/v1/search"
FORECAST_URL = "https://api.open-meteo.com/v1/forecast"
DEFAULT_TIMEOUT_S = 10.0
CURRENT_FIELDS = (
    "temperature_2m",
    "apparent_temperature",
    "relative_humidity_2m",
    "weather_code",
    "wind_speed_10m",
)
PLACE_FIELDS = ("name", "country", "admin1", "latitude", "longitude", "timezone")
UNIT_PARAMS = {
    "metric": {"temperature_unit": "celsius", "wind_speed_unit": "kmh"},
    "imperial": {"temperature_unit": "fahrenheit", "wind_speed_unit": "mph"},
}

# WMO weather interpretation codes, as listed in Open-Meteo's forecast API documentation.
WMO_CODES: dict[int, str] = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "moderate drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "dense freezing drizzle",
    61: "slight rain",
    63: "moderate rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "heavy freezing rain",
    71: "slight snowfall",
    73: "moderate snowfall",
    75: "heavy snowfall",
    77: "snow grains",
    80: "slight rain showers",
    81: "moderate rain showers",
    82: "violent rain showers",
    85: "slight snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with slight hail",
    99: "thunderstorm with heavy hail",
}


class WeatherLookupError(RuntimeError):
    """The weather could not be fetched; the message says why, for the model."""


def describe_code(code: Any) -> str:
    """Return the words for a WMO weather code (``"unknown conditions (code 42)"`` if unlisted)."""
    try:
        return WMO_CODES[int(code)]
    except (TypeError, ValueError, KeyError):
        return f"unknown conditions (code {code})"


def _timeout_s() -> float:
    raw = os.environ.get("YIEM_WEATHER_TIMEOUT_S", "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def _excerpt(response: requests.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("reason"):
        return str(data["reason"])
    text = " ".join(response.text.split())
    return text[:200] + ("…" if len(text) > 200 else "")


def _why_unreachable(exc: requests.RequestException, url: str) -> str:
    """Why a request failed, in a few words, with the host: not urllib3's whole chain of
    wrapped exceptions (which names the same host three times)."""
    host = urllib.parse.urlsplit(url).hostname or url
    text = str(exc)
    if isinstance(exc, requests.exceptions.SSLError):
        return f"the secure connection to {host} failed."
    if "NameResolutionError" in text or "Name or service not known" in text or "getaddrinfo" in text:
        return f"the name {host} could not be resolved (is this machine offline?)."
    if "Connection refused" in text:
        return f"{host} refused the connection."
    if isinstance(exc, requests.ConnectionError):
        return f"no connection to {host} (is this machine offline?)."
    return f"{type(exc).__name__} for {host}."


def _get_json(
    service: str,
    url: str,
    params: dict[str, Any],
    session: requests.Session,
    signal: AbortSignal | None,
) -> dict[str, Any]:
    """GET ``url`` and return its JSON object; raise ``WeatherLookupError`` saying what failed
    (that the lookup was aborted, when ``signal`` fired before or during the request).

    The whole request, reply body included, must be over within the timeout: ``requests``'
    own timeout only bounds each wait for the next bytes, which a trickling server never trips,
    so a timer shuts the socket down when the time is up.
    """
    _check_abort(signal)
    timeout = _timeout_s()
    interrupter = RequestInterrupter()
    expired = threading.Event()

    def expire() -> None:
        expired.set()  # before the interrupt, so the failure it causes is read as a timeout
        interrupter.interrupt()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    unregister = signal.on_abort(interrupter.interrupt) if signal is not None else None
    timer.start()
    try:
        with interrupter.active():
            response = session.get(url, params=params, timeout=timeout)
    except requests.RequestException as exc:
        _check_abort(signal)  # an abort shuts the socket: report the abort, not the broken socket
        if expired.is_set() or isinstance(exc, requests.Timeout):
            raise WeatherLookupError(
                f"The {service} service did not answer within {timeout:g} s; try again later."
            ) from None
        why = _why_unreachable(exc, url)
        raise WeatherLookupError(f"Could not reach the {service} service: {why}") from None
    finally:
        timer.cancel()
        if unregister is not None:
            unregister()
    if response.status_code != 200:
        raise WeatherLookupError(
            f"The {service} service answered HTTP {response.status_code}: {_excerpt(response)}"
        )
    try:
        data = response.json()
    except ValueError:
        raise WeatherLookupError(f"The {service} service sent a response that is not JSON.") from None
    if not isinstance(data, dict):
        raise WeatherLookupError(f"The {service} service sent an unexpected response.")
    return data


def _progress(on_partial_result: Any, text: str, stage: str) -> None:
    if callable(on_partial_result):
        on_partial_result(AgentToolResult([TextContent(text)], {"stage": stage}))


def _check_abort(signal: AbortSignal | None) -> None:
    if signal is not None and signal.aborted:
        raise WeatherLookupError("The weather lookup was aborted.")


def geocode(city: str, session: requests.Session, signal: AbortSignal | None = None) -> dict[str, Any]:
    """Return the best Open-Meteo geocoding match for ``city``; raise if none is found."""
    url = os.environ.get("YIEM_GEOCODING_URL") or GEOCODING_URL
    params = {"name": city, "count": 1, "language": "en", "format": "json"}
    data = _get_json("geocoding", url, params, session, signal)
    results = data.get("results") or []
    if not results or not isinstance(results[0], dict):
        raise WeatherLookupError(
            f'No place called "{city}" was found. Check the spelling, or give a larger nearby city '
            '(a city name only, e.g. "Paris" rather than "Paris, France").'
        )
    return dict(results[0])


def forecast(
    latitude: float,
    longitude: float,
    units: str,
    session: requests.Session,
    signal: AbortSignal | None = None,
) -> dict[str, Any]:
    """Return Open-Meteo's forecast JSON with the ``current`` conditions at the coordinates."""
    url = os.environ.get("YIEM_FORECAST_URL") or FORECAST_URL
    params = {
        "latitude": latitude,
        "longitude": longitude,
        "current": ",".join(CURRENT_FIELDS),
        "timezone": "auto",
        **UNIT_PARAMS[units],
    }
    data = _get_json("forecast", url, params, session, signal)
    if not isinstance(data.get("current"), dict):
        raise WeatherLookupError("The forecast service sent no current conditions.")
    return data


def _place_name(place: dict[str, Any]) -> str:
    parts = [place.get("name"), place.get("admin1"), place.get("country")]
    seen: list[str] = []
    for part in parts:
        if part and part not in seen:
            seen.append(str(part))
    return ", ".join(seen)


def _summary(place: str, current: dict[str, Any], units: dict[str, Any]) -> str:
    """Return one sentence such as ``Weather in Tokyo, Japan: clear sky, 22.3°C (...)``."""

    def value(field: str, sep: str = "") -> str:
        return f"{current.get(field)}{sep}{units.get(field, '')}"

    text = (
        f"Weather in {place}: {describe_code(current.get('weather_code'))}, "
        f"{value('temperature_2m')} (feels like {value('apparent_temperature')}), "
        f"humidity {value('relative_humidity_2m')}, wind {value('wind_speed_10m', ' ')}"
    )
    if current.get("time"):
        text += f" (observed {current['time']} local time)"
    return text


def execute_tool(
    tool_call_id: str, args: dict[str, Any], signal: AbortSignal | None, on_partial_result: Any
) -> AgentToolResult:
    """Look up ``args["city"]`` and return its current weather in ``args["units"]``.

    An abort of ``signal`` ends a request in flight at once (the session's socket is shut down)
    and the lookup raises ``WeatherLookupError`` saying it was aborted.
    """
    _check_abort(signal)
    session = interruptible_session()  # each request in _get_json can be ended from another thread
    try:
        return _look_up(args, session, signal, on_partial_result)
    finally:
        session.close()


def _look_up(
    args: dict[str, Any],
    session: requests.Session,
    signal: AbortSignal | None,
    on_partial_result: Any,
) -> AgentToolResult:
    """Geocode the city, fetch its current conditions and build the result."""
    city = str(args["city"]).strip()
    units = str(args.get("units") or "metric")
    _progress(on_partial_result, f"Looking up {city}…", "geocoding")
    place = geocode(city, session, signal)
    _check_abort(signal)
    name = _place_name(place)
    _progress(on_partial_result, f"Fetching weather for {name}…", "forecast")
    data = forecast(place["latitude"], place["longitude"], units, session, signal)
    current, current_units = data["current"], data.get("current_units") or {}
    details = {
        "place": {k: place.get(k) for k in PLACE_FIELDS},
        "units": units,
        "current": current,
        "current_units": current_units,
        "conditions": describe_code(current.get("weather_code")),
    }
    return AgentToolResult([TextContent(_summary(name, current, current_units))], details)


def get_tool() -> AgentTool:
    """Return the getWeather tool."""
    return AgentTool(
        name="getWeather",
        label="Weather Lookup",
        description=(
            "Fetch the current weather (conditions, temperature, humidity, wind) for a city, from Open-Meteo."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1, "description": "City name, e.g. 'Tokyo'."},
                "units": {
                    "type": "string",
                    "enum": ["metric", "imperial"],
                    "default": "metric",
                    "description": "metric: °C and km/h; imperial: °F and mph.",
                },
            },
            "required": ["city"],
        },
        execute=execute_tool,
        parallel_tool_execute=True,
    )

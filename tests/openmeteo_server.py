"""A local stand-in for Open-Meteo's geocoding and forecast APIs, for tests.

It answers in the JSON shapes of Open-Meteo's documentation: geocoding ``/v1/search`` returns
``{"results": [...], "generationtime_ms": ...}`` and leaves ``results`` out when nothing matches;
forecast ``/v1/forecast`` returns ``current`` and ``current_units`` with only the requested
variables, in the requested units; a bad request gets HTTP 400 ``{"error": true, "reason": ...}``.
Tests can make the forecast fail with any status and body, hold every request until they
release it (to provoke client timeouts without sleeping), or make every answer trickle.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PLACES: dict[str, dict[str, Any]] = {
    "tokyo": {
        "id": 1850147,
        "name": "Tokyo",
        "latitude": 35.6895,
        "longitude": 139.69171,
        "elevation": 44.0,
        "feature_code": "PPLC",
        "country_code": "JP",
        "admin1_id": 1850144,
        "timezone": "Asia/Tokyo",
        "population": 8336599,
        "country_id": 1861060,
        "country": "Japan",
        "admin1": "Tokyo",
    },
    "berlin": {
        "id": 2950159,
        "name": "Berlin",
        "latitude": 52.52437,
        "longitude": 13.41053,
        "elevation": 74.0,
        "feature_code": "PPLC",
        "country_code": "DE",
        "admin1_id": 2950157,
        "timezone": "Europe/Berlin",
        "population": 3426354,
        "postcodes": ["10967", "13347"],
        "country_id": 2921044,
        "country": "Deutschland",
        "admin1": "Berlin",
    },
}

# Current conditions in metric units, keyed by rounded coordinates.
CONDITIONS: dict[tuple[float, float], dict[str, float | int]] = {
    (35.69, 139.69): {
        "temperature_2m": 22.5,
        "apparent_temperature": 21.0,
        "relative_humidity_2m": 40,
        "weather_code": 2,
        "wind_speed_10m": 10.0,
    },
    (52.52, 13.41): {
        "temperature_2m": 5.0,
        "apparent_temperature": 1.5,
        "relative_humidity_2m": 81,
        "weather_code": 63,
        "wind_speed_10m": 20.0,
    },
}

METRIC_UNITS = {
    "temperature_2m": "°C",
    "apparent_temperature": "°C",
    "relative_humidity_2m": "%",
    "weather_code": "wmo code",
    "wind_speed_10m": "km/h",
}


def _imperial(field: str, value: float | int) -> float | int:
    if field in ("temperature_2m", "apparent_temperature"):
        return round(value * 9 / 5 + 32, 1)
    if field == "wind_speed_10m":
        return round(value / 1.609344, 1)
    return value


class OpenMeteoServer:
    """Serves fake Open-Meteo endpoints on 127.0.0.1 (a free port) from a background thread.

    ``requests`` records ``(path, query)`` of every request; ``request_seen`` is set when one
    arrives. Set ``forecast_failure = (status, body)`` to make the forecast fail, ``hold``
    to an unset ``threading.Event`` to make every request wait until the test sets it, or
    ``trickle_s`` to send every body one byte at a time, that many seconds apart (each byte well
    within a read timeout; the pauses end once the server is stopped).
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.request_seen = threading.Event()
        self.hold: threading.Event | None = None
        self.forecast_failure: tuple[int, str] | None = None
        self.trickle_s: float | None = None
        self.stopped = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def geocoding_url(self) -> str:
        """The geocoding endpoint, for ``YIEM_GEOCODING_URL``."""
        return f"{self.base_url}/v1/search"

    @property
    def forecast_url(self) -> str:
        """The forecast endpoint, for ``YIEM_FORECAST_URL``."""
        return f"{self.base_url}/v1/forecast"

    def __enter__(self) -> OpenMeteoServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        if self.hold is not None:
            self.hold.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # -- answers -------------------------------------------------------------------------

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """Return ``(status, JSON body)`` for one request, as Open-Meteo would."""
        if path == "/v1/search":
            return self._search(query)
        if path == "/v1/forecast":
            if self.forecast_failure is not None:
                return self.forecast_failure
            return self._forecast(query)
        return 404, {"error": True, "reason": f"Not Found: {path}"}

    def _search(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        name = (query.get("name") or [""])[0]
        if not name:
            return 400, {"error": True, "reason": "Parameter 'name' is required"}
        place = PLACES.get(name.strip().lower())
        body: dict[str, Any] = {"generationtime_ms": 0.41}
        if place is not None:
            body = {"results": [place], **body}
        return 200, body

    def _forecast(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        try:
            lat, lon = float(query["latitude"][0]), float(query["longitude"][0])
        except (KeyError, ValueError):
            return 400, {"error": True, "reason": "Parameter 'latitude' and 'longitude' must be numbers"}
        fields = [f for f in (query.get("current") or [""])[0].split(",") if f]
        unknown = [f for f in fields if f not in METRIC_UNITS]
        if unknown:
            reason = (
                f"Cannot initialize WeatherVariable from invalid String value {unknown[0]} for key current"
            )
            return 400, {"error": True, "reason": reason}
        metric = CONDITIONS.get((round(lat, 2), round(lon, 2)), next(iter(CONDITIONS.values())))
        fahrenheit = (query.get("temperature_unit") or [""])[0] == "fahrenheit"
        mph = (query.get("wind_speed_unit") or [""])[0] == "mph"
        units = {"time": "iso8601", "interval": "seconds"}
        current: dict[str, Any] = {"time": "2026-03-26T16:15", "interval": 900}
        for field in fields:
            unit, value = METRIC_UNITS[field], metric[field]
            if fahrenheit and unit == "°C":
                unit, value = "°F", _imperial(field, value)
            if mph and unit == "km/h":
                unit, value = "mp/h", _imperial(field, value)
            units[field], current[field] = unit, value
        return 200, {
            "latitude": lat,
            "longitude": lon,
            "generationtime_ms": 0.03,
            "utc_offset_seconds": 0,
            "timezone": (query.get("timezone") or ["GMT"])[0],
            "timezone_abbreviation": "GMT",
            "elevation": 40.0,
            "current_units": units,
            "current": current,
        }


def _handler_for(owner: OpenMeteoServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            owner.requests.append((parts.path, query))
            owner.request_seen.set()
            if owner.hold is not None:
                owner.hold.wait(30)
            status, body = owner.answer(parts.path, query)
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if owner.trickle_s is None:
                    self.wfile.write(data)
                    return
                for index in range(len(data)):
                    owner.stopped.wait(owner.trickle_s)
                    self.wfile.write(data[index : index + 1])
                    self.wfile.flush()
            except OSError:  # the client gave up (timeout test)
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler

"""getTime: the current local time for an IANA time zone or a well-known city.

Accepted places: an IANA time zone (``Asia/Tokyo``, ``America/New_York``, ``UTC``; case does not
matter), one of the cities in ``CITIES`` (accents and case do not matter, ``"Tokyo, Japan"``
works), or a city that names an IANA zone (``Lisbon`` -> ``Europe/Lisbon``). Anything else gives
an error that lists the accepted forms and cities. Needs time zone data: the system's, or the
``tzdata`` package where the system has none (Windows).
"""

from __future__ import annotations

import functools
import unicodedata
import zoneinfo
from datetime import datetime
from typing import Any

from yiemagent import AbortSignal, AgentTool, AgentToolResult, TextContent

CITIES: dict[str, str] = {
    "Amsterdam": "Europe/Amsterdam",
    "Auckland": "Pacific/Auckland",
    "Bangkok": "Asia/Bangkok",
    "Beijing": "Asia/Shanghai",
    "Berlin": "Europe/Berlin",
    "Buenos Aires": "America/Argentina/Buenos_Aires",
    "Cairo": "Africa/Cairo",
    "Chicago": "America/Chicago",
    "Delhi": "Asia/Kolkata",
    "Denver": "America/Denver",
    "Dubai": "Asia/Dubai",
    "Hong Kong": "Asia/Hong_Kong",
    "Honolulu": "Pacific/Honolulu",
    "Istanbul": "Europe/Istanbul",
    "Jakarta": "Asia/Jakarta",
    "Johannesburg": "Africa/Johannesburg",
    "Lagos": "Africa/Lagos",
    "London": "Europe/London",
    "Los Angeles": "America/Los_Angeles",
    "Madrid": "Europe/Madrid",
    "Manila": "Asia/Manila",
    "Melbourne": "Australia/Melbourne",
    "Mexico City": "America/Mexico_City",
    "Moscow": "Europe/Moscow",
    "Mumbai": "Asia/Kolkata",
    "Nairobi": "Africa/Nairobi",
    "New Delhi": "Asia/Kolkata",
    "New York": "America/New_York",
    "Paris": "Europe/Paris",
    "Rome": "Europe/Rome",
    "San Francisco": "America/Los_Angeles",
    "São Paulo": "America/Sao_Paulo",
    "Seoul": "Asia/Seoul",
    "Shanghai": "Asia/Shanghai",
    "Singapore": "Asia/Singapore",
    "Sydney": "Australia/Sydney",
    "Tokyo": "Asia/Tokyo",
    "Toronto": "America/Toronto",
}

_ALIASES = ("timezone", "time_zone", "zone", "place", "location")


def _key(text: str) -> str:
    """Fold ``text`` for matching: no accents, lower case, single spaces, ``_`` as a space."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(plain.replace("_", " ").lower().split())


@functools.lru_cache(maxsize=1)
def _zones() -> dict[str, str]:
    """Map folded zone names to IANA keys (``asia/tokyo`` -> ``Asia/Tokyo``)."""
    return {_key(zone): zone for zone in zoneinfo.available_timezones()}


@functools.lru_cache(maxsize=1)
def _zone_cities() -> dict[str, str]:
    """Map the folded last part of every zone to the zone (``lisbon`` -> ``Europe/Lisbon``)."""
    out: dict[str, str] = {}
    for zone in sorted(zoneinfo.available_timezones()):
        if "/" in zone and not zone.startswith("Etc/"):
            out.setdefault(_key(zone.rsplit("/", 1)[1]), zone)
    return out


def _accepted() -> str:
    cities = ", ".join(CITIES)
    return (
        'Give an IANA time zone such as "Asia/Tokyo", "Europe/London" or "UTC", or one of these '
        f"cities: {cities}."
    )


def resolve_place(place: str) -> tuple[str, str]:
    """Return ``(display name, IANA zone)`` for ``place``; raise ``ValueError`` listing what works."""
    text = place.strip()
    if not text:
        raise ValueError(f'The "city" argument is empty. {_accepted()}')
    cities = {_key(name): (name, zone) for name, zone in CITIES.items()}
    for candidate in (text, text.split(",")[0]):
        folded = _key(candidate)
        if folded in cities:
            return cities[folded]
        if folded in _zones():
            zone = _zones()[folded]
            return zone, zone
        if folded in _zone_cities():
            return candidate.strip(), _zone_cities()[folded]
    if not _zones():
        raise ValueError("No time zone data is installed on this machine; install the tzdata package.")
    raise ValueError(f'Unknown place "{text}". {_accepted()}')


def _offset(now: datetime) -> str:
    delta = now.utcoffset()
    minutes = int(delta.total_seconds() // 60) if delta is not None else 0
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def prepare_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """Accept ``timezone``/``zone``/``place``/``location`` as another name for ``city``."""
    if "city" in args:
        return args
    for alias in _ALIASES:
        if alias in args:
            rest = {k: v for k, v in args.items() if k != alias}
            return {**rest, "city": args[alias]}
    return args


def execute_tool(
    tool_call_id: str, args: dict[str, Any], signal: AbortSignal | None, on_partial_result: Any
) -> AgentToolResult:
    """Return the current local time of ``args["city"]`` with its zone and UTC offset."""
    name, zone = resolve_place(str(args["city"]))
    now = datetime.now(zoneinfo.ZoneInfo(zone)).replace(microsecond=0)
    iso = now.isoformat()
    abbreviation = now.tzname() or ""
    text = f"Current time in {name}: {iso} ({now:%A}, time zone {zone}, {abbreviation})"
    details = {
        "place": name,
        "timezone": zone,
        "iso": iso,
        "utc_offset": _offset(now),
        "abbreviation": abbreviation,
    }
    return AgentToolResult([TextContent(text)], details)


def get_tool() -> AgentTool:
    """Return the getTime tool."""
    return AgentTool(
        name="getTime",
        label="Time Lookup",
        description=(
            "Get the current local time for a city or an IANA time zone (e.g. Tokyo, New York, "
            "Europe/London, UTC)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "city": {
                    "type": "string",
                    "description": (
                        "A well-known city such as 'Tokyo' or 'New York', or an IANA time zone "
                        "such as 'Asia/Tokyo' or 'UTC'."
                    ),
                }
            },
            "required": ["city"],
        },
        execute=execute_tool,
        prepare_arguments=prepare_arguments,
        parallel_tool_execute=True,
    )

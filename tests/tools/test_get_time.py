"""tools/getTime.py: local time for an IANA zone or a well-known city."""

from __future__ import annotations

import zoneinfo
from datetime import datetime, timezone
from typing import Any

import pytest
from paths import ROOT

from yiemagent.core._content import AgentToolCall, TextContent
from yiemagent.core._messages import AssistantMessage, ToolResultMessage
from yiemagent.core._pipeline import execute_tool_calls
from yiemagent.core._tools import AgentContext, AgentLoopConfig, AgentTool
from yiemagent.tools._store import check_tool_file

TOOL_FILE = ROOT / "tools" / "getTime.py"


@pytest.fixture(scope="module")
def get_time() -> AgentTool:
    return check_tool_file(TOOL_FILE)


def call(tool: AgentTool, args: dict[str, Any]) -> ToolResultMessage:
    calls = [AgentToolCall("call-1", tool.name, args)]
    batch = execute_tool_calls(
        AgentContext("", [], {tool.name: tool}),
        AssistantMessage(content=calls),
        calls,
        AgentLoopConfig(),
        None,
        None,
    )
    return batch.messages[0]


def text(message: ToolResultMessage) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


def check_time(message: ToolResultMessage, zone: str, before: datetime, after: datetime) -> datetime:
    """Assert the result is the time in ``zone`` taken between ``before`` and ``after``."""
    assert not message.is_error, text(message)
    assert message.details["timezone"] == zone
    stamp = datetime.fromisoformat(message.details["iso"])
    assert stamp.utcoffset() == stamp.astimezone(zoneinfo.ZoneInfo(zone)).utcoffset()
    assert before.replace(microsecond=0) <= stamp <= after
    return stamp


def test_the_time_in_an_iana_zone(get_time: AgentTool) -> None:
    before = datetime.now(timezone.utc)
    message = call(get_time, {"city": "Asia/Tokyo"})
    after = datetime.now(timezone.utc)
    stamp = check_time(message, "Asia/Tokyo", before, after)
    assert message.details["utc_offset"] == "+09:00"
    assert text(message).startswith(f"Current time in Asia/Tokyo: {stamp.isoformat()}")
    assert "JST" in text(message)


@pytest.mark.parametrize(
    ("place", "zone", "shown"),
    [
        ("Tokyo", "Asia/Tokyo", "Tokyo"),
        ("new york", "America/New_York", "New York"),
        ("Sao Paulo", "America/Sao_Paulo", "São Paulo"),
        ("Tokyo, Japan", "Asia/Tokyo", "Tokyo"),
        ("  LONDON ", "Europe/London", "London"),
    ],
)
def test_the_time_in_a_well_known_city(get_time: AgentTool, place: str, zone: str, shown: str) -> None:
    before = datetime.now(timezone.utc)
    message = call(get_time, {"city": place})
    after = datetime.now(timezone.utc)
    check_time(message, zone, before, after)
    assert text(message).startswith(f"Current time in {shown}: ")
    assert message.details["place"] == shown


@pytest.mark.parametrize(
    ("place", "zone"),
    [
        ("europe/paris", "Europe/Paris"),
        ("UTC", "UTC"),
        ("Lisbon", "Europe/Lisbon"),
        ("America/New York", "America/New_York"),
    ],
)
def test_zone_names_are_matched_loosely(get_time: AgentTool, place: str, zone: str) -> None:
    before = datetime.now(timezone.utc)
    message = call(get_time, {"city": place})
    check_time(message, zone, before, datetime.now(timezone.utc))


def test_timezone_is_accepted_as_another_name_for_city(get_time: AgentTool) -> None:
    before = datetime.now(timezone.utc)
    message = call(get_time, {"timezone": "Australia/Sydney"})
    check_time(message, "Australia/Sydney", before, datetime.now(timezone.utc))


def test_an_unknown_place_lists_what_is_accepted(get_time: AgentTool) -> None:
    message = call(get_time, {"city": "Atlantis"})
    assert message.is_error
    assert 'Unknown place "Atlantis"' in text(message)
    assert '"Asia/Tokyo"' in text(message)
    for city in ("Tokyo", "New York", "London", "Sydney"):
        assert city in text(message)


def test_an_empty_place_is_an_error(get_time: AgentTool) -> None:
    message = call(get_time, {"city": "  "})
    assert message.is_error and 'The "city" argument is empty' in text(message)


def test_a_missing_city_is_a_validation_error(get_time: AgentTool) -> None:
    message = call(get_time, {})
    assert message.is_error and "'city' is a required property" in text(message)


def test_every_built_in_city_names_a_real_zone(get_time: AgentTool) -> None:
    cities: dict[str, str] = get_time.execute.__globals__["CITIES"]
    assert len(cities) >= 30
    for zone in cities.values():
        zoneinfo.ZoneInfo(zone)  # raises if the table has a typo

"""The suite's tiers (``tests/tiers.py``): ``YIEMAGENT_TEST_SIZE`` picks the size of the slowest
checks, a missing extra skips only in a developer's quick run, and the skips that ``conftest.py``
turns into failures in CI are exactly those for something not installed."""

from __future__ import annotations

import pytest
from tiers import EXTRAS, absent, is_missing_extra, size, sized, strict


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 1), ("", 1), ("quick", 1), ("full", 10), ("long", 50)]
)
def test_the_variable_picks_the_size(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: int
) -> None:
    monkeypatch.delenv("YIEMAGENT_TEST_SIZE", raising=False)
    if value is not None:
        monkeypatch.setenv("YIEMAGENT_TEST_SIZE", value)
    assert sized(quick=1, full=10, long=50) == expected


def test_without_a_long_size_the_long_tier_keeps_the_full_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YIEMAGENT_TEST_SIZE", "long")
    assert sized(quick=1, full=10) == 10


def test_a_misspelt_size_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YIEMAGENT_TEST_SIZE", "Full")
    with pytest.raises(pytest.UsageError, match="expected one of quick, full, long"):
        size()


@pytest.mark.parametrize(
    ("ci", "tier", "expected"),
    [
        (None, "quick", False),
        ("false", "quick", False),
        ("0", "quick", False),
        ("true", "quick", True),
        ("1", "quick", True),
        (None, "full", True),
        (None, "long", True),
    ],
)
def test_a_missing_extra_fails_in_ci_and_the_full_tiers(
    monkeypatch: pytest.MonkeyPatch, ci: str | None, tier: str, expected: bool
) -> None:
    monkeypatch.delenv("CI", raising=False)
    if ci is not None:
        monkeypatch.setenv("CI", ci)
    monkeypatch.setenv("YIEMAGENT_TEST_SIZE", tier)
    assert strict() is expected


def test_only_skips_for_something_not_installed_count_as_a_missing_extra() -> None:
    for extra in EXTRAS:
        assert is_missing_extra(absent(extra))
        assert extra in absent(extra) and "install: " in absent(extra)
    assert is_missing_extra("redis-server is not installed (install: bash scripts/setup_cluster.sh)")
    assert is_missing_extra("could not import 'ray': No module named 'ray'")
    assert is_missing_extra("could not import 'opentelemetry.sdk.trace': No module named 'opentelemetry'")
    assert not is_missing_extra("could not import 'tomllib': No module named 'tomllib'")
    assert not is_missing_extra("SIGKILL is POSIX")
    assert not is_missing_extra("node and npm are needed to run the pi-agent-core port")

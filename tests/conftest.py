"""Fixtures shared by the provider-client tests (``test_llm_*.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llm_server import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """A scripted loopback HTTP server, stopped (and every blocked reply released) at the end."""
    with ScriptedServer() as srv:
        yield srv

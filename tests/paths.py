"""Where the tests find the checkout's files, wherever in ``tests/`` the test module sits."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent  # the helper modules and servers the tests start
ROOT = TESTS.parent  # the checkout: tools/, scripts/, docs/, README.md

__all__ = ["ROOT", "TESTS"]

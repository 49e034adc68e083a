"""No module of ``yiemagent`` imports one that imports it back, not even for type hints or inside a
function: the arrows of the architecture point one way only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import yiemagent

PACKAGE = Path(yiemagent.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports anywhere in its file, with the packages whose
    ``__init__`` such an import runs (those it is not itself inside)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    edges: set[str] = set()
    for target in targets:
        if target not in known:
            continue
        edges.add(target)
        parent = target.rpartition(".")[0]
        while parent and parent != "yiemagent":
            if not (name == parent or name.startswith(parent + ".")):
                edges.add(parent)
            parent = parent.rpartition(".")[0]
    edges.discard(name)
    return edges


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            cycle = visit(nxt, [*path, node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start, [])
        if cycle:
            return cycle
    return None


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imported(name, path, known) for name, path in found.items()}


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 20
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_run_loop_never_sees_the_agent() -> None:
    graph = import_graph()
    reachable: set[str] = set()
    todo = ["yiemagent.core._loop"]
    while todo:
        for nxt in graph[todo.pop()] - reachable:
            reachable.add(nxt)
            todo.append(nxt)
    assert "yiemagent.agent._agent" not in reachable and "yiemagent.agent._worker" not in reachable
    assert "yiemagent.core._pipeline" in reachable  # the check does follow imports


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# -- layers: each folder is one layer, and its imports point down ---------------------------------

# What each layer may never import (the package roots named here and everything below them).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "yiemagent.core": (
        "yiemagent.agent",
        "yiemagent.output",
        "yiemagent.tools",
        "yiemagent.llm",
        "yiemagent.integrations",
        "yiemagent.cli",
        "yiemagent.testing",
        "yiemagent.parity",
    ),
    # Output types know the core's OutputSpec and nothing above it.
    "yiemagent.output": (
        "yiemagent.agent",
        "yiemagent.tools",
        "yiemagent.llm",
        "yiemagent.integrations",
        "yiemagent.cli",
        "yiemagent.testing",
        "yiemagent.parity",
    ),
    "yiemagent.tools": (
        "yiemagent.agent",
        "yiemagent.llm",
        "yiemagent.integrations",
        "yiemagent.cli",
        "yiemagent.testing",
    ),
    "yiemagent.agent": ("yiemagent.llm", "yiemagent.integrations", "yiemagent.cli", "yiemagent.testing"),
    "yiemagent.llm": (
        "yiemagent.agent",
        "yiemagent.tools",
        "yiemagent.integrations",
        "yiemagent.cli",
        "yiemagent.testing",
    ),
    "yiemagent.integrations": ("yiemagent.cli",),
    "yiemagent.testing.parity": (
        "yiemagent.llm.openai",
        "yiemagent.llm.anthropic",
        "yiemagent.llm.llamacpp",
        "yiemagent.cli",
    ),
}
# The core's only way out: the exceptions, and the lazy-export helper its __init__ uses.
CORE_MAY_IMPORT = ("yiemagent.core", "yiemagent.errors", "yiemagent._lazy")


def within(name: str, root: str) -> bool:
    return name == root or name.startswith(root + ".")


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that breaks a layer rule, as ``importer -> imported`` (each once)."""
    found: list[str] = []
    for importer, targets in sorted(graph.items()):
        for layer, banned in FORBIDDEN.items():
            if not within(importer, layer):
                continue
            found += [f"{importer} -> {t}" for t in sorted(targets) if any(within(t, b) for b in banned)]
        if within(importer, "yiemagent.core"):
            found += [
                f"{importer} -> {t}"
                for t in sorted(targets)
                if not any(within(t, ok) for ok in CORE_MAY_IMPORT)
            ]
    return sorted(set(found))


def test_every_import_points_down_the_layers() -> None:
    assert layer_violations(import_graph()) == []


@pytest.mark.parametrize(
    ("importer", "target"),
    [
        ("yiemagent.core._loop", "yiemagent.llm.openai._wire"),  # the loop seeing a provider
        ("yiemagent.core._request", "yiemagent.agent._agent"),
        ("yiemagent.llm.anthropic._wire", "yiemagent.agent._channels"),  # a provider seeing the shell
        ("yiemagent.agent._agent", "yiemagent.integrations._tracing"),  # the shell, an integration
        ("yiemagent.testing.parity._behaviours", "yiemagent.llm.openai._parse"),  # suite, provider
        ("yiemagent.tools._store", "yiemagent.agent._agent"),
    ],
)
def test_the_layer_check_catches_each_kind_of_forbidden_arrow(importer: str, target: str) -> None:
    graph = import_graph()
    graph[importer] = {*graph[importer], target}
    assert layer_violations(graph) == [f"{importer} -> {target}"]


def test_the_tree_is_the_documented_layout() -> None:
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == ["agent", "cli", "core", "integrations", "llm", "output", "parity", "testing", "tools"]

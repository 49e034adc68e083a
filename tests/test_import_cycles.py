"""No module of ``yiemagent`` imports one that imports it back, not even for type hints or inside a
function: the arrows of the architecture point one way only."""

from __future__ import annotations

import ast
from pathlib import Path

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
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
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
            return [*path[path.index(node):], node]
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

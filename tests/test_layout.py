"""The layout's rules, read from the source: no import cycles between modules or between folders, the pure core
imports no I/O of the solver, offline analysis never depends on the CLI, commands are imported by the CLI alone,
and the sandbox worker imports nothing of the solver."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "solver"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path) -> set[str]:
    """Every solver module ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in MODULES:
                found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in MODULES}
    return found


GRAPH = {name: imports(path) for name, path in MODULES.items()}


def folder(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or MODULES[name].name == "__init__.py" else name


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_back():
    assert cycles(GRAPH) == []


def test_no_folder_imports_itself_back():
    folders: dict[str, set[str]] = {}
    for name, targets in GRAPH.items():
        folders.setdefault(folder(name), set()).update(folder(t) for t in targets if folder(t) != folder(name))
    assert cycles(folders) == []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("solver.core.")))
def test_the_core_imports_only_the_contract_and_the_config(name):
    allowed = {"solver.types", "solver.config", "solver.config.registry", "solver.core.clock"}
    assert {t for t in GRAPH[name] if not t.startswith("solver.core")} <= allowed


def test_offline_analysis_never_depends_on_the_cli():
    offenders = {n: t for n, ts in GRAPH.items() if n.startswith("solver.offline")
                 for t in ts if t.startswith("solver.commands") or t == "solver.cli"}
    assert offenders == {}


def test_commands_are_imported_by_the_cli_alone():
    offenders = {n: t for n, ts in GRAPH.items() if not n.startswith("solver.commands") and n != "solver.cli"
                 for t in ts if t.startswith("solver.commands")}
    assert offenders == {}


def test_the_sandbox_worker_imports_nothing_of_the_solver():
    worker = [n for n in MODULES if n.startswith("solver.sandbox.worker")]
    assert worker and all(t.startswith("solver.sandbox.worker") for n in worker for t in GRAPH[n])

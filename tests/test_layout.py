"""The layout's rules, read from the source: no import cycles between modules or between folders, the pure core
imports no I/O of the solver, offline analysis never depends on the CLI, commands are imported by the CLI alone,
the sandbox worker imports nothing of the solver, a package with a face (an ``__init__`` that names what
outsiders may use in ``__all__``) is imported through it, the top level stays small, no test double lives in
production, and no two classes share a name. The benchmarks are held to the same rules (faces, names, doubles,
cycles): a script imports the package, never another script, and loads no file around the imports (``runpy``, a
path); a script is at most 500 lines."""

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
BENCHMARKS = {module_name(p): p for p in (ROOT / "benchmarks").glob("*.py")}


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


def bare_imports(path: Path) -> set[str]:
    """The benchmark scripts ``path`` imports by bare name (``import day``, ``from attempts import ...``), as
    ``benchmarks.NAME``."""
    names = {n.split(".")[1] for n in BENCHMARKS}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else
                   [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        found |= {f"benchmarks.{t.split('.')[0]}" for t in targets if t.split(".")[0] in names}
    return found


# The package and the benchmarks together: a script's solver imports, and any script it imports by bare name.
WHOLE = {**GRAPH, **{name: imports(path) | bare_imports(path) for name, path in BENCHMARKS.items()}}


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
    assert cycles(WHOLE) == []


def test_no_benchmark_imports_another_by_bare_name():
    """Code two scripts share lives in the package; a script is run, never imported by another (a script may
    import itself by name: Ray's workers find its classes so)."""
    others = {n: sorted(bare_imports(p) - {n}) for n, p in BENCHMARKS.items()}
    assert {n: found for n, found in others.items() if found} == {}


def test_no_benchmark_puts_its_own_folder_on_the_path():
    """A script may put the checkout's root on ``sys.path`` (to find the package), never the benchmarks' folder."""
    own = ("sys.path.insert(0, str(HERE))", "sys.path.insert(0, str(Path(__file__).resolve().parent))")
    assert [name for name, path in BENCHMARKS.items() if any(x in path.read_text() for x in own)] == []


def test_every_benchmark_script_is_at_most_500_lines():
    """A script parses its flags, calls the package and prints; what it drives lives in ``solver.measure``."""
    long = {n: len(p.read_text().splitlines()) for n, p in BENCHMARKS.items()}
    assert {n: lines for n, lines in long.items() if lines > 500} == {}


# Ways to run another file's code that an import rule cannot see: runpy, a module spec or loader made from a path,
# importlib's import by a computed name, exec of a file's text.
HIDDEN_LOADS = {"run_path", "run_module", "spec_from_file_location", "SourceFileLoader", "import_module", "exec"}


def hidden_loads(path: Path) -> list[str]:
    """Where ``path`` loads code around the import statements (``runpy``, ``importlib``'s path loading, ``exec``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            names += [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            found += [f"line {node.lineno}: import {n}" for n in names if n == "runpy" or n in HIDDEN_LOADS]
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in HIDDEN_LOADS:
                found.append(f"line {node.lineno}: {name}")
    return found


def test_a_hidden_load_is_found(tmp_path):
    script = tmp_path / "x.py"
    script.write_text("import runpy\nimport importlib.util\nrunpy.run_path('y.py')\n"
                      "spec = importlib.util.spec_from_file_location('z', 'z.py')\nexec(open('z.py').read())\n"
                      "importlib.util.find_spec('vllm')\n")
    assert hidden_loads(script) == ["line 1: import runpy", "line 3: run_path", "line 4: spec_from_file_location",
                                    "line 5: exec"]


def test_no_script_loads_another_file_around_the_import_rules():
    """The benchmarks, the evaluations and the scripts import what they share from the package, so the rules above
    see every dependency: none runs another file with ``runpy``, a spec made from its path or ``exec``."""
    scripts = [p for d in ("benchmarks", "evaluation", "scripts") for p in (ROOT / d).rglob("*.py")]
    assert scripts and {str(p.relative_to(ROOT)): f for p in scripts if (f := hidden_loads(p))} == {}


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


def test_offline_analysis_never_runs_the_live_pipeline():
    """The simulator, the sweep's analysis and the tuner read recordings; generating them (the loop, an engine, the
    sandbox, the cluster, a replayed run) is their callers' (the sweep takes the loop's ``solve_run`` from the
    command)."""
    live = ("solver.loop", "solver.engines", "solver.sandbox", "solver.cluster", "solver.replay", "solver.measure")
    offenders = {n: t for n, ts in GRAPH.items() if n.startswith("solver.offline") for t in ts if t.startswith(live)}
    assert offenders == {}


def test_commands_are_imported_by_the_cli_alone():
    """Inside the package and beside it: the benchmarks, the evaluations and the scripts use the package's faces,
    never a command's module."""
    offenders = {n: t for n, ts in GRAPH.items() if not n.startswith("solver.commands") and n != "solver.cli"
                 for t in ts if t.startswith("solver.commands")}
    offenders |= {str(p.relative_to(ROOT)): t for p in OUTSIDERS if not p.is_relative_to(PACKAGE)
                  for t in imports(p) if t.startswith("solver.commands")}
    assert offenders == {}


def test_the_measurement_wing_is_imported_by_the_commands_and_the_measuring_scripts_alone():
    """``solver.measure`` rehearses and measures; the submission, the loop, the engines, the replay room and the
    offline analysis never depend on it, so none of them loads it (the Kaggle notebook least of all). Beside the
    package, the benchmark and evaluation scripts use it; the other scripts do not."""
    users = ("solver.measure", "solver.commands")
    offenders = {n: t for n, ts in GRAPH.items() if not n.startswith(users)
                 for t in ts if t.startswith("solver.measure")}
    offenders |= {str(p.relative_to(ROOT)): t for p in OUTSIDERS if not p.is_relative_to(PACKAGE)
                  and not p.is_relative_to(ROOT / "benchmarks") and not p.is_relative_to(ROOT / "evaluation")
                  for t in imports(p)
                  if t.startswith("solver.measure")}
    assert offenders == {}


def test_the_sandbox_worker_imports_nothing_of_the_solver():
    worker = [n for n in MODULES if n.startswith("solver.sandbox.worker")]
    assert worker and all(t.startswith("solver.sandbox.worker") for n in worker for t in GRAPH[n])


# -- faces --------------------------------------------------------------------------------------------------------

def exported(init: Path) -> list[str] | None:
    """The names an ``__init__`` lists in ``__all__``, or None when it lists none (a package without a face)."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return None


FACES = {module_name(p): names for p in PACKAGE.rglob("__init__.py") if (names := exported(p)) is not None}
# Production code beside the package: it uses the faces as any outsider would. (Tests may open a package to test
# a module's own functions.)
OUTSIDERS = [p for d in ("solver", "benchmarks", "evaluation", "scripts", "kaggle") for p in (ROOT / d).rglob("*.py")
             if "kaggle_evaluation" not in p.parts]


def test_the_offline_packages_and_the_config_have_faces():
    assert {"solver.recordings", "solver.offline.sim", "solver.offline.sweep", "solver.offline.tune",
            "solver.config", "solver.models"} <= set(FACES)


@pytest.mark.parametrize("face", sorted(FACES))
def test_a_face_exports_only_names_it_binds_and_hands_on_what_it_imports_from_its_package(face):
    tree = ast.parse(MODULES[face].read_text())
    handed_on = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                 and (node.module or "").startswith(face + ".") for a in node.names}
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    imported = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
    assert set(FACES[face]) <= imported | defined
    assert handed_on <= set(FACES[face])


def test_outside_code_imports_a_package_through_its_face():
    offenders = []
    for path in OUTSIDERS:
        here = module_name(path) if path.is_relative_to(PACKAGE) else ""
        for node in ast.walk(ast.parse(path.read_text())):
            targets = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else
                       [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for target in targets:
                for face in FACES:
                    behind = target.startswith(face + ".")
                    inside = here == face or here.startswith(face + ".")
                    if behind and not inside:
                        offenders.append(f"{path.relative_to(ROOT)}: {target}")
    assert offenders == []


# -- the top level, doubles, names --------------------------------------------------------------------------------

def test_the_top_level_holds_at_most_eight_modules():
    assert len(list(PACKAGE.glob("*.py"))) <= 8


def _classes() -> list[tuple[str, str]]:
    """Every top-level class of the package and of the benchmarks, with its module."""
    return [(node.name, name) for name, path in {**MODULES, **BENCHMARKS}.items()
            for node in ast.parse(path.read_text()).body if isinstance(node, ast.ClassDef)]


def test_no_test_double_lives_in_production():
    doubles = [(c, m) for c, m in _classes() if c.startswith(("Fake", "Scripted", "Stub", "Mock", "Dummy"))]
    assert doubles == []


def test_no_two_classes_share_a_name():
    seen: dict[str, list[str]] = {}
    for cls, module in _classes():
        seen.setdefault(cls, []).append(module)
    assert {c: ms for c, ms in seen.items() if len(ms) > 1} == {}

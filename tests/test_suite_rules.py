"""Rules for the test suite itself, read from its source: every test checks something (an ``assert``, a
``pytest.raises``/``warns``/``fail``, or a call to a function of the suite that does and that the test can reach),
so no test passes by only running code."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CHECKS = {"raises", "warns", "fail", "deprecated_call"}  # pytest's own checks
KNOWN: set[str] = set()  # tests allowed to check nothing (none now); name them here with the reason

Function = ast.FunctionDef | ast.AsyncFunctionDef


def called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def checks_itself(function: Function) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "pytest"
                    and func.attr in CHECKS):
                return True
            if isinstance(func, ast.Attribute) and func.attr.startswith("assert_"):  # e.g. a mock's assert_called
                return True
    return False


def module_source(module: str, paths: list[str]) -> str | None:
    """The path among ``paths`` that an import of ``module`` names: one ending in the module's own path (the suite
    imports its helpers by bare names, tests/ first on sys.path, then tests/kaggle/), the shallowest first.

    >>> module_source("doubles", ["tests/kaggle/doubles.py", "tests/doubles.py", "tests/test_doubles.py"])
    'tests/doubles.py'
    >>> module_source("data.eval_runs", ["tests/data/eval_runs.py"]), module_source("solver.cli", ["tests/cli.py"])
    ('tests/data/eval_runs.py', None)
    """
    tail = module.replace(".", "/")
    found = [p for p in paths if p == f"{tail}.py" or p.endswith((f"/{tail}.py", f"/{tail}/__init__.py"))]
    return min(found, key=lambda p: (p.count("/"), p)) if found else None


def definitions(tree: ast.Module) -> dict[str, list[Function]]:
    """Every function of a module, nested ones and methods included, by name."""
    found: dict[str, list[Function]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.setdefault(node.name, []).append(node)
    return found


def exported(tree: ast.Module, name: str) -> dict[str, list[Function]]:
    """What ``from module import name`` makes callable: the function itself, or a class's methods (called by
    their names on its instances; the class's own name calls its ``__init__``)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return {name: [node]}
        if isinstance(node, ast.ClassDef) and node.name == name:
            methods = definitions(ast.Module(body=node.body, type_ignores=[]))
            return {**methods, name: methods.get("__init__", [])}
    return {}


def reachable(path: str, trees: dict[str, ast.Module]) -> dict[str, list[Function]]:
    """The functions a call by name in module ``path`` can reach: the module's own, and those it imports from
    the suite (``from m import f``, or ``import m`` and ``m.f``)."""
    tree = trees[path]
    scope = definitions(tree)

    def add(more: dict[str, list[Function]]) -> None:
        for name, functions in more.items():
            scope.setdefault(name, []).extend(functions)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            source = module_source(node.module, list(trees))
            for alias in node.names if source else ():
                if alias.name == "*":
                    add({n.name: [n] for n in trees[source].body
                         if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)})
                    continue
                found = exported(trees[source], alias.name)
                if alias.asname and alias.name in found:
                    found[alias.asname] = found.pop(alias.name)
                add(found)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                source = module_source(alias.name, list(trees))
                if source:  # called as module.f: its top-level functions and classes, by the name called
                    for item in trees[source].body:
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                            add(exported(trees[source], item.name))
    return scope


def unchecked_tests(sources: dict[str, str]) -> set[str]:
    """The test functions (``path::name``) of ``sources`` (path -> text) that neither check anything nor call a
    function that checks (directly or through others) and that the calling module can reach: its own, or one it
    imports from ``sources``. A function of another module that only shares the name does not count.

    >>> sorted(unchecked_tests({"tests/test_x.py": "def helper():\\n    assert True\\n"
    ...                                            "def test_runs():\\n    print(1)\\n"
    ...                                            "def test_helps():\\n    helper()\\n"
    ...                                            "def test_raises():\\n    with pytest.raises(KeyError):\\n"
    ...                                            "        {}[1]\\n"}))
    ['tests/test_x.py::test_runs']
    >>> sorted(unchecked_tests({"tests/checks.py": "def verify(x):\\n    assert x\\n",
    ...                         "tests/test_a.py": "def verify(x):\\n    print(x)\\n"
    ...                                            "def test_own_helper():\\n    verify(1)\\n",
    ...                         "tests/test_b.py": "from checks import verify\\n"
    ...                                            "def test_imported():\\n    verify(1)\\n",
    ...                         "tests/test_c.py": "import checks\\n"
    ...                                            "def test_module_attribute():\\n    checks.verify(1)\\n",
    ...                         "tests/test_d.py": "def test_not_imported():\\n    verify(1)\\n"}))
    ['tests/test_a.py::test_own_helper', 'tests/test_d.py::test_not_imported']
    """
    trees = {path: ast.parse(text) for path, text in sources.items()}
    scopes = {path: reachable(path, trees) for path in trees}
    functions = [(path, f) for path, tree in trees.items() for fs in definitions(tree).values() for f in fs]
    checking = {id(f) for _, f in functions if checks_itself(f)}
    grew = True
    while grew:  # a function that calls a checking function it can reach checks too
        grew = False
        for path, function in functions:
            if id(function) in checking:
                continue
            calls = {called_name(n) for n in ast.walk(function) if isinstance(n, ast.Call)}
            if any(id(g) in checking for name in calls if name for g in scopes[path].get(name, ())):
                checking.add(id(function))
                grew = True
    return {f"{path}::{function.name}" for path, function in functions
            if Path(path).name.startswith("test_") and function.name.startswith("test")
            and id(function) not in checking}


def test_every_test_checks_something() -> None:
    # The vendored Kaggle gateways are Kaggle's code, not tests of ours.
    sources = {str(path.relative_to(ROOT)): path.read_text() for path in TESTS.rglob("*.py")
               if "gateways" not in path.parts}
    unchecked = unchecked_tests(sources)
    assert unchecked <= KNOWN, sorted(unchecked - KNOWN)

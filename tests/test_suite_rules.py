"""Rules for the test suite itself, read from its source: every test checks something (an ``assert``, a
``pytest.raises``/``warns``/``fail``, or a call to a function of the suite that does), so no test passes by only
running code."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CHECKS = {"raises", "warns", "fail", "deprecated_call"}  # pytest's own checks
# A test older than this rule that only builds objects; tests/cluster/test_presets.py checks what it meant to (every
# preset's budget). Remove the test and this entry together.
KNOWN = {"tests/core/test_budget.py::test_presets_build_a_valid_manager"}

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


def unchecked_tests(sources: dict[str, str]) -> set[str]:
    """The test functions (``path::name``) of ``sources`` (path -> text) that neither check anything nor call, by
    name, a function of ``sources`` that checks (directly or through others).

    >>> sorted(unchecked_tests({"tests/test_x.py": "def helper():\\n    assert True\\n"
    ...                                            "def test_runs():\\n    print(1)\\n"
    ...                                            "def test_helps():\\n    helper()\\n"
    ...                                            "def test_raises():\\n    with pytest.raises(KeyError):\\n"
    ...                                            "        {}[1]\\n"}))
    ['tests/test_x.py::test_runs']
    """
    trees = {path: ast.parse(text) for path, text in sources.items()}
    by_name: dict[str, list[Function]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                by_name.setdefault(node.name, []).append(node)
    checking = {id(f) for fs in by_name.values() for f in fs if checks_itself(f)}
    grew = True
    while grew:  # a function that calls a checking function checks too
        grew = False
        for function in (f for fs in by_name.values() for f in fs if id(f) not in checking):
            calls = {called_name(n) for n in ast.walk(function) if isinstance(n, ast.Call)}
            if any(id(g) in checking for name in calls if name for g in by_name.get(name, ())):
                checking.add(id(function))
                grew = True
    return {f"{path}::{node.name}"
            for path, tree in trees.items() if Path(path).name.startswith("test_")
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
            and id(node) not in checking}


def test_every_test_checks_something() -> None:
    # The vendored Kaggle gateways are Kaggle's code, not tests of ours.
    sources = {str(path.relative_to(ROOT)): path.read_text() for path in TESTS.rglob("*.py")
               if "gateways" not in path.parts}
    unchecked = unchecked_tests(sources)
    assert unchecked <= KNOWN, sorted(unchecked - KNOWN)

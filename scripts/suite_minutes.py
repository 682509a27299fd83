"""Where the test suite's minutes go: every xdist group's seconds (``tests/conftest.py``, ``worker_group``) from a
durations file, in the order the workers take them, and the wall time of the two workers dealt them in that order.

    python scripts/suite_minutes.py benchmarks/results/cpu_test-durations.tsv            # make test
    python scripts/suite_minutes.py runs/test-fast-durations.tsv --fast                  # make test-fast
    python scripts/suite_minutes.py benchmarks/results/cpu_test-durations.tsv \
        --measured runs/test-durations.tsv                                               # with modules run again

The groups and their order are the suite's own: the tests are collected as an xdist worker collects them (the
conftest marks each test's group and sorts), then dealt as ``--dist loadgroup`` deals them: the next group to the
worker that is free first. A test missing from the durations file counts 0 s (said on the last line). The estimate
leaves out the start (about 10 s a worker to collect) and the machine's other load."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# make test-fast: vllm shadowed, and the tests that start an engine or are slow left out (Makefile).
FAST_MARKS = "not engine and not slow"


@dataclass(frozen=True)
class Group:
    """One xdist group: the tests one worker runs together, in the order the workers take the groups."""

    name: str
    tests: int
    seconds: float


def read_durations(path: Path) -> dict[str, float]:
    """Each test's seconds (setup, call and teardown) from a ``--durations-file`` table.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "t.tsv").write_text("seconds\\tsetup\\tcall\\tteardown\\toutcome\\ttest\\n"
    ...                                         "2.50\\t0.50\\t2.00\\t0.00\\tpassed\\ttests/a.py::t\\n")
    ...     read_durations(Path(d) / "t.tsv")
    {'tests/a.py::t': 2.5}
    """
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:] if line.strip()]
    return {row[5]: float(row[0]) for row in rows}


def measured_again(seconds: dict[str, float], again: dict[str, float]) -> dict[str, float]:
    """``seconds`` with every module that ``again`` holds taken from ``again`` instead (a module's tests measured
    again after a change: the ones it no longer has drop out).

    >>> measured_again({"a.py::x": 9.0, "a.py::y": 1.0, "b.py::z": 2.0}, {"a.py::x2": 3.0})
    {'b.py::z': 2.0, 'a.py::x2': 3.0}
    """
    modules = {nodeid.split("::")[0] for nodeid in again}
    return {**{k: v for k, v in seconds.items() if k.split("::")[0] not in modules}, **again}


def groups(order: list[tuple[str, str]], seconds: dict[str, float]) -> list[Group]:
    """The groups of ``order`` (each test's node id and group, in the order the workers receive them), each at its
    first test's place, with its tests' ``seconds`` summed (0 for a test without any).

    >>> groups([("a::1", "x"), ("b::1", "y"), ("a::2", "x")], {"a::1": 1.0, "a::2": 2.0, "b::1": 5.0})
    [Group(name='x', tests=2, seconds=3.0), Group(name='y', tests=1, seconds=5.0)]
    """
    found: dict[str, list[float]] = {}
    for nodeid, group in order:
        found.setdefault(group, []).append(seconds.get(nodeid, 0.0))
    return [Group(name, len(times), sum(times)) for name, times in found.items()]


def deal(found: list[Group], workers: int = 2) -> list[float]:
    """Each worker's seconds when the groups, in order, go each to the worker that is free first (xdist's
    loadgroup: a worker asks for the next group as it runs out of tests).

    >>> deal([Group("a", 1, 10.0), Group("b", 1, 4.0), Group("c", 1, 3.0), Group("d", 1, 5.0)])
    [10.0, 12.0]
    >>> deal([Group("c", 1, 3.0), Group("b", 1, 4.0), Group("d", 1, 5.0), Group("a", 1, 10.0)])  # longest last
    [8.0, 14.0]
    """
    loads = [0.0] * workers
    for group in found:
        loads[loads.index(min(loads))] += group.seconds
    return loads


def collected(marks: str | None, fast: bool) -> list[tuple[str, str]]:
    """Each test's node id and xdist group, in the order a worker of ``make test`` (``fast``: of ``make test-fast``)
    has them after collection: conftest's own marking and sorting, run here as on a worker."""
    import pytest

    if fast:
        sys.path.insert(0, str(ROOT / "tests" / "without_vllm"))
    os.environ["PYTEST_XDIST_WORKER"] = "gw0"  # conftest deals the groups only on a worker

    class Recorder:
        order: list[tuple[str, str]] = []

        def pytest_collection_finish(self, session: pytest.Session) -> None:  # marked, sorted and deselected
            for item in session.items:
                mark = item.get_closest_marker("xdist_group")
                self.order.append((item.nodeid, mark.args[0] if mark else item.nodeid.split("::")[0]))

    recorder = Recorder()
    os.chdir(ROOT)  # the suite's testpaths (pyproject.toml): the tests and the doctests
    args = ["--collect-only", "-q", "-p", "no:cacheprovider"]
    if marks:
        args += ["-m", marks]
    code = pytest.main(args, plugins=[recorder])
    if code not in (0, 5):  # 5: nothing collected
        raise SystemExit(f"suite_minutes: collecting the tests failed (pytest exit {code})")
    return recorder.order


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("durations", type=Path, help="a --durations-file table (runs/test-durations.tsv)")
    parser.add_argument("--fast", action="store_true", help="the tests of make test-fast")
    parser.add_argument("--measured", type=Path, action="append", default=[], metavar="TSV",
                        help="a durations table of modules run again: their rows replace those modules'")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--top", type=int, default=25, help="groups listed, longest first")
    args = parser.parse_args(argv)
    missing = [str(p) for p in (args.durations, *args.measured) if not p.is_file()]
    if missing or args.workers < 1:
        print(f"suite_minutes: not a file: {', '.join(missing)}" if missing else "suite_minutes: --workers < 1",
              file=sys.stderr)
        return 2
    seconds = read_durations(args.durations)
    for path in args.measured:
        seconds = measured_again(seconds, read_durations(path))
    order = collected(FAST_MARKS if args.fast else None, args.fast)
    found = groups(order, seconds)
    loads = deal(found, args.workers)
    print(f"\n{'seconds':>8} {'tests':>5}  group (of {len(found)}, longest first)")
    for group in sorted(found, key=lambda g: -g.seconds)[:args.top]:
        print(f"{group.seconds:8.1f} {group.tests:5}  {group.name}")
    unknown = sum(nodeid not in seconds for nodeid, _ in order)
    print(f"\n{sum(g.seconds for g in found):.0f} s of tests; {args.workers} workers in the suite's order: "
          + ", ".join(f"{x:.0f} s" for x in loads) + f" (wall {max(loads) / 60:.1f} min); "
          f"{unknown} collected test(s) without a duration counted 0 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/doubles.py
# A stand-in package that hides vLLM for the fast tier (make test-fast): never collected, its import fails.
collect_ignore = ["without_vllm"]

ROOT = Path(__file__).resolve().parents[1]
# Real gpt-oss-120b attempts (no licence to redistribute: read from ../shared beside the checkout, never copied in).
SHARED = Path(os.environ.get("SOLVER_SHARED", ROOT.parent / "shared"))
REAL_ATTEMPTS = SHARED / "data" / "replay" / "gptoss120b_aimo3_dev.jsonl.xz"
# gpt-oss-120b's config.json and tokenizer files, no weights: what a gpt-oss model folder says of itself.
DUMMY_GPTOSS = SHARED / "gpu" / "models" / "dummy-gptoss-120b"


@pytest.fixture(scope="session")
def dummy_gptoss() -> Path:
    """The dummy gpt-oss-120b folder (config.json: model_type gpt_oss); skipped, with one line, without it."""
    if not (DUMMY_GPTOSS / "config.json").is_file():
        pytest.skip(f"no dummy gpt-oss config at {DUMMY_GPTOSS} (../shared is not beside this checkout)")
    return DUMMY_GPTOSS


@pytest.fixture(scope="session")
def real_attempts_path() -> Path:
    """The real attempts' file; the test is skipped, with one line, where ../shared is not beside the checkout."""
    if not REAL_ATTEMPTS.is_file():
        pytest.skip(f"no real attempts at {REAL_ATTEMPTS} (../shared is not beside this checkout)")
    return REAL_ATTEMPTS


@pytest.fixture(scope="session")
def real_attempts(real_attempts_path):
    """Every real attempt, cut into its requests (``solver.replay.traces.Attempt``), read once per session."""
    from solver.replay import read_attempts

    return read_attempts(real_attempts_path)


@pytest.fixture(scope="session")
def tiny_config():
    """The CPU preset with small token limits: the real engine makes ~30 tokens/s on these machines."""
    from solver.config import load_config

    return load_config("tiny", overrides={"sampling.max_tokens": 48, "sampling.max_total_tokens": 96,
                                          "sampling.max_turns": 2, "solve.reps": 2, "solve.workers": 2})


@pytest.fixture(scope="module")
def engine_config(tiny_config):
    """The configuration ``engine_loop`` starts its engine with; a test module overrides this fixture to start it
    with other engine settings."""
    return tiny_config


class SharedEngine:
    """The one real vLLM engine of a test session, on its own long-lived event loop.

    A start costs about 45 s on 2 cores, so tests asking for the same configuration share one engine across
    modules; another configuration closes it and starts its own, and a test that does not ask for it closes it
    first (tests that start engines of their own, in process or as servers, then never run beside it: two engines
    on 2 cores would each get half the CPU and twice the memory)."""

    def __init__(self) -> None:
        self.config: object | None = None
        self.loop: object | None = None
        self.engine: object | None = None
        self.starts = 0

    def get(self, config: object) -> tuple[object, object]:
        from solver.engines.vllm_async import open_vllm_engine
        from solver.kaggle.thread import LoopThread

        if self.engine is not None and config == self.config:
            return self.loop, self.engine
        self.close()
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        loop = LoopThread(f"test-engine-{self.starts}")
        outcome = loop.run(open_vllm_engine(config), timeout_s=600)
        if not outcome.ok:
            loop.close()
            pytest.fail(f"the real engine did not start: {outcome.error}")
        self.config, self.loop, self.engine = config, loop, outcome.value
        self.starts += 1
        return loop, outcome.value

    def close(self) -> None:
        if self.engine is None:
            return
        loop, engine = self.loop, self.engine
        self.config = self.loop = self.engine = None
        closed = loop.run(engine.close(), timeout_s=60)
        loop.close()
        assert closed.ok, f"the shared engine did not close: {closed.error}"


class SharedServer:
    """The one ``solver serve`` endpoint of a test session (tiny model, CPU, loopback), for tests of a client of a
    running server (``--engine openai``, ``--endpoint URL``): its start costs as much as an engine's, so they share
    it, in one stretch of the run, as ``SharedEngine``'s tests do.

    Closing it checks the command's own promise: SIGTERM stops it with exit code 0 and leaves none of its processes
    behind (the API server and its engine core at least)."""

    # Stream every token (the CPU preset streams every 16): the cancel tests leave after a few tokens and need the
    # request still running on the server at that point.
    ARGS = ("--timeout", "600", "--set", "engine.args.stream_interval=1")

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.url: str | None = None
        self.family: list = []  # psutil.Process of every process under the command, seen once it was ready
        self.starts = 0

    def get(self, logs: Callable[[], Path]) -> str:
        """The endpoint's base URL, starting the command first if it is not running (its logs in ``logs()``)."""
        import psutil

        if self.url is not None:
            return self.url
        port = free_port()
        process = subprocess.Popen(solver_cmd("serve", "--port", str(port), "--log-dir", str(logs()), *self.ARGS),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        for line in process.stdout or ():  # ends when the command exits (it gives up after --timeout)
            lines.append(line.strip())
            if line.startswith("http://"):
                break
        urls = [x for x in lines if x.startswith("http://")]
        if not urls:
            process.wait(timeout=60)
            pytest.fail(f"solver serve did not start: {(process.stderr.read() if process.stderr else '')[-1500:]}")
        self.process, self.url, self.starts = process, urls[0], self.starts + 1
        self.family = psutil.Process(process.pid).children(recursive=True)
        assert len(self.family) >= 2, "the API server and its engine core at least"
        return self.url

    def close(self) -> None:
        import psutil

        if self.process is None:
            return
        process, family = self.process, self.family
        self.process, self.url, self.family = None, None, []
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=120)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        assert code == 0, f"solver serve ended with exit code {code} on SIGTERM"
        # Its family's last members (vLLM's engine core, and its worker where it has one) may still be exiting when
        # serve's own process has ended: each gets up to 10 s (a fixed 0.5 s was short beside the other worker's
        # load), then none may be left.
        _, alive = psutil.wait_procs(family, timeout=10)
        left = [p.pid for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert left == [], f"solver serve left processes behind: {left}"


SHARED_ENGINE = pytest.StashKey[SharedEngine]()
SHARED_SERVER = pytest.StashKey[SharedServer]()
# The fixture that hands each shared resource out, and where it lives.
SHARED = {"engine_loop": SHARED_ENGINE, "served": SHARED_SERVER}


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SHARED_ENGINE] = SharedEngine()
    config.stash[SHARED_SERVER] = SharedServer()


# ---- where the time goes -----------------------------------------------------------------------------------

PHASES = ("setup", "call", "teardown")
# The ``@group`` xdist adds to a test's node id on a worker (``worker_group``).
GROUP_SUFFIX = re.compile(r"@(engine_loop|served|gateway|[\w/.-]+\.py)$")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--durations-file", default=None, metavar="PATH",
                     help="write every test's seconds (total, setup, call, teardown) and outcome to PATH, a "
                          "tab-separated table, slowest first (make test and make test-fast write runs/)")


def durations_table(reports: list) -> str:
    """The tab-separated table of what ``reports`` (pytest's reports of each test's phases) took, a test a line,
    slowest first; a test's outcome is its worst phase's (an error is a setup or teardown that failed). A node id
    is written without the ``@group`` xdist gives it on a worker, so runs with and without workers compare.

    >>> from types import SimpleNamespace as Report
    >>> table = durations_table([Report(nodeid="t.py::a", when="setup", duration=0.5, outcome="passed"),
    ...                          Report(nodeid="t.py::a@served", when="call", duration=1.25, outcome="passed"),
    ...                          Report(nodeid="t.py::b", when="call", duration=3.0, outcome="failed"),
    ...                          Report(nodeid="t.py::b", when="teardown", duration=0.0, outcome="failed")])
    >>> [line.split("\\t") for line in table.splitlines()]  # doctest: +NORMALIZE_WHITESPACE
    [['seconds', 'setup', 'call', 'teardown', 'outcome', 'test'],
     ['3.00', '0.00', '3.00', '0.00', 'error', 't.py::b'],
     ['1.75', '0.50', '1.25', '0.00', 'passed', 't.py::a']]
    """
    rows: dict[str, dict[str, object]] = {}
    for report in reports:
        row = rows.setdefault(GROUP_SUFFIX.sub("", report.nodeid), {"outcome": "passed", **dict.fromkeys(PHASES, 0.0)})
        row[report.when] = report.duration
        if report.outcome == "failed":
            row["outcome"] = "failed" if report.when == "call" and row["outcome"] != "error" else "error"
        elif report.outcome == "skipped" and row["outcome"] == "passed":
            row["outcome"] = "skipped"

    def total(row: dict[str, object]) -> float:
        return sum(float(row[phase]) for phase in PHASES)  # type: ignore[arg-type]

    lines = ["seconds\tsetup\tcall\tteardown\toutcome\ttest"]
    for nodeid, row in sorted(rows.items(), key=lambda item: -total(item[1])):
        seconds = "\t".join(f"{float(row[phase]):.2f}" for phase in PHASES)  # type: ignore[arg-type]
        lines.append(f"{total(row):.2f}\t{seconds}\t{row['outcome']}\t{nodeid}")
    return "\n".join(lines) + "\n"


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """How often the shared engine and endpoint started; ``--durations-file``: the table of every test run, from
    the reports pytest's own ``--durations`` reads."""
    engine, server = config.stash[SHARED_ENGINE], config.stash[SHARED_SERVER]
    if engine.starts or server.starts:
        terminalreporter.write_line(f"shared: the in-process engine started {engine.starts} time(s), the solver serve "
                                    f"endpoint {server.starts} time(s)")
    path = config.getoption("--durations-file")
    if not path:
        return
    reports = [r for group in terminalreporter.stats.values() for r in group
               if isinstance(r, pytest.TestReport) and r.when in PHASES]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(durations_table(reports))
    terminalreporter.write_line(f"durations of {len({r.nodeid for r in reports})} tests: {path}")


def shared_uses(item: pytest.Item) -> list[str]:
    """The shared resources (``SHARED``'s fixture names) ``item`` asks for."""
    return [name for name in SHARED if name in item.fixturenames]


# ---- two workers (make test and make test-fast: pytest-xdist, -n 2 --dist loadgroup) ------------------------------

# What must not be split across the two workers or run on both at once. The shared engine and the shared endpoint
# each start once on the worker that runs all their tests (on both, each would start twice). A Kaggle gateway binds
# the first free port of a fixed list, so two gateways at once answer each other's calls: tests/kaggle and the
# notebooks (the submission notebook serves a gateway) run on one worker. (A tests/cluster module may run on either:
# each worker starts its own local Ray, about 5 s, rather than wait for the other's.)
GATEWAY_TESTS = ("tests/kaggle/", "tests/test_notebooks.py")
# The workers take the groups longest first, each group's seconds summed from the committed run of make test (README
# "Tests"; scripts/suite_minutes.py deals them the same way): a group of a few long tests dealt last would leave one
# worker running alone. A test the file lacks counts as one engine start (ENGINE_S) if it starts one, else nothing.
DURATIONS = ROOT / "benchmarks" / "results" / "cpu_test-durations.tsv"
ENGINE_S = 60.0


def recorded_seconds(table: str) -> dict[str, float]:
    """Each test's seconds (setup, call and teardown) in a ``durations_table``.

    >>> recorded_seconds("seconds\\tsetup\\tcall\\tteardown\\toutcome\\ttest\\n2.50\\t0.5\\t2\\t0\\tpassed\\tt.py::a")
    {'t.py::a': 2.5}
    """
    rows = [line.split("\t") for line in table.splitlines()[1:] if line.strip()]
    return {row[5]: float(row[0]) for row in rows}


def worker_group(path: str, shared: list[str]) -> str:
    """The xdist group of a test in ``path`` (relative to the repository) that uses the ``shared`` resources
    (``SHARED``'s fixture names). Any other test is grouped by its module, so a module's fixtures (a sandbox pool,
    an engine of its own) start on one worker only.

    >>> worker_group("tests/loop/test_engine_real.py", ["engine_loop"]), worker_group("tests/x.py", ["served"])
    ('engine_loop', 'served')
    >>> worker_group("tests/kaggle/test_bundle.py", []), worker_group("tests/test_notebooks.py", [])
    ('gateway', 'gateway')
    >>> worker_group("tests/sandbox/test_sandbox.py", [])
    'tests/sandbox/test_sandbox.py'
    """
    if shared:
        return shared[0]  # no test uses both
    return "gateway" if path.startswith(GATEWAY_TESTS) else path


def mark_worker_groups(items: list[pytest.Item], recorded: dict[str, float]) -> dict[str, float]:
    """Mark each test with its ``worker_group``; each group's seconds: its tests' ``recorded`` ones (``ENGINE_S``
    for a test without any that starts an engine, marker ``engine``; else 0)."""
    seconds: dict[str, float] = {}
    for item in items:
        path = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else str(item.path)
        group = worker_group(path, shared_uses(item))
        item.add_marker(pytest.mark.xdist_group(group))
        guess = ENGINE_S if item.get_closest_marker("engine") is not None else 0.0
        seconds[group] = seconds.get(group, 0.0) + recorded.get(item.nodeid, guess)
    return seconds


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules whose tests use a shared resource run last, grouped by the resource (the engine by the
    ``engine_config`` they ask for), so each starts once; everything else keeps its order.

    On an xdist worker the groups go longest first (their seconds in ``DURATIONS``): the workers take the units in
    this order (``--no-loadscope-reorder``), each the next as it runs out, so neither is left with a long one at the
    end."""
    groups: dict[str, str] = {}  # module path -> the resource its tests use
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or str(item.path) in groups:
            continue
        if "engine_loop" in info.names_closure:
            definition = info.name2fixturedefs["engine_config"][-1]  # the override nearest the test
            groups[str(item.path)] = f"engine_loop {definition.baseid}::{definition.func.__qualname__}"
        elif "served" in info.names_closure:
            groups[str(item.path)] = "served"
    seconds: dict[str, float] = {}
    if os.environ.get("PYTEST_XDIST_WORKER"):
        seconds = mark_worker_groups(items, recorded_seconds(DURATIONS.read_text()) if DURATIONS.is_file() else {})

    def order(item: pytest.Item) -> tuple[float, str, bool, str, bool]:
        group = groups.get(str(item.path))
        mark = item.get_closest_marker("xdist_group")
        unit = mark.args[0] if mark else ""  # two groups of equal seconds stay apart: each one unit of work
        # Within a group, the tests that start engines of their own first: the shared one then starts once.
        return (-seconds.get(unit, 0.0), unit, group is not None, group or "", bool(shared_uses(item)))

    items[:] = sorted(items, key=order)  # stable: within a group, the collected order


@pytest.hookimpl(tryfirst=True)  # before the test's own fixtures start anything
def pytest_runtest_setup(item: pytest.Item) -> None:
    for name, key in SHARED.items():
        if name not in item.fixturenames:
            item.config.stash[key].close()


@pytest.hookimpl(trylast=True)  # after the test's own fixtures ended
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A shared resource ends with the last test of its stretch: what its closing finds is that test's error."""
    for name in shared_uses(item):
        if nextitem is None or name not in nextitem.fixturenames:
            item.config.stash[SHARED[name]].close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for key in SHARED.values():
        session.config.stash[key].close()
    output = getattr(session.config, "workeroutput", None)  # an xdist worker's report to the controlling process
    if output is not None:
        output["shared_starts"] = [session.config.stash[key].starts for key in SHARED.values()]


@pytest.hookimpl(optionalhook=True)  # xdist's hook: only called where it is installed
def pytest_testnodedown(node, error) -> None:
    """An xdist worker ended: its shared starts count in the summary this process prints."""
    for key, starts in zip(SHARED.values(), getattr(node, "workeroutput", {}).get("shared_starts", ())):
        node.config.stash[key].starts += starts


@pytest.fixture
def engine_loop(engine_config, request: pytest.FixtureRequest) -> tuple[object, object]:
    """(LoopThread, VllmEngine): the session's shared real engine (``SharedEngine``), started with
    ``engine_config``."""
    return request.config.stash[SHARED_ENGINE].get(engine_config)


@pytest.fixture
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The base URL of the session's shared ``solver serve`` endpoint (``SharedServer``); its logs are in a
    session temp folder, ``server-logs``."""
    return request.config.stash[SHARED_SERVER].get(lambda: tmp_path_factory.mktemp("server-logs"))


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A module's own event loop: the sandbox ``pool`` lives on it across the module's tests."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def pool(loop: asyncio.AbstractEventLoop, pool_options: dict):
    """A started ``ProcessPoolSandbox`` shared by a module's tests, closed after the last one.

    A module using it defines a module-scoped ``pool_options`` fixture: the pool's keyword arguments (its
    ``config`` and any of ``namespaces``, ``interrupt_grace_s``, ...); fixtures it requests are set up before the
    pool starts and torn down after it closes."""
    from solver.sandbox.pool import ProcessPoolSandbox

    sandbox = ProcessPoolSandbox(**pool_options)
    loop.run_until_complete(sandbox.start())
    yield sandbox
    loop.run_until_complete(sandbox.close())


def solver_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "solver", *args]


def free_port() -> int:
    """A loopback TCP port free now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/doubles.py
# A stand-in package that hides vLLM for the fast tier (make test-fast): never collected, its import fails.
collect_ignore = ["without_vllm"]

ROOT = Path(__file__).resolve().parents[1]
# Real gpt-oss-120b attempts (no licence to redistribute: read from ../shared beside the checkout, never copied in).
SHARED = Path(os.environ.get("SOLVER_SHARED", ROOT.parent / "shared"))
REAL_ATTEMPTS = SHARED / "data" / "replay" / "gptoss120b_aimo3_dev.jsonl.xz"


@pytest.fixture(scope="session")
def real_attempts_path() -> Path:
    """The real attempts' file; the test is skipped, with one line, where ../shared is not beside the checkout."""
    if not REAL_ATTEMPTS.is_file():
        pytest.skip(f"no real attempts at {REAL_ATTEMPTS} (../shared is not beside this checkout)")
    return REAL_ATTEMPTS


@pytest.fixture(scope="session")
def real_attempts(real_attempts_path):
    """Every real attempt, cut into its requests (``solver.recordings.traces.Attempt``), read once per session."""
    from solver.recordings import read_attempts

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

    A start costs about a minute on 2 cores, so tests asking for the same configuration share one engine across
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
        from solver.loop.thread import LoopThread

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


SHARED_ENGINE = pytest.StashKey[SharedEngine]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SHARED_ENGINE] = SharedEngine()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules whose tests use the shared engine run last, grouped by the ``engine_config`` they ask for, so each
    configuration starts once; everything else keeps its order."""
    groups: dict[str, str] = {}  # module path -> the engine_config definition its engine tests use
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is not None and "engine_loop" in info.names_closure:
            definition = info.name2fixturedefs["engine_config"][-1]  # the override nearest the test
            groups.setdefault(str(item.path), f"{definition.baseid}::{definition.func.__qualname__}")

    def order(item: pytest.Item) -> tuple[bool, str, bool]:
        group = groups.get(str(item.path))
        # Within a group, the tests that start engines of their own first: the shared one then starts once.
        return (group is not None, group or "", "engine_loop" in item.fixturenames)

    items[:] = sorted(items, key=order)  # stable: within a group, the collected order


@pytest.hookimpl(tryfirst=True)  # before the test's own fixtures start anything
def pytest_runtest_setup(item: pytest.Item) -> None:
    if "engine_loop" not in item.fixturenames:
        item.config.stash[SHARED_ENGINE].close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[SHARED_ENGINE].close()


@pytest.fixture
def engine_loop(engine_config, request: pytest.FixtureRequest) -> tuple[object, object]:
    """(LoopThread, VllmEngine): the session's shared real engine (``SharedEngine``), started with
    ``engine_config``."""
    return request.config.stash[SHARED_ENGINE].get(engine_config)


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

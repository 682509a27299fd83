"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/doubles.py

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
    """Every real attempt, cut into its requests (``solver.offline.traces.Attempt``), read once per session."""
    from solver.offline.traces import read_attempts

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


@pytest.fixture(scope="module")
def engine_loop(engine_config, request) -> Iterator[tuple[object, object]]:
    """(LoopThread, VllmEngine): the real vLLM engine with the tiny model on one long-lived event loop.

    Module-scoped: a start costs about a minute on CPU, so a module's tests share one engine."""
    from solver.engines.vllm_async import open_vllm_engine
    from solver.loop.thread import LoopThread

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    loop = LoopThread(f"test-engine-{request.module.__name__.rpartition('.')[2]}")  # names the module in dumps
    outcome = loop.run(open_vllm_engine(engine_config), timeout_s=600)
    if not outcome.ok:
        loop.close()
        pytest.fail(f"the real engine did not start: {outcome.error}")
    engine = outcome.value
    yield loop, engine
    loop.run(engine.close(), timeout_s=60)
    loop.close()


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

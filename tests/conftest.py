"""Shared fixtures. The real engine is built once per test session (engine start costs ~30 s on 2 cores)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/doubles.py

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_config():
    """The CPU preset with small token limits: the real engine makes ~30 tokens/s on these machines."""
    from solver.config import load_config

    return load_config("tiny", overrides={"sampling.max_tokens": 48, "sampling.max_total_tokens": 96,
                                          "sampling.max_turns": 2, "solve.reps": 2, "solve.workers": 2})


@pytest.fixture(scope="session")
def engine_loop(tiny_config) -> Iterator[tuple[object, object]]:
    """(LoopThread, VllmEngine): the real vLLM engine with the tiny model on one long-lived event loop."""
    from solver.engines.vllm_async import open_vllm_engine
    from solver.loop_thread import LoopThread

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    loop = LoopThread("test-engine")
    outcome = loop.run(open_vllm_engine(tiny_config), timeout_s=600)
    if not outcome.ok:
        loop.close()
        pytest.fail(f"the real engine did not start: {outcome.error}")
    engine = outcome.value
    yield loop, engine
    loop.run(engine.close(), timeout_s=60)
    loop.close()


def solver_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "solver", *args]

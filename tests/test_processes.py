"""vLLM's engine found and killed one way (``solver.processes``), on the real CPU engine: by its process title, in
this process and from outside, its workers with it, nothing else of ours touched, no zombie left."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys

import pytest

from solver.processes import ENGINE_CORE, engine_processes, kill_engine


def test_no_engine_is_nothing_to_kill() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert engine_processes(os.getpid()) == [] and kill_engine() == []
        assert sleeper.poll() is None  # a process of ours that is no engine is left alone
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.engine
def test_a_real_engine_core_is_found_by_its_title_and_killed_as_a_crash_kills_it(tiny_config) -> None:
    pytest.importorskip("vllm")
    from solver.engines import open_engine

    async def scenario() -> tuple[list[str], list[str], bool]:
        engine = await open_engine(tiny_config)
        try:
            found = [p.name() for p in engine_processes(os.getpid())]
            killed = kill_engine()
            await asyncio.sleep(0.5)
            return found, killed, engine.is_dead()
        finally:
            await engine.close()

    found, killed, dead = asyncio.run(scenario())
    assert found and found[0].startswith(ENGINE_CORE), found
    assert len(killed) == len(found) and killed[0].startswith(f"{ENGINE_CORE} (pid ")
    assert dead  # the engine saw its core die, as after an out-of-memory kill
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("EngineCore")]
    assert engine_processes(os.getpid()) == []

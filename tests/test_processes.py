"""vLLM's engine found and killed one way (``solver.processes``), on the real CPU engine: by its process title, in
this process and from outside, its workers with it, nothing else of ours touched, no zombie left."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import time

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


def _titled_core() -> None:
    import time

    import setproctitle  # vLLM's own dependency, the way it titles its core

    setproctitle.setproctitle(ENGINE_CORE)
    time.sleep(60)


def test_a_killed_core_started_by_multiprocessing_is_reaped_by_its_own_handle() -> None:
    # Reaped by anything else (a psutil wait), the handle never learns the exit and reads as alive for good.
    pytest.importorskip("setproctitle")
    core = multiprocessing.get_context("spawn").Process(target=_titled_core, name="EngineCore")
    core.start()
    try:
        for _ in range(100):  # the child titles itself once its interpreter is up
            if engine_processes(os.getpid()):
                break
            time.sleep(0.1)
        killed = kill_engine()
        assert killed == [f"{ENGINE_CORE} (pid {core.pid})"]
        assert core.exitcode == -9 and core not in multiprocessing.active_children()
    finally:
        core.kill()
        core.join()


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

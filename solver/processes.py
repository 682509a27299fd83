"""Processes the measurements start and end: a command run to its end in a process group of its own, or killed with
all its children at a deadline (``run_group``: one setting or layout per process, so no engine or worker outlives
its setting), and vLLM's engine found and killed as a crash would kill it (``kill_engine``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any


def run_group(command: Sequence[str], env: Mapping[str, str] | None, timeout_s: float) -> int | None:
    """Run ``command`` in a new session (its own process group) and wait for it; its exit code, or None when it ran
    past ``timeout_s`` seconds and the whole group (the command and every process it started) was killed. An
    interrupt (Ctrl-C) kills the group too before it goes on up.

    >>> run_group(["true"], None, 10.0)
    0
    >>> import sys
    >>> run_group([sys.executable, "-c", "import time; time.sleep(30)"], None, 0.5) is None
    True
    """
    process = subprocess.Popen(list(command), env=None if env is None else dict(env), start_new_session=True)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return None
    except BaseException:
        _kill_group(process)
        raise


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# vLLM's engine core process title (vLLM sets it with setproctitle, 0.26 to 0.32, on the GPU build and the CPU one
# alike; data-parallel ranks add "_DP<i>"): the one way the solver finds an engine's core, in its own process or
# under another one's (a Ray actor's).
ENGINE_CORE = "VLLM::EngineCore"


def engine_processes(pid: int) -> list[Any]:
    """The engine core processes under ``pid`` (by their title, :data:`ENGINE_CORE`), each followed by its
    descendants (its executor's workers): what dies when an engine crashes. Nothing else under ``pid`` (a sandbox's
    processes) is among them."""
    import psutil

    cores = []
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.name().startswith(ENGINE_CORE) or " ".join(child.cmdline()).startswith(ENGINE_CORE):
                cores.append(child)
    out = []
    for core in cores:
        with contextlib.suppress(psutil.Error):
            out += [core, *core.children(recursive=True)]
    return out


def kill_engine(pid: int | None = None) -> list[str]:
    """SIGKILL the engines under ``pid`` (default this process), their workers included, as an out-of-memory kill or
    a crash would end them; what was killed (``name (pid N)``), empty when no engine was found. The processes this
    one started are reaped (``multiprocessing``'s own handles joined), so vLLM's shutdown later sees them gone."""
    import multiprocessing

    import psutil

    procs = engine_processes(os.getpid() if pid is None else pid)
    killed = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            name = proc.name()
            proc.send_signal(signal.SIGKILL)
            killed.append(f"{name} (pid {proc.pid})")
    # Our own multiprocessing children are joined through their handles first: a psutil wait reaps a child with
    # waitpid too, and a handle whose child was reaped elsewhere never learns its exit and reads as alive for good.
    if pid is None:
        ours = {proc.pid for proc in procs}
        for child in multiprocessing.active_children():
            if child.pid in ours:
                child.join(timeout=10.0)
    psutil.wait_procs(procs, timeout=10.0)  # the rest (workers, another process's engine): gone before we return
    return killed

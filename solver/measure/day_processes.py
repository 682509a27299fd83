"""The day's processes: vLLM's engine core killed as a crash would kill it (``--kill-engine-at``), what is left
running after a call, every descendant killed (``--hard-stop``), and the engine's log set up (``--log-engine``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def engine_cores() -> list[Any]:
    """vLLM V1's engine core processes of this process: ``AsyncLLM`` starts each with ``multiprocessing``, named
    ``EngineCore`` (``EngineCore_DP<i>`` with data parallelism), in vLLM 0.26 to 0.32."""
    import multiprocessing

    return [p for p in multiprocessing.active_children() if p.name.startswith("EngineCore")]


def kill_engine() -> list[int]:
    """SIGKILL every engine core process and its descendants (its executor's workers), as an out-of-memory kill
    or a crash would end them; the core is reaped by its own ``multiprocessing`` handle (so vLLM's shutdown later
    sees it gone). The pids killed."""
    import psutil

    killed = []
    for core in engine_cores():
        try:
            tree = [psutil.Process(core.pid), *psutil.Process(core.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in tree:
            try:
                proc.kill()
                killed.append(proc.pid)
            except psutil.NoSuchProcess:
                pass
        core.join(timeout=10.0)
        psutil.wait_procs(tree[1:], timeout=10.0)
    return killed


def still_running(grace_s: float = 10.0) -> list[dict[str, Any]]:
    """This process's descendants still alive after ``grace_s`` seconds for them to exit (zombies left out, and
    ``multiprocessing``'s resource tracker, the interpreter's own helper, which ends with this process)."""
    import psutil

    procs = [p for p in psutil.Process().children(recursive=True) if "resource_tracker" not in _cmdline(p)]
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    out = []
    for proc in alive:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append({"pid": proc.pid, "name": proc.name(), "cmdline": " ".join(proc.cmdline())[:160]})
        except psutil.NoSuchProcess:
            pass
    return out


def _cmdline(proc: Any) -> str:
    import psutil

    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def kill_descendants() -> list[int]:
    """SIGKILL every descendant of this process (the run's engine, sandbox and helpers); the pids."""
    import psutil

    procs = psutil.Process().children(recursive=True)
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10.0)
    return [p.pid for p in procs]


def log_engine() -> None:
    """vLLM's log (every process of the engine: its config file is read by each at import) and the solver's at INFO,
    each line beginning with epoch seconds to the ms (``solver.engines.engine_log.EPOCH_FORMAT``)."""
    import logging
    import tempfile

    from solver.engines.engine_log import EPOCH_FORMAT, vllm_logging_config

    path = Path(tempfile.mkdtemp(prefix="day-log-")) / "vllm-logging.json"
    path.write_text(json.dumps(vllm_logging_config()))
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(path)
    os.environ["VLLM_CONFIGURE_LOGGING"] = "1"
    # force: the CLI configured the root logger already; this call's lines carry epoch seconds
    logging.basicConfig(level=logging.WARNING, format=EPOCH_FORMAT, stream=sys.stderr, force=True)
    logging.getLogger("solver.engines").setLevel(logging.INFO)

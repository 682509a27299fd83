"""The day's processes: what is left running after a call, every descendant killed (``--hard-stop``), and the
engine's log set up (``--log-engine``). The engine killed as a crash would kill it (``--kill-engine-at``) is
``solver.processes.kill_engine``, as every measurement kills it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


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

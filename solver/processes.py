"""A command run to its end in a process group of its own, or killed with all its children at a deadline: what the
measuring scripts use to run one setting or layout per process, so no engine or worker outlives its setting."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence


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

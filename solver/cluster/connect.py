"""Starting or joining Ray for a command, and the joblib backend that spreads offline work over it."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from solver.cluster.spec import ClusterError, ClusterSpec
from solver.errors import first_line

log = logging.getLogger(__name__)


def import_ray() -> Any:
    """Ray, or a one-line ClusterError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ClusterError("--cluster needs Ray: pip install 'solver[cluster]' (or: pip install ray)") from exc
    return ray


class RayConnection:
    """``local:N`` starts a private Ray here (no dashboard) and stops it on exit; ``auto`` and ``ray://`` join a
    running cluster and leave it running. An already initialised Ray (a test's, a notebook's) is used as it is."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.started = False  # this connection initialised Ray, so it shuts it down

    def __enter__(self) -> RayConnection:
        ray = import_ray()
        if ray.is_initialized():
            return self
        common: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                  # engine and sandbox output stays in Ray's worker logs
                                  # (/tmp/ray/session_latest/logs on each node), not on the driver's terminal
                                  "log_to_driver": False}
        try:
            if self.spec.kind == "local":
                # One CPU slot per actor at least; the engine core and sandbox processes the actors start are
                # outside Ray's accounting anyway.
                cpus = max(self.spec.actors or 1, len(os.sched_getaffinity(0)))
                ray.init(num_cpus=cpus, **common)
            else:
                ray.init(address=self.spec.ray_address, **common)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterError(f"cannot join Ray at {self.spec.ray_address}: {first_line(exc)}"
                               if self.spec.kind != "local" else f"cannot start a local Ray: {first_line(exc)}") from exc
        self.started = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.started:
            import ray

            ray.shutdown()
            self.started = False

    @staticmethod
    def resources() -> dict[str, float]:
        import ray

        return dict(ray.cluster_resources())

    def cpus(self) -> int:
        return max(1, int(self.resources().get("CPU", 1)))

    def gpus(self) -> float:
        return float(self.resources().get("GPU", 0.0))


@contextlib.contextmanager
def joblib_backend(connection: RayConnection) -> Iterator[int]:
    """joblib's ``Parallel`` calls inside run as Ray tasks; yields the cluster's CPU count, the natural
    ``n_jobs``. The offline code fixes its random draws before it fans out, so results do not depend on it."""
    import joblib
    from ray.util.joblib import register_ray

    register_ray()
    with joblib.parallel_config(backend="ray"):
        yield connection.cpus()

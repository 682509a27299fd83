"""tests/cluster: one local Ray for the package's tests that run on a running one."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="package")
def local_ray() -> Iterator[int]:
    """One local Ray (2 CPUs, 2 GPUs by declaration, no dashboard) for every test of this package that asks for it, stopped after the
    package's last test: a start and stop cost about 5 s on 2 cores. ``--cluster local:N`` and ``RayConnection``
    find it running and use it as it is (``solver.cluster.connect``); the command starting a Ray of its own runs as a
    process in test_cluster_cli.py. Ray hands out the declared GPU ids without looking for cards, so the actors'
    GPU placement runs here too (test_cluster_gpus.py). Yields its CPU count."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield 2
    finally:
        ray.shutdown()

"""Entry points for the commands: a whole solve run, or a sweep's generation runs, on a Ray cluster."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Sequence
from typing import Any

from solver.cluster.connect import RayConnection
from solver.cluster.driver import Cluster, ClusterRunResult
from solver.cluster.spec import ClusterSpec
from solver.loop.problem import SolveEvent
from solver.loop.run import Run
from solver.types import Problem


def solve_on_cluster(spec: ClusterSpec, run: Run, *,
                     on_event: Callable[[SolveEvent], None] | None = None) -> ClusterRunResult:
    """Start or join Ray, run the engine actors over the problems of ``run`` (its folder created or resumed by
    ``make_run``; closed here), end the actors (and a local Ray)."""

    async def main(connection: RayConnection) -> ClusterRunResult:
        task = asyncio.current_task()
        if task is not None:
            # SIGTERM ends the run like Ctrl-C: the actors' engines and pools are closed, a local Ray stopped.
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        cluster = Cluster(connection)
        try:
            return await cluster.drive(run, on_event=on_event)
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
        finally:
            await cluster.close()

    with RayConnection(spec) as connection:
        return asyncio.run(main(connection))


def generate_on_cluster(connection: RayConnection, runs: Sequence[Any], problems: Sequence[Problem], *,
                        on_event: Callable[[SolveEvent], None] | None = None,
                        on_run: Callable[[Any], None] | None = None) -> list[ClusterRunResult]:
    """A sweep's generation runs (``solver.offline.sweep.PlannedRun``s) one after another on the same actors,
    each resumed when its directory already holds part of it, as ``solver.offline.sweep.generate`` does."""
    from solver.offline.sweep import reusable_config

    async def main() -> list[ClusterRunResult]:
        cluster = Cluster(connection)
        outcomes = []
        try:
            for run in runs:
                saved = reusable_config(run)
                if on_run is not None:
                    on_run(run)
                outcomes.append(await cluster.run(saved or run.config, problems, run.run_dir,
                                                  resume=saved is not None, on_event=on_event))
        finally:
            await cluster.close()
        return outcomes

    return asyncio.run(main())

"""The ``--cluster`` hand-off of ``solve`` and ``sweep``: the same run, on Ray engine actors (solver/cluster); and of
the offline work (``sweep``'s replay, ``simulate``, ``tune``): joblib's parallel calls as Ray tasks."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from solver.commands.common import EXIT_FAILED, EXIT_INTERRUPTED, fail, print_report
from solver.errors import describe

T = TypeVar("T")


def solve_cluster_command(spec: Any, run: Any) -> int:
    """``solver solve ... --cluster SPEC`` over ``run`` (``solver.loop.run.make_run``'s): exit 0 when every problem
    is decided, 1 when actors died under some (their repetitions stay logged; ``--resume`` continues), 2 when the
    cluster cannot be used at all."""
    from solver.cluster.run import solve_on_cluster
    from solver.commands.progress import LiveProgress

    session = run.session
    with LiveProgress(len(run.problems)) as progress:
        try:
            outcome = solve_on_cluster(spec, run, on_event=progress)
        except KeyboardInterrupt:
            print(f"solver: interrupted; continue with: solver solve --resume {session.run_dir} --cluster ...",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        except BaseException:  # Ray or the run failed (logged repetitions stay for --resume)
            session.discard_if_empty()  # a run that failed before its first repetition leaves nothing behind
            raise
    for death in outcome.deaths:
        print(f"solver: {death.describe()}", file=sys.stderr)
    print_report(session.run_dir)
    if outcome.unsolved:
        return fail(f"{len(outcome.unsolved)} problems undecided ({', '.join(outcome.unsolved[:5])}): engine "
                    f"actors died under them; continue with: solver solve --resume {session.run_dir} --cluster ...",
                    EXIT_FAILED)
    return 0


def sweep_on_cluster(spec: Any, sweep: Any, base: Any, problems: Any, out: Path, *, generate_runs: bool,
                     on_event: Any, on_run: Any, jobs_given: bool) -> Any:
    """``solver sweep ... --cluster SPEC``: generation runs on the engine actors, then the offline replay as Ray
    tasks through joblib's Ray backend (``--jobs`` defaults to the cluster's CPUs). Results are the same as
    without ``--cluster``: the offline draws are fixed before the work is spread."""
    import dataclasses

    from solver.cluster.connect import RayConnection
    from solver.cluster.run import generate_on_cluster
    from solver.offline.sweep import plan_runs, run_sweep

    with RayConnection(spec) as connection:
        if generate_runs:
            outcomes = generate_on_cluster(connection, plan_runs(sweep, base, out), problems, on_event=on_event,
                                           on_run=on_run)
            for outcome in outcomes:
                for death in outcome.deaths:
                    print(f"solver: {death.describe()}", file=sys.stderr)
            undecided = sorted({pid for outcome in outcomes for pid in outcome.unsolved})
            if undecided:
                from solver.cluster.spec import ClusterFailed

                raise ClusterFailed(f"{len(undecided)} problems undecided ({', '.join(undecided[:5])}): engine actors "
                                   "died under them; run the same sweep again to continue")
        # --jobs or the spec file's jobs, else the cluster's CPUs
        jobs = sweep.jobs if jobs_given or sweep.jobs != 1 else None
        return offline_on_cluster(connection, lambda n: run_sweep(dataclasses.replace(sweep, jobs=n), base,
                                                                    problems, out, solve=None), jobs)


def offline_on_cluster(target: Any, work: Callable[[int], T], jobs: int | None = None) -> T:
    """``work(jobs)`` with every joblib ``Parallel`` call inside it run as Ray tasks. ``target`` is a ClusterSpec
    (Ray is started or joined here, and left as it was found) or a RayConnection already open; ``jobs`` None means
    the cluster's CPUs. The offline code fixes its random draws before it fans out, so ``work`` gives the same
    result here as with joblib's own processes or in one process. Ray failing under the work is a
    ``ClusterFailed``."""
    from ray.exceptions import RayError

    from solver.cluster.connect import RayConnection, joblib_backend
    from solver.cluster.spec import ClusterFailed

    if not isinstance(target, RayConnection):
        with RayConnection(target) as connection:
            return offline_on_cluster(connection, work, jobs)
    try:
        with joblib_backend(target) as cpus:
            return work(cpus if jobs is None else jobs)
    except RayError as exc:  # a task or worker lost mid-run: the caller says so in one line, exit 1
        raise ClusterFailed(describe(exc)) from exc

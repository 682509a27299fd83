"""``solver sweep --cluster``: the offline replay spread as Ray tasks (joblib's Ray backend) gives the same
results as joblib's own processes; generation runs go to the engine actors (replay engine: 2 actors fit 2 cores).
``--cluster local:2`` finds the package's running Ray (``local_ray``) and uses it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("ray")

from conftest import ROOT  # noqa: E402
from data.eval_runs import build_sweep_runs  # noqa: E402

from solver.cli import main  # noqa: E402
from solver.runlog import read_log  # noqa: E402

REPLAY_RUN = ROOT / "tests" / "data" / "replay_run"


def test_offline_sweep_is_identical_with_and_without_a_cluster(tmp_path: Path, local_ray: int) -> None:
    outs = {}
    for name, extra in (("local", ["--jobs", "2"]), ("cluster", ["--cluster", "local:2"])):
        out = tmp_path / name
        build_sweep_runs(out, reps=8)  # the same recorded runs (same seed) in both
        assert main(["sweep", "demo", "--reps", "1,2,4,8", "--workers", "1,2", "--stopper", "none,agree:3",
                     "--draws", "50", "--offline", "--out", str(out), *extra]) == 0
        outs[name] = out
    local, cluster = ((outs[n] / "sweep.csv").read_text() for n in ("local", "cluster"))
    assert local == cluster
    assert len(pd.read_csv(outs["cluster"] / "sweep.csv")) == 16  # 2 runs x 4 repetition counts x 2 stoppers


def test_sweep_generates_on_engine_actors(tmp_path: Path, local_ray: int) -> None:
    args = ["sweep", "demo", "--reps", "1,2", "--workers", "1,2", "--draws", "10", "--limit", "2", "--engine",
            "replay", "--from", str(REPLAY_RUN), "--set", "engine.replay_time_scale=0", "--set", "sandbox.workers=1"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    assert main([*args, "--out", str(tmp_path / "cluster"), "--cluster", "local:2"]) == 0
    for workers in (1, 2):
        run_dir = tmp_path / "cluster" / "runs" / f"T0.8-tir-w{workers}"
        records = read_log(run_dir)
        assert sorted(r.problem_id for r in records.results) == ["demo-01", "demo-02"]
        assert (run_dir / "cluster.jsonl").is_file()
        # The actors generated exactly what one engine did: the same answers for every (problem, repetition).
        here = read_log(tmp_path / "local" / "runs" / f"T0.8-tir-w{workers}").finished()
        there = records.finished()
        assert {pid: [r.answers for r in reps] for pid, reps in here.items()} == \
            {pid: [r.answers for r in reps] for pid, reps in there.items()}
    # Columns that do not depend on measured wall times: with 2 in flight the replayed finish order follows each
    # repetition's recorded duration, which at replay_time_scale=0 is scheduling noise, so the voted accuracy of
    # a tie may differ between any two runs, clustered or not.
    columns = ["workers", "reps", "stopper", "rep_accuracy", "pass_at_n"]
    local = pd.read_csv(tmp_path / "local" / "sweep.csv")[columns]
    cluster = pd.read_csv(tmp_path / "cluster" / "sweep.csv")[columns]
    pd.testing.assert_frame_equal(local, cluster)


def test_joblib_work_runs_as_ray_tasks_and_simulate_gives_the_same_result(local_ray: int) -> None:
    import os

    import numpy as np
    import psutil
    from joblib import Parallel, delayed

    from solver.cluster.connect import RayConnection, joblib_backend
    from solver.cluster.spec import ClusterSpec
    from solver.offline.sim import SimulationRequest, simulate

    def request(jobs: int) -> SimulationRequest:
        return SimulationRequest((REPLAY_RUN,), reps=(1, 4), stoppers=((), ("agree:2",)), trials=200, seed=3,
                                 calibration_reps=0, jobs=jobs)

    alone = simulate(request(1))
    with RayConnection(ClusterSpec("local", 2)) as connection, joblib_backend(connection) as cpus:
        def whoami() -> tuple[int, str]:  # read in the worker itself: an idle Ray worker may exit right after
            return os.getpid(), psutil.Process().name()

        pids, names = zip(*Parallel(n_jobs=cpus)(delayed(whoami)() for _ in range(4)))
        titles = set(names)
        spread = simulate(request(cpus))
    assert cpus == local_ray == 2 and os.getpid() not in pids
    assert all(title.startswith("ray::") for title in titles), titles
    for a, b in zip(alone.summaries, spread.summaries, strict=True):
        assert np.array_equal(a.scores, b.scores) and a.tokens == b.tokens and a.seconds == b.seconds

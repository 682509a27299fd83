"""End to end with the real engine: a local Ray (``local_ray``: 2 CPUs, no dashboard), one engine actor owning the
vLLM CPU engine (tiny model) and its sandbox pool; the driver writes the run log."""

from __future__ import annotations

import asyncio
import os

import pytest

ray = pytest.importorskip("ray")

from solver.cluster.connect import RayConnection  # noqa: E402
from solver.cluster.driver import Cluster  # noqa: E402
from solver.cluster.spec import ClusterSpec  # noqa: E402
from solver.datasets import load_problems  # noqa: E402
from solver.runlog import read_log  # noqa: E402


@pytest.mark.engine
def test_real_engine_actor_solves_and_the_driver_logs(tiny_config, tmp_path, local_ray):
    problems = load_problems("demo", limit=2)
    run_dir = tmp_path / "run"
    logged_by: list[str] = []

    async def main():
        cluster = Cluster(RayConnection(ClusterSpec("local", 1)),
                          on_repetition=lambda actor, rep: logged_by.append(actor))
        try:
            return await cluster.run(tiny_config, problems, run_dir)
        finally:
            await cluster.close()

    outcome = asyncio.run(main())
    assert outcome.deaths == [] and outcome.unsolved == []
    assert [r.problem_id for r in outcome.results] == [p.id for p in problems]
    records = read_log(run_dir)
    assert len(records.results) == 2
    assert all(len(reps) == 2 for reps in records.finished().values())
    assert all(t.generated_tokens > 0 for r in records.repetitions for t in r.turns)  # the model generated them
    assert logged_by == ["engine-0"] * len(records.repetitions)
    events = (run_dir / "cluster.jsonl").read_text()
    assert '"engine": "vllm"' in events and f'"pid": {os.getpid()}' not in events  # the engine ran in the actor
    assert (run_dir / "answers.csv").is_file() and (run_dir / "report.md").is_file()

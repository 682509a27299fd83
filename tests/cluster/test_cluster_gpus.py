"""Two engine actors on two GPUs, on this CPU machine: the package's local Ray (``local_ray``), told it has 2 GPUs
(``num_gpus=2``; Ray hands out GPU ids without looking for cards), the replay engine in each actor. Each actor gets one GPU of its own through
CUDA_VISIBLE_DEVICES (the variable its engine's processes inherit), its own vLLM cache folder, and the driver's
NCCL settings even when they were set after Ray started (a joined cluster's workers never saw the driver's shell)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from solver.cluster.connect import RayConnection
from solver.cluster.driver import Cluster
from solver.cluster.spec import ClusterSpec
from solver.config import load_config
from solver.replay.replay_engine import problems_from_log
from solver.runlog import read_log

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "replay_run"


def test_each_actor_sees_only_its_own_gpu_and_the_drivers_nccl_settings(local_ray, tmp_path, monkeypatch):
    # Set after Ray started: only the actor's own forwarding can bring them to its process.
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.setenv("NCCL_SOLVER_PROBE", "from-the-driver")
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm-cache"))
    config = load_config("tiny", overrides={"engine.name": "replay", "engine.replay_from": [str(FIXTURE)],
                                            "engine.replay_time_scale": 0.0, "solve.reps": 4, "solve.workers": 1,
                                            "sandbox.workers": 1})
    problems = problems_from_log(FIXTURE)
    run_dir = tmp_path / "run"

    async def main():
        cluster = Cluster(RayConnection(ClusterSpec("local", 2)))
        try:
            return await cluster.run(config, problems, run_dir)
        finally:
            await cluster.close()

    outcome = asyncio.run(main())
    assert outcome.deaths == [] and outcome.unsolved == []
    assert len(read_log(run_dir).results) == len(problems)
    actors = [json.loads(line) for line in (run_dir / "cluster.jsonl").read_text().splitlines()]
    actors = sorted((a for a in actors if a["event"] == "actor"), key=lambda a: a["name"])
    assert sorted(a["gpus"] for a in actors) == ["0", "1"]  # one GPU each, none shared (Ray picks which)
    assert [a["cache_root"] for a in actors] == [str(tmp_path / "vllm-cache" / "engine-0"),
                                                 str(tmp_path / "vllm-cache" / "engine-1")]
    for actor in actors:
        assert actor["env"]["NCCL_NVLS_ENABLE"] == "0"
        assert actor["env"]["NCCL_SOLVER_PROBE"] == "from-the-driver"

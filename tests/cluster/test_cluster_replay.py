"""The driver and engine actors on a local Ray (``local_ray``: 2 CPUs, no dashboard), with the replay engine: the
real pipeline (sandbox, voting) on recorded generations, so two actors fit in 2 cores. An actor killed with
SIGKILL mid-problem stands in for a node lost to the OOM killer or a crash."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from solver.cluster.connect import RayConnection  # noqa: E402
from solver.cluster.driver import Cluster  # noqa: E402
from solver.cluster.spec import ClusterSpec  # noqa: E402
from solver.config import load_config  # noqa: E402
from solver.replay.replay_engine import problems_from_log  # noqa: E402
from solver.loop.run import solve_run  # noqa: E402
from solver.runlog import read_log  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "replay_run"


def replay_config(time_scale: float, **extra):
    overrides = {"engine.name": "replay", "engine.replay_from": [str(FIXTURE)], "engine.replay_time_scale": time_scale,
                 "solve.reps": 4, "solve.workers": 1, "sandbox.workers": 1, **extra}
    return load_config("tiny", overrides=overrides)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same problems solved in process, one engine, no Ray: what the cluster must reproduce."""
    run_dir = tmp_path_factory.mktemp("ref") / "run"
    results = asyncio.run(solve_run(replay_config(0.0), problems_from_log(FIXTURE), run_dir))
    return {r.problem_id: r for r in results}


def run_cluster(run_dir: Path, config, *, on_repetition=None, resume=False):
    """``on_repetition(cluster, actor, repetition)`` runs after each repetition is logged."""

    async def main():
        cluster = Cluster(RayConnection(ClusterSpec("local", 2)))
        if on_repetition is not None:
            cluster.on_repetition = lambda actor, rep: on_repetition(cluster, actor, rep)
        try:
            return cluster, await cluster.run(config, problems_from_log(FIXTURE), run_dir, resume=resume)
        finally:
            await cluster.close()

    return asyncio.run(main())


def check_log(run_dir: Path, reference) -> None:
    """Every problem decided exactly once; no (problem, index) finished twice; each vote is exactly the vote of the
    finished repetitions in the log, and equals the single-engine run's."""
    records = read_log(run_dir)
    assert sorted(Counter(r.problem_id for r in records.results).values()) == [1] * len(reference)
    finished = Counter((r.problem_id, r.index) for r in records.repetitions if r.status != "cancelled")
    assert max(finished.values()) == 1
    by_problem = records.finished()
    for result in records.results:
        logged = by_problem[result.problem_id]
        assert result.repetitions == len(logged)
        assert dict(Counter(r.answers[-1].value for r in logged if r.votes and r.answers)) == result.votes
        ref = reference[result.problem_id]
        assert (result.answer, result.votes, result.repetitions) == (ref.answer, ref.votes, ref.repetitions)


def test_two_actors_solve_like_one_engine(local_ray, reference, tmp_path):
    run_dir = tmp_path / "run"
    seen: dict[str, set[str]] = {}

    def note(cluster: Cluster, actor: str, rep) -> None:
        seen.setdefault(actor, set()).add(rep.problem_id)

    _, outcome = run_cluster(run_dir, replay_config(0.1), on_repetition=note)
    assert outcome.deaths == [] and outcome.unsolved == []
    assert [r.problem_id for r in outcome.results] == list(reference)
    check_log(run_dir, reference)
    assert len(seen) == 2, seen  # both actors took problems from the queue
    assert not set.intersection(*seen.values())  # whole problems: none split between actors
    events = (run_dir / "cluster.jsonl").read_text().splitlines()
    assert sum('"event": "actor"' in line for line in events) == 2
    assert (run_dir / "answers.csv").read_text().count("\n") == len(reference) + 1


@pytest.mark.slow  # a soak: an actor killed mid-problem (~12 s)
def test_actor_killed_mid_problem_is_requeued_and_keeps_its_repetitions(local_ray, reference, tmp_path):
    run_dir = tmp_path / "run"
    killed: list[tuple[str, int]] = []

    def kill_on_first(cluster: Cluster, actor: str, rep) -> None:
        # SIGKILL the actor that logged demo-03's first repetition; its other three are still to come.
        if rep.problem_id == "demo-03" and not killed:
            info = next(a.info for a in cluster.actors if a.name == actor)
            killed.append((actor, rep.index))
            os.kill(info.pid, signal.SIGKILL)

    _, outcome = run_cluster(run_dir, replay_config(0.3), on_repetition=kill_on_first)
    assert len(killed) == 1
    [death] = outcome.deaths
    assert (death.actor, death.problem_id) == (killed[0][0], "demo-03")
    assert death.kept >= 1 and death.reason  # Ray's exit detail, one line
    assert "\n" not in death.reason
    assert outcome.unsolved == []
    check_log(run_dir, reference)
    demo3 = read_log(run_dir).finished()["demo-03"]
    assert killed[0][1] in {r.index for r in demo3}  # the repetition logged before the kill still votes
    assert '"event": "death"' in (run_dir / "cluster.jsonl").read_text()


def test_every_actor_lost_leaves_the_rest_undecided_and_resume_finishes(local_ray, reference, tmp_path):
    run_dir = tmp_path / "run"
    killed: list[str] = []

    def kill_each_once(cluster: Cluster, actor: str, rep) -> None:
        if actor not in killed:  # each actor dies right after its first logged repetition
            killed.append(actor)
            os.kill(next(a.info.pid for a in cluster.actors if a.name == actor), signal.SIGKILL)

    _, outcome = run_cluster(run_dir, replay_config(0.3), on_repetition=kill_each_once)
    assert sorted(killed) == ["engine-0", "engine-1"]
    assert sorted(d.actor for d in outcome.deaths) == ["engine-0", "engine-1"]
    assert outcome.unsolved and not outcome.results  # nobody finished a problem; all undecided
    assert sorted(outcome.unsolved) == sorted(reference)
    logged = read_log(run_dir).finished()
    assert sum(len(reps) for reps in logged.values()) >= 2

    _, resumed = run_cluster(run_dir, replay_config(0.0), resume=True)
    assert resumed.deaths == [] and resumed.unsolved == []
    check_log(run_dir, reference)
    for pid, reps in logged.items():  # what was logged before the losses still votes
        assert {r.index for r in reps} <= {r.index for r in read_log(run_dir).finished()[pid]}

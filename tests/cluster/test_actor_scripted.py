"""The engine actor's own control flow, in this process (no Ray), with a scripted engine double whose engine
dies part way: repetitions the dead engine failed are not sent to the driver (they are not samples of the
model), and the problem ends with EngineDied so the driver re-queues it on another actor."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from doubles import ScriptedEngine, ScriptedSandbox, printed

from solver.cluster.actor import EngineActor, EngineDied
from solver.config import load_config
from solver.loop.problem import SolveEvent
from solver.types import Delta, Problem, ProblemResult, Repetition

PROBLEM = Problem("p1", "What is 3 + 4?", "7")


class DyingEngineDouble(ScriptedEngine):
    """A scripted engine double that dies after ``lives`` requests: later requests fail as vLLM's do when its
    engine core has exited (one error Delta), and ``is_dead`` says so."""

    def __init__(self, lives: int) -> None:
        super().__init__(lambda request: "So the answer is $\\boxed{7}$.")
        self.lives = lives

    def is_dead(self) -> bool:
        return len(self.requests) > self.lives

    async def stream(self, request):
        if len(self.requests) >= self.lives:
            self.requests.append(request)
            yield Delta(text="", token_ids=(), finish_reason="error", error="EngineDeadError: engine core died")
            return
        async for delta in super().stream(request):
            yield delta


@pytest.fixture(autouse=True)
def restore_omp(monkeypatch):
    """The actor sets OMP_NUM_THREADS in its process (here, this one); monkeypatch restores it afterwards."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")


def actor_with(engine, config) -> EngineActor:
    actor = EngineActor("engine-0", omp_threads="2")
    # What ``start`` opens, given directly: the double engine and sandbox, as a Session holds them.
    actor._session = SimpleNamespace(engine=engine, sandbox=ScriptedSandbox(printed("7")), config=config)
    return actor


async def collect(actor: EngineActor, config, done=()) -> tuple[list, BaseException | None]:
    items = []
    try:
        async for item in actor.solve(config, PROBLEM, done):
            items.append(item)
    except EngineDied as exc:
        return items, exc
    return items, None


def test_a_healthy_engine_streams_each_repetition_then_the_result():
    config = load_config("tiny", overrides={"solve.reps": 3, "solve.workers": 1})
    items, error = asyncio.run(collect(actor_with(DyingEngineDouble(lives=100), config), config))
    assert error is None
    reps = [i for i in items if isinstance(i, Repetition)]
    assert [r.index for r in reps] == [0, 1, 2] and all(r.status == "done" for r in reps)
    assert isinstance(items[-1], ProblemResult) and items[-1].votes == {"7": 3.0}
    assert any(isinstance(i, SolveEvent) for i in items)


def test_a_dead_engine_ends_the_problem_without_logging_its_failures():
    config = load_config("tiny", overrides={"solve.reps": 4, "solve.workers": 1})
    items, error = asyncio.run(collect(actor_with(DyingEngineDouble(lives=2), config), config))
    assert isinstance(error, EngineDied) and "engine-0" in str(error)
    reps = [i for i in items if isinstance(i, Repetition)]
    assert [(r.index, r.status) for r in reps] == [(0, "done"), (1, "done")]  # the failed ones never leave
    assert not any(isinstance(i, ProblemResult) for i in items)


def test_kept_repetitions_are_not_run_again():
    config = load_config("tiny", overrides={"solve.reps": 3, "solve.workers": 1})
    first, _ = asyncio.run(collect(actor_with(DyingEngineDouble(lives=100), config), config))
    kept = [i for i in first if isinstance(i, Repetition)][:2]
    engine = DyingEngineDouble(lives=100)
    items, error = asyncio.run(collect(actor_with(engine, config), config, kept))
    assert error is None
    assert [r.index for r in items if isinstance(r, Repetition)] == [2]
    assert len(engine.requests) == 1
    assert items[-1].repetitions == 3 and items[-1].votes == {"7": 3.0}


def test_the_actor_refuses_other_engine_settings():
    config = load_config("tiny", overrides={"solve.reps": 1})
    other = config.replace({"engine.args.max_num_seqs": 8})
    with pytest.raises(ValueError, match="other engine or sandbox settings"):
        asyncio.run(collect(actor_with(DyingEngineDouble(lives=1), config), other))

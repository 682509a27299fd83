"""The simulator against the running pipeline, on this machine: recorded attempts replayed through the whole solve
run (``solve_run``: the run directory, the budget manager, the solve loop, the harmony dialect reading every
streamed id) on the replay engine timed by an engine time model (``engine.replay_timing: model``, at a time scale
so a five-minute problem takes seconds) with the recorded outputs after their recorded or re-measured seconds,
against the simulator's prediction of that same run (the same draws, rules, budget and model). Per problem: the
seconds it took (the run's, scaled back) against the predicted, and whether it stopped alike (the reason, the
answer, repetitions finished and launched). The prediction is the leaderboard simulator's
(``solver.offline.sim.simulated_run``); the run is the live loop's on the replay engine, so the check is the
measurement wing's: neither the offline analysis nor the replay room runs the loop.

The replayed run's budget is the config's scaled by the same factor (the budget's formula is linear in time, so
every allotment scales with it); the engine's start is not part of a replay, so neither side counts it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from solver.config import BudgetConfig, Config
from solver.replay import EngineTime, RecordedCalls, ReplayEngine
from solver.timing.model import EngineTimeModel
from solver.types import ProblemResult

if TYPE_CHECKING:  # the simulator is loaded by the check alone, not by every user of the replay room
    from solver.offline.sim import Played, ProblemPool


@dataclass(frozen=True)
class ProblemCheck:
    problem_id: str
    draw: tuple[int, ...]  # recorded repetitions in launch order
    allotted_s: float | None  # the simulated budget's allotment
    simulated: Played
    replayed: ProblemResult
    replayed_s: float  # the run's seconds for the problem, scaled back to model seconds

    @property
    def same(self) -> bool:
        """Stopped alike: the reason, the answer, repetitions finished and launched."""
        r, s = self.replayed, self.simulated
        return (r.stopped_by, r.answer, r.repetitions, r.launched) == (s.stopped_by, s.answer, s.finished, s.launched)

    @property
    def time_gap(self) -> float:
        """Replayed seconds over simulated seconds, minus 1."""
        return self.replayed_s / self.simulated.seconds - 1 if self.simulated.seconds > 0 else 0.0


@dataclass(frozen=True)
class ReplayCheck:
    model: str
    time_scale: float
    budget: BudgetConfig
    problems: list[ProblemCheck]

    @property
    def worst_gap(self) -> float:
        return max((abs(p.time_gap) for p in self.problems), default=0.0)

    @property
    def all_same(self) -> bool:
        return all(p.same for p in self.problems)

    def table(self) -> list[str]:
        """The check as markdown table lines."""
        lines = ["| problem | draw | allotted s | simulated s | replayed s | gap | stop (sim / run) | answer | "
                 "finished | launched |", "|---|---|---:|---:|---:|---:|---|---|---|---|"]
        for p in self.problems:
            s, r = p.simulated, p.replayed
            allotted = "-" if p.allotted_s is None else f"{p.allotted_s:.0f}"
            lines.append(f"| {p.problem_id} | {','.join(map(str, p.draw))} | {allotted} | {s.seconds:.1f} | "
                         f"{p.replayed_s:.1f} | {p.time_gap:+.1%} | {s.stopped_by} / {r.stopped_by} | "
                         f"{s.answer} / {r.answer} | {s.finished} / {r.repetitions} | {s.launched} / {r.launched} |")
        return lines


def scaled_budget(budget: BudgetConfig, scale: float) -> BudgetConfig:
    """Every time of the budget times ``scale``.

    >>> scaled_budget(BudgetConfig(total_s=1000, min_s=10, max_s=100, reserve_s=50, cutoff_s=900), 0.1).max_s
    10.0
    """
    def times(value: float | None) -> float | None:
        return None if value is None else value * scale

    return replace(budget, total_s=times(budget.total_s), min_s=budget.min_s * scale, max_s=budget.max_s * scale,
                   reserve_s=budget.reserve_s * scale, cutoff_s=times(budget.cutoff_s))


def replayed_run(pools: Sequence[ProblemPool], config: Config, model: EngineTimeModel,
                 draws: Mapping[str, Sequence[int]], time_scale: float, run_dir: Path) -> list[ProblemResult]:
    """The pipeline's run of the same draws (module docstring), written to ``run_dir``."""
    from solver.loop.run import solve_run

    recorded = {p.problem.id: [p.repetitions[i] for i in draws[p.problem.id]] for p in pools}
    length = config.engine.args.get("max_model_len")
    run_config = replace(config, budget=scaled_budget(config.budget, time_scale))

    async def main() -> list[ProblemResult]:
        engine = ReplayEngine(recorded, EngineTime(model, time_scale), max_model_len=int(length) if length else None)
        sandbox = RecordedCalls.of_turns(engine.recorded_execution, time_scale)
        return await solve_run(run_config, [p.problem for p in pools], run_dir, engine=engine, sandbox=sandbox)

    return asyncio.run(main())


def check_replay(pools: Sequence[ProblemPool], config: Config, model: EngineTimeModel,
                 draws: Mapping[str, Sequence[int]], time_scale: float = 0.05,
                 run_dir: Path | None = None) -> ReplayCheck:
    """Replay ``draws`` (per problem, recorded repetitions in launch order, at least ``solve.reps`` plus
    ``solve.retry_reps`` of them) through the pipeline and the simulator and compare them, problem by problem."""
    from solver.offline.sim import prepare, simulated_run

    model = replace(model, start_s=0.0)
    prepared = prepare(pools, [config.vote.voter], config, None)
    predicted = simulated_run(prepared, config, model, draws)
    with tempfile.TemporaryDirectory(prefix="replay-check-") as tmp:
        results = replayed_run(pools, config, model, draws, time_scale, run_dir or Path(tmp) / "run")
    by_id = {r.problem_id: r for r in results}
    checks = [ProblemCheck(prep.problem.id, tuple(draws[prep.problem.id]), slot.allotted_s, slot.played,
                           by_id[prep.problem.id], by_id[prep.problem.id].duration_s / time_scale)
              for prep, slot in zip(prepared, predicted.problems)]
    return ReplayCheck(model.name, time_scale, config.budget, checks)

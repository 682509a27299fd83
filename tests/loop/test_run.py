"""A whole run (solve_run): what a resumed run's time budget knows about its earlier sessions.

The problem solver is replaced by a recording double (control flow only): these tests look at the deadline each
problem is given, not at solving."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from doubles import ScriptedEngine, ScriptedSandbox, printed

from doubles import FakeClock
from solver.config import Config
from solver.loop import run as run_module
from solver.loop.problem import ProblemSolver
from solver.runlog import RunLog
from solver.types import Problem, ProblemResult, Repetition

PROBLEMS = [Problem("p1", "one?", "1"), Problem("p2", "two?", "2")]
BUDGETED = Config().replace({"budget.total_s": 1000, "budget.problems": 2, "budget.min_s": 100,
                             "budget.max_s": 900, "budget.reserve_s": 0})


def _recording_solver(monkeypatch: pytest.MonkeyPatch) -> dict[str, float | None]:
    deadlines: dict[str, float | None] = {}

    async def solve(self: ProblemSolver, problem: Problem, *, deadline: float | None = None,
                    done: object = ()) -> ProblemResult:
        deadlines[problem.id] = deadline
        return ProblemResult(problem.id, "0", {}, 0, 0, "deadline", 0.0, 0)

    monkeypatch.setattr(ProblemSolver, "solve", solve)
    return deadlines


def _run(run_dir: Path, *, resume: bool, clock: FakeClock) -> None:
    engine, sandbox = ScriptedEngine(lambda req: ""), ScriptedSandbox(printed("1"))
    asyncio.run(run_module.solve_run(BUDGETED, PROBLEMS, run_dir, resume=resume, clock=clock, engine=engine,
                                     sandbox=sandbox))


def test_resumed_run_keeps_the_time_and_problems_its_first_session_spent(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    run_dir = tmp_path / "run"
    with RunLog.create(run_dir, BUDGETED) as log:
        started = json.loads((run_dir / "meta.json").read_text())["started_at"]
        for p in PROBLEMS:
            log.append_problem(p)
        # The first session solved p1 with repetitions ending 600 s after it started, then was killed.
        log.append(Repetition("p1", 0, 1, "done", (), (), started + 10.0, 590.0))
        log.append_result(ProblemResult("p1", "1", {"1": 1.0}, 1, 1, "max_reps", 590.0, 10, True))
    deadlines = _recording_solver(monkeypatch)
    _run(run_dir, resume=True, clock=FakeClock(0.0))
    # 1000 s in all, 600 spent, p2 the only problem left: 400 s, not a fresh budget's 1000 − 100 = 900 s.
    assert deadlines == {"p2": 400.0}


def test_a_fresh_run_budgets_from_its_own_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    deadlines = _recording_solver(monkeypatch)
    _run(tmp_path / "run", resume=False, clock=FakeClock(0.0))
    assert deadlines["p1"] == 900.0  # 1000 − 100 for the one after it, capped at max_s 900

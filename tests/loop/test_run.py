"""A whole run: how make_run puts it together, and (solve_run) what a resumed run's time budget knows about its
earlier sessions.

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


# -- make_run: the one way a run is put together ------------------------------------------------------------------

def test_make_run_shares_the_budget_among_the_data_sets_problems_when_asked(tmp_path: Path):
    budgeted = BUDGETED.replace({"budget.total_s": 1000, "budget.min_s": 100, "budget.max_s": 900,
                                 "budget.reserve_s": 0, "budget.problems": 7})
    made = run_module.make_run(budgeted, PROBLEMS, tmp_path / "a", share_budget=True, check=False, clock=FakeClock())
    assert made.config.budget.problems == 2 and made.budget is not None and made.budget.allot().problems_left == 2
    assert made.session is not None and made.session.config == made.config  # the folder saved what the run uses
    whole = run_module.make_run(budgeted, PROBLEMS, None, check=False)
    assert whole.config == budgeted and whole.session is None  # a config is used as it is unless asked


def test_make_run_gives_a_cluster_run_no_budget_and_says_so_once(tmp_path: Path):
    notes: list[str] = []
    made = run_module.make_run(BUDGETED, PROBLEMS, tmp_path / "run", cluster=True, check=False, note=notes.append)
    assert made.budget is None and made.config.budget.total_s is None and made.parts.config == made.config
    assert notes == ["a time budget is for one engine; the cluster run has none"]
    assert run_module.make_run(Config(), PROBLEMS, None, cluster=True, check=False, note=notes.append).budget is None
    assert len(notes) == 1  # nothing to drop, nothing said


def test_make_run_checks_the_config_before_the_folder_exists(tmp_path: Path):
    from solver.config import Choices, ConfigError

    with pytest.raises(ConfigError, match="needs --from RUN_DIR"):
        run_module.make_run(Choices(flags={"engine.name": "replay"}).config(), PROBLEMS, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_make_run_resumes_with_the_config_the_folder_saved(tmp_path: Path):
    from solver.runlog import LogError

    run_module.make_run(BUDGETED, PROBLEMS, tmp_path / "run", check=False).session.close()
    resumed = run_module.make_run(None, PROBLEMS, tmp_path / "run", resume=True, check=False)
    assert resumed.config == BUDGETED and resumed.session is not None and not resumed.session.created
    resumed.session.close()
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogError, match="no run log"):
        run_module.make_run(None, PROBLEMS, tmp_path / "empty", resume=True, check=False)


def test_answers_and_report_come_from_the_runs_one_voter(tmp_path: Path):
    from solver.loop.rundir import RunSession
    from solver.types import Ballot

    made = run_module.make_run(BUDGETED, PROBLEMS, tmp_path / "run", check=False)
    assert made.session is not None and made.session.voter is made.parts.rules.voter  # the solvers' own

    class Thirteen:  # a voter unlike the config's: the report must cast its ballots, not build its own
        name = "thirteen"

        def ballot(self, repetition: Repetition) -> Ballot | None:
            return Ballot("13")

        def winner(self, ballots: object) -> str | None:
            return "13"

    made.session.close()
    session = RunSession.open(tmp_path / "run", voter=Thirteen(), resume=True)
    session.add_problems(PROBLEMS[:1])
    session.record(Repetition("p1", 0, 1, "done", (), (), 0.0, 1.0))  # no answer: the config's voter casts none
    session.decide(ProblemResult("p1", "13", {"13": 1.0}, 1, 1, "max_reps", 1.0, 1))
    session.write_outputs(PROBLEMS[:1])
    session.close()
    assert (tmp_path / "run" / "answers.csv").read_text() == "id,answer\np1,13\n"
    assert "| 13 | 1 |" in (tmp_path / "run" / "report.md").read_text()  # the ballot Thirteen cast

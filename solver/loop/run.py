"""A whole run over a problem set: the one :class:`Run`, the one function that makes it, and the one driver.

:func:`make_run` puts a run together from its config (the user's choices layered over the preset once, by the
command) and the problems: the config's run-level edits (the budget shared among this data set's problems; no
budget on a cluster), every name and path the config gives checked (``prepare_run``) before anything is written,
the run folder opened (created, or resumed with what its log holds) and the time budget made from what earlier
sessions spent. Nothing after it edits the config.

:func:`drive` owns a run's course through its folder: the problems are recorded, the ones not yet decided are
handed to a :data:`Runner`, each result is recorded as it comes, and ``answers.csv`` and ``report.md`` are written
at the end. Where problems are solved is the runner's business: :func:`sequential` solves them one at a time on
this machine's engine, each in its slot of the budget (as the Kaggle gateway serves them; the predictor takes the
same slot per call), :func:`parallel` several at once, the Ray driver (``solver.cluster.driver``) on engine actors.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from solver.config import Config
from solver.core.budget import BudgetManager, budget_for, problem_slot, without_budget
from solver.core.clock import SystemClock
from solver.loop.parts import RunParts, prepare_run
from solver.loop.problem import ProblemSolver, SolverSession, SolveEvent
from solver.loop.rundir import RunSession
from solver.runlog import LogError, RunRecords, read_log
from solver.types import Clock, Engine, Problem, ProblemResult, Sandbox


@dataclass(frozen=True)
class Run:
    """A run, put together once (:func:`make_run`): what every runner and the driver read, never edit."""

    config: Config  # as the run uses it (a resumed run: as its folder saved it)
    problems: tuple[Problem, ...]  # in the order given; those decided in an earlier session are skipped
    session: RunSession | None  # the run folder, open; None: a run that writes none (a predictor without one)
    budget: BudgetManager | None  # the time budget of the problems left; None when the config sets none
    parts: RunParts  # what the config names, resolved: the rules and the prompt template
    clock: Clock  # the budget's and the solver's

    @property
    def run_dir(self) -> Path | None:
        return None if self.session is None else self.session.run_dir


def make_run(config: Config | None, problems: Sequence[Problem], run_dir: Path | None, *,
             resume: bool = False, records: RunRecords | None = None, share_budget: bool = False,
             cluster: bool = False, check: bool = True, clock: Clock | None = None, start: float | None = None,
             note: Callable[[str], None] | None = None) -> Run:
    """The one way a run is put together (module docstring).

    ``config``: the run's, whole (the user's choices layered over the preset once, by the caller:
    ``Choices.config``), or None with ``resume``, which continues ``run_dir`` with the config it saved
    (``records``: that run as the caller has just read it, if it has). ``share_budget``: the time budget shares its
    hours among these problems (``budget.problems`` set to their count: ``solver solve`` when the user chose no
    count). ``cluster``: the run has no time budget (``note`` says so when the config set one; default: a line on
    stderr). ``check``:
    resolve and check every name and path first (``prepare_run``); without it only the rules and the template
    are made (a run over an engine the caller already holds). ``start``: when the budget's day began on
    ``clock`` (default: now, so the engine's start counts against it). Bad input is a one-line error before the
    folder is written.
    """
    clock = clock or SystemClock()
    if resume:
        if records is None:
            records = read_log(Path(run_dir or "."), allow_empty=True)  # read once, handed to the session
        if records.config is None:
            raise LogError(f"{run_dir} has no config.yaml to resume with")
        config = records.config
    elif config is None:
        raise ValueError("a new run needs its config")
    elif share_budget:
        # The time budget shares its hours among the problems of this data set, not the preset's count.
        config = config.replace({"budget.problems": max(1, len(problems))})
    parts = prepare_run(config) if check else RunParts.of(config)  # before RUN_DIR exists: a bad name writes nothing
    if cluster and without_budget(config) != config:
        (note or _stderr)("a time budget is for one engine; the cluster run has none")
        config = without_budget(config)
        parts = replace(parts, config=config)  # the rules and the template do not read the budget
    session = None if run_dir is None else RunSession.open(run_dir, config, voter=parts.rules.voter, resume=resume,
                                                           records=records)
    decided = 0 if session is None else len(problems) - len(session.todo(problems))
    budget = budget_for(config.budget, clock, start, spent_s=0.0 if session is None else session.spent_s,
                        done=decided)
    return Run(config, tuple(problems), session, budget, parts, clock)


def _stderr(line: str) -> None:
    print(f"solver: note: {line}", file=sys.stderr)


# -- the driver ----------------------------------------------------------------------------------------------------

Runner = Callable[[Run, Sequence[Problem]], Awaitable[list[str]]]
"""Solves the problems given (not yet decided, in order), recording every repetition and result through the run's
session as it happens; returns the ids of those it had to leave undecided."""


@dataclass(frozen=True)
class RunOutcome:
    results: list[ProblemResult]  # in problem order, the problems decided (now or before a resume)
    unsolved: list[str] = field(default_factory=list)  # problem ids left without a result


async def drive(run: Run, runner: Runner) -> RunOutcome:
    """Run the run's problems: record them, solve those not yet decided with ``runner``, write the answers and the
    report. The session stays open (the caller closes it)."""
    session = _session(run)
    await asyncio.to_thread(session.add_problems, run.problems)
    todo = session.todo(run.problems)
    unsolved = await runner(run, todo) if todo else []
    await asyncio.to_thread(session.write_outputs, run.problems)
    return RunOutcome(session.results(run.problems), unsolved)


def _session(run: Run) -> RunSession:
    if run.session is None:
        raise ValueError("a driven run writes its folder: make it with a run_dir")
    return run.session


async def _decide(run: Run, solver: ProblemSolver, problem: Problem, deadline: float | None = None) -> None:
    session = _session(run)
    result = await solver.solve(problem, deadline=deadline, done=session.done(problem.id))
    await asyncio.to_thread(session.decide, result)  # its fsync off the event loop


def sequential(solver: ProblemSolver) -> Runner:
    """One problem at a time on ``solver``, each in its slot of the run's budget, as the Kaggle gateway serves
    them."""

    async def run_all(run: Run, todo: Sequence[Problem]) -> list[str]:
        for problem in todo:
            with problem_slot(run.budget) as slot:
                await _decide(run, solver, problem, slot.deadline)
        return []

    return run_all


def parallel(solver: ProblemSolver, at_once: int) -> Runner:
    """``at_once`` problems at a time on ``solver``, no budget (validation runs: several problems share the
    engine, so one problem's slow tail does not leave the batch half empty)."""

    async def run_all(run: Run, todo: Sequence[Problem]) -> list[str]:
        gate = asyncio.Semaphore(at_once)

        async def gated(problem: Problem) -> None:
            async with gate:
                await _decide(run, solver, problem)

        await asyncio.gather(*(gated(p) for p in todo))
        return []

    return run_all


def local_runner(solver: ProblemSolver) -> Runner:
    """This machine's runner for ``solver``'s config: :func:`sequential` (``solve.parallel_problems`` 1, the
    default) or :func:`parallel`."""
    at_once = solver.config.solve.parallel_problems
    return sequential(solver) if at_once == 1 else parallel(solver, at_once)


async def solve_locally(run: Run, *, on_event: Callable[[SolveEvent], None] | None = None,
                        engine: Engine | None = None, sandbox: Sandbox | None = None) -> RunOutcome:
    """Solve ``run`` on this machine, logging each repetition as it finishes; the run's session is closed at the
    end. The solver comes from a :class:`SolverSession`: over ``engine`` and ``sandbox`` when given (used as they
    are and left open: a sweep reuses one engine across runs), else over the parts the config names, opened here
    and closed at the end (for ``engine.replay_outputs``, the replay engine and the recorded outputs)."""
    session = _session(run)
    try:
        async with SolverSession(run.parts, clock=run.clock, on_repetition=session.record, on_event=on_event,
                                 engine=engine, sandbox=sandbox) as opened:
            return await drive(run, local_runner(opened.solver))
    finally:
        session.close()


async def solve_run(config: Config, problems: Sequence[Problem], run_dir: Path, *, resume: bool = False,
                    clock: Clock | None = None, on_event: Callable[[SolveEvent], None] | None = None,
                    engine: Engine | None = None, sandbox: Sandbox | None = None) -> list[ProblemResult]:
    """:func:`make_run` from a whole config (names not checked again: the caller's) and :func:`solve_locally`;
    ``resume`` keeps what the folder's log has. The results, in problem order."""
    run = await asyncio.to_thread(make_run, config, problems, run_dir, resume=resume, check=False, clock=clock)
    return (await solve_locally(run, on_event=on_event, engine=engine, sandbox=sandbox)).results

"""A whole run over a problem set: the one run driver.

:func:`drive` owns a run's course through its directory (:class:`~solver.loop.rundir.RunSession`): the problems
are recorded, the ones not yet decided are handed to a :data:`Runner`, each result is recorded as it comes, and
``answers.csv`` and ``report.md`` are written at the end. Where problems are solved is the runner's business:
:func:`local_runner` solves them on this machine's engine (one at a time under the time budget, or several at
once), the Ray driver (``solver.cluster.driver``) on engine actors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from solver.core.clock import SystemClock
from solver.config import Config
from solver.core.budget import BudgetManager, problem_slot
from solver.loop.parts import RunParts
from solver.loop.problem import ProblemSolver, SolverSession, SolveEvent
from solver.loop.rundir import RunSession
from solver.types import Clock, Engine, Problem, ProblemResult, Sandbox

Runner = Callable[[Sequence[Problem], RunSession], Awaitable[list[str]]]
"""Solves the problems given (not yet decided, in order), recording every repetition and result through the
session as it happens; returns the ids of those it had to leave undecided."""


@dataclass(frozen=True)
class RunOutcome:
    results: list[ProblemResult]  # in problem order, the problems decided (now or before a resume)
    unsolved: list[str] = field(default_factory=list)  # problem ids left without a result


async def drive(session: RunSession, problems: Sequence[Problem], runner: Runner) -> RunOutcome:
    """Run ``problems`` through ``session``: record them, solve those not yet decided with ``runner``, write the
    answers and the report. The session stays open (the caller closes it)."""
    await asyncio.to_thread(session.add_problems, problems)
    todo = session.todo(problems)
    unsolved = await runner(todo, session) if todo else []
    await asyncio.to_thread(session.write_outputs, problems)
    return RunOutcome(session.results(problems), unsolved)


def local_runner(solver: ProblemSolver, budget: BudgetManager | None = None) -> Runner:
    """Problems solved on ``solver`` (whose repetitions the session records): one at a time, each with its share
    of ``budget``, as the Kaggle gateway serves them; or ``solve.parallel_problems`` at once (validation runs,
    no budget: several problems share the engine, so one problem's slow tail does not leave the batch half
    empty)."""

    async def run(todo: Sequence[Problem], session: RunSession) -> list[str]:
        async def one(problem: Problem, deadline: float | None = None) -> None:
            result = await solver.solve(problem, deadline=deadline, done=session.done(problem.id))
            await asyncio.to_thread(session.decide, result)  # its fsync off the event loop

        if solver.config.solve.parallel_problems == 1:
            for problem in todo:
                with problem_slot(budget) as slot:
                    await one(problem, slot.deadline)
        else:
            gate = asyncio.Semaphore(solver.config.solve.parallel_problems)

            async def gated(problem: Problem) -> None:
                async with gate:
                    await one(problem)

            await asyncio.gather(*(gated(p) for p in todo))
        return []

    return run


async def solve_run(config: Config, problems: Sequence[Problem], run_dir: Path, *, resume: bool = False,
                    clock: Clock | None = None, on_event: Callable[[SolveEvent], None] | None = None,
                    engine: Engine | None = None, sandbox: Sandbox | None = None,
                    session: RunSession | None = None, parts: RunParts | None = None) -> list[ProblemResult]:
    """Solve every problem on this machine, logging each repetition as it finishes; ``resume`` keeps what the
    log has. ``session`` is the run directory already opened by the caller (it is closed here all the same);
    ``parts`` what the caller's ``prepare_run`` made of the config (else made here).

    The solver comes from a :class:`SolverSession`: over ``engine`` and ``sandbox`` when given (used as they are
    and left open: a sweep reuses one engine across runs), else over the parts the config names, opened here and
    closed at the end (for ``engine.replay_outputs``, the replay engine and the recorded outputs).
    """
    clock = clock or SystemClock()
    if session is None:
        session = await asyncio.to_thread(RunSession.open, run_dir, config, resume=resume)
    try:
        budget = session.budget(problems, clock)  # from here: the engine's start counts against it
        async with SolverSession(config, clock=clock, on_repetition=session.record, on_event=on_event,
                                 engine=engine, sandbox=sandbox, parts=parts) as opened:
            outcome = await drive(session, problems, local_runner(opened.solver, budget))
        return outcome.results
    finally:
        session.close()

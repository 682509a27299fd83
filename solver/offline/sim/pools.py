"""Recorded repetitions as the leaderboard simulation reads them: the problems and finished repetitions of one or
more runs (pooled), and per problem what a trial needs without the text (ballots per voter, seconds, tokens)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from solver.config import Config
from solver.core.state import cast
from solver.core.voting import make_voter
from solver.errors import BadInput
from solver.offline.sim.plans import Limits, attempt_plan, limited
from solver.runlog import LogError, read_log
from solver.timing.timeline import AttemptPlan
from solver.types import Ballot, Problem, Repetition


class SimulationError(BadInput, ValueError):
    """Input the simulation cannot use; the message is one line meant for the user."""


@dataclass(frozen=True)
class ProblemPool:
    """A problem and its finished recorded repetitions (pooled over runs)."""

    problem: Problem
    repetitions: tuple[Repetition, ...]


def load_pools(run_dirs: Sequence[Path]) -> tuple[list[ProblemPool], Config]:
    """Problems and their finished repetitions from one or more runs of the same problem set.

    The config returned is the first run's. Errors (missing, empty or other-version logs, runs of different
    problem sets, problems without a reference answer) are ``SimulationError``s with one line.
    """
    if not run_dirs:
        raise SimulationError("give at least one run directory")
    problems: dict[str, Problem] = {}
    pooled: dict[str, list[Repetition]] = {}
    config: Config | None = None
    first_ids: set[str] | None = None
    for run_dir in run_dirs:
        try:
            records = read_log(Path(run_dir))
        except LogError as exc:
            raise SimulationError(str(exc)) from exc
        ids = {p.id for p in records.problems} | {r.problem_id for r in records.repetitions}
        if first_ids is None:
            first_ids = ids
            config = records.config
        elif ids != first_ids:
            only_here = sorted(ids - first_ids)
            only_first = sorted(first_ids - ids)
            example = (only_here or only_first)[0]
            raise SimulationError(f"{run_dir} holds a different problem set than {run_dirs[0]} "
                                  f"({len(only_here)} problems only here, {len(only_first)} only there, "
                                  f"e.g. {example!r})")
        for p in records.problems:
            known = problems.setdefault(p.id, p)
            if known.answer != p.answer:
                raise SimulationError(f"problem {p.id!r} has reference {known.answer!r} in one run and "
                                      f"{p.answer!r} in {run_dir}")
        for pid, reps in records.finished().items():
            pooled.setdefault(pid, []).extend(reps)
    assert first_ids is not None
    missing = sorted(pid for pid in first_ids if pid not in problems or problems[pid].answer is None)
    if missing:
        raise SimulationError(f"{len(missing)} problems have no reference answer (e.g. {missing[0]!r}); "
                              "the simulation grades against them")
    pools = [ProblemPool(problems[pid], tuple(pooled.get(pid, ()))) for pid in sorted(first_ids)]
    return pools, config or Config()


@dataclass(frozen=True)
class Prepared:
    """What a trial needs of one problem, without the text, each recorded repetition as a run under the config's
    limits makes it (``solver.offline.sim.plans.limited``): ballots per voter (what it brings to the problem's state,
    ``solver.core.state.cast``), seconds and tokens, and its requests for an engine time model."""

    problem: Problem
    ballots: dict[str, tuple[Ballot | None, ...]]  # voter name -> one ballot per recorded repetition
    seconds: np.ndarray  # float, per recorded repetition
    tokens: np.ndarray  # float, per recorded repetition
    plans: tuple[AttemptPlan, ...] = ()


def repetition_seconds(rep: Repetition, tokens_per_s: float | None) -> float:
    """Recorded wall time, or generated tokens at ``tokens_per_s`` plus the recorded code-execution time.

    >>> from solver.types import Turn, Execution
    >>> r = Repetition("p", 0, 0, "done", (Turn("x", 5, 60, "stop", 2.0, Execution("", "ok", "", "", 0.5)),),
    ...                (), 0.0, 2.6)
    >>> repetition_seconds(r, None), repetition_seconds(r, 30.0)
    (2.6, 2.5)
    """
    if tokens_per_s is None:
        return rep.duration_s
    return rep.generated_tokens / tokens_per_s + sum(e.duration_s for e in rep.executions)


def prepare(pools: Sequence[ProblemPool], voters: Sequence[str], config: Config,
            tokens_per_s: float | None) -> list[Prepared]:
    out = []
    made = {name: make_voter(replace(config.vote, voter=name), config.answers) for name in voters}
    limits = Limits.of(config)
    for pool in pools:
        reps = [limited(r, limits, config.answers) for r in pool.repetitions]
        ballots = {name: tuple(cast(v, r) for r in reps) for name, v in made.items()}
        seconds = np.array([repetition_seconds(r, tokens_per_s) for r in reps], dtype=float)
        tokens = np.array([r.generated_tokens for r in reps], dtype=float)
        out.append(Prepared(pool.problem, ballots, seconds, tokens, tuple(attempt_plan(r) for r in reps)))
    return out

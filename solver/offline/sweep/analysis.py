"""A sweep's analysis: smaller repetition counts, voters and stopping rules replayed on random orders of the
recorded repetitions (common random numbers), one row per setting."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from solver.config import ConfigError
from solver.offline.sim import play
from solver.core.grading import Grader, GradedRepetition, grade_repetitions, pass_at_k, wilson_interval
from solver.offline.sweep.runs import PlannedRun
from solver.offline.sweep.spec import NO_STOPPER, SweepError, SweepSpec, stopper_for
from solver.types import Ballot, Problem, Stopper, Voter  # noqa: F401 - Ballot: doctests

if TYPE_CHECKING:  # pandas is imported inside the functions that need it (slow import)
    import pandas as pd


@dataclass(frozen=True)
class SweptProblem:
    """One simulated solve of one problem."""

    answer: str
    finished: int
    launched: int
    seconds: float
    tokens: float
    executions: float


def simulate_problem(pool: Sequence[GradedRepetition], order: Sequence[int], reps: int, workers: int,
                     voter: Voter, stopper: Stopper, default: str) -> SweptProblem:
    """Replay one problem with the leaderboard simulator's solve-loop model (``solver.offline.sim.play.play``): the
    first ``reps`` repetitions of ``order`` start on ``workers`` slots, each finish is voted and may stop the
    problem; what is still running then is cancelled and counts in proportion to the time it ran.

    >>> from solver.config import VoteConfig, AnswerConfig
    >>> from solver.core.voting import make_voter
    >>> pool = [GradedRepetition(i, "done", Ballot(a), None, d, 100, 1) for i, (a, d) in
    ...         enumerate([("7", 1.0), ("7", 2.0), ("3", 4.0)])]
    >>> majority = make_voter(VoteConfig(), AnswerConfig())
    >>> simulate_problem(pool, [0, 1, 2], 3, 3, majority, stopper_for("agree:2", 3), "0")
    SweptProblem(answer='7', finished=2, launched=3, seconds=2.0, tokens=250.0, executions=2.5)
    >>> simulate_problem(pool, [2, 0, 1], 3, 1, majority, stopper_for("none", 3), "0").seconds
    7.0
    """

    chosen = [pool[i] for i in order[:reps]]
    ballots = [r.ballot for r in chosen]
    seconds = [r.duration_s for r in chosen]

    def replay(work: Sequence[float]) -> Any:
        return play(ballots, seconds, work, voter=voter, stopper=stopper, default=default, workers=workers)

    run = replay([float(r.generated_tokens) for r in chosen])
    if run.finished == len(chosen):  # nothing cancelled: every execution happened
        executions = float(sum(r.executions for r in chosen))
    else:  # the same replay, counting executions instead of tokens
        executions = replay([float(r.executions) for r in chosen]).tokens
    return SweptProblem(run.answer, run.finished, run.launched, run.seconds, run.tokens, executions)


@dataclass(frozen=True)
class RunPools:
    """A generation run read back: graded repetitions per problem for one voter."""

    run: PlannedRun
    problems: list[Problem]
    pools: dict[str, list[GradedRepetition]]
    measured_s: float | None  # sum of per-problem solve times, when every problem has a result
    recorded_reps: int  # solve.reps of the run (a reused run may hold more than the sweep's largest N)
    measured_tokens: int  # generated tokens of the problems with a result


def read_pools(run: PlannedRun, voter: Voter, grader: Grader, problem_ids: Sequence[str] | None = None) -> RunPools:
    """Grade a finished generation run with one voter; only ``problem_ids`` when given (a run directory
    reused from a larger sweep may hold more problems)."""
    from solver.runlog import LogError, read_log

    try:
        records = read_log(run.run_dir)
    except LogError as exc:
        raise SweepError(str(exc)) from exc
    problems = list(records.problems)
    if problem_ids is not None:
        # In the data's order, not the log's: problems solved at once (or on several engine actors) are logged in
        # the order they happen to start, and each problem's draws are keyed by its position.
        rank = {pid: i for i, pid in enumerate(problem_ids)}
        problems = sorted((p for p in problems if p.id in rank), key=lambda p: rank[p.id])
    finished = records.finished()
    pools = {p.id: grade_repetitions(finished.get(p.id, []), p.answer, voter, grader) for p in problems}
    results = {r.problem_id: r for r in records.results if r.problem_id in pools}
    complete = bool(problems) and len(results) == len(problems)
    return RunPools(run, problems, pools,
                    measured_s=sum(r.duration_s for r in results.values()) if complete else None,
                    recorded_reps=(records.config or run.config).solve.reps,
                    measured_tokens=sum(r.generated_tokens for r in results.values()))


def analyse(runs: Sequence[PlannedRun], spec: SweepSpec, problem_ids: Sequence[str] | None = None, *,
            jobs: int = 1) -> pd.DataFrame:
    """One row per (temperature, prompt, voter, stopper, workers, repetitions) from finished generation runs.
    ``jobs`` > 1 replays rows in parallel processes (joblib); the draws are fixed first, so rows are the same
    for any number of jobs."""
    import pandas as pd
    from joblib import Parallel, delayed

    from solver.core.voting import make_voter

    tasks = []
    for run in runs:
        for voter_name in spec.voters or (run.config.vote.voter,):
            try:
                config = run.config.replace({"vote.voter": voter_name})
                voter = make_voter(config.vote, config.answers)
            except ConfigError as exc:
                raise SweepError(str(exc)) from exc
            grader = Grader(config.answers)
            read = read_pools(run, voter, grader, problem_ids)
            if not read.problems:
                raise SweepError(f"{run.run_dir} holds none of the sweep's problems")
            orders = {p.id: _orders(spec.seed, k, len(read.pools[p.id]), spec.draws)
                      for k, p in enumerate(read.problems)}
            for stopper_name, reps in itertools.product(spec.stoppers, spec.reps):
                stopper = stopper_for(stopper_name, reps)
                tasks.append(delayed(_row)(run, read, voter_name, voter, stopper_name, stopper, reps, orders,
                                           grader, config.answers.default))
    return pd.DataFrame(Parallel(n_jobs=jobs)(tasks))  # n_jobs=1 runs in this process


def _orders(seed: int, problem_number: int, size: int, draws: int) -> list[list[int]]:
    """``draws`` random orders of a problem's repetitions, the same for every setting (common random numbers).

    >>> _orders(0, 3, 4, 2) == _orders(0, 3, 4, 2), sorted(_orders(0, 3, 4, 1)[0])
    (True, [0, 1, 2, 3])
    """
    import numpy as np

    rng = np.random.default_rng([seed, problem_number])
    return [rng.permutation(size).tolist() for _ in range(draws)]


def _row(run: PlannedRun, read: RunPools, voter_name: str, voter: Voter, stopper_name: str, stopper: Stopper,
         reps: int, orders: dict[str, list[list[int]]], grader: Grader, default: str) -> dict[str, Any]:
    correct: list[float] = []
    rep_accuracy: list[float] = []
    passes: list[float] = []
    used = launched = seconds = tokens = executions = 0.0
    for problem in read.problems:
        pool = read.pools[problem.id]
        outcomes = [simulate_problem(pool, order, reps, run.workers, voter, stopper, default)
                    for order in orders[problem.id]]
        n = len(outcomes)
        used += sum(o.finished for o in outcomes) / n
        launched += sum(o.launched for o in outcomes) / n
        seconds += sum(o.seconds for o in outcomes) / n
        tokens += sum(o.tokens for o in outcomes) / n
        executions += sum(o.executions for o in outcomes) / n
        if problem.answer is not None:
            correct.append(sum(grader(o.answer, problem.answer) for o in outcomes) / n)
            right = sum(1 for r in pool if r.correct)
            rep_accuracy.append(right / len(pool) if pool else 0.0)
            passes.append(pass_at_k(len(pool), right, reps))
    count = len(read.problems) or 1
    low, high = wilson_interval(sum(correct), len(correct))
    exact = reps == read.recorded_reps and stopper_name == NO_STOPPER
    measured = read.measured_s if exact else None
    return {
        "temperature": run.temperature, "prompt": run.prompt, "voter": voter_name, "stopper": stopper_name,
        "workers": run.workers, "reps": reps, "problems": len(read.problems), "graded": len(correct),
        "accuracy": _mean_or_nan(correct), "accuracy_low": low, "accuracy_high": high,
        "rep_accuracy": _mean_or_nan(rep_accuracy), "pass_at_n": _mean_or_nan(passes),
        "reps_used": used / count, "launched": launched / count, "runtime_s": seconds,
        "runtime_measured_s": math.nan if measured is None else measured,
        "tokens": tokens, "executions": executions,
        "tokens_per_s": (read.measured_tokens / measured if measured else tokens / seconds if seconds else math.nan),
        "run": run.run_dir.name,
    }


def _mean_or_nan(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan

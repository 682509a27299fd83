"""Monte-Carlo trials: many whole leaderboard runs of every setting on common random draws, in parallel chunks
(joblib) that give the same result for a seed whatever the number of jobs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from solver.clock import FakeClock
from solver.config import AnswerConfig, Config, StopConfig, VoteConfig
from solver.core.budget import BudgetManager
from solver.core.stopping import make_stopper
from solver.core.voting import make_voter
from solver.core.state import StopTable
from solver.offline.model import play
from solver.offline.pools import Prepared, SimulationError
from solver.report import Grader as AnswerGrader
from solver.types import Problem

Draw = Literal["auto", "bootstrap", "subset"]
TRIALS_PER_CHUNK = 50  # trials per parallel task; fixed, so results do not depend on the number of jobs


@dataclass(frozen=True)
class Setting:
    """One point of the grid. ``stoppers`` empty = run every repetition; ``budget_s`` None = no time budget."""

    reps: int
    voter: str
    stoppers: tuple[str, ...]
    workers: int
    budget_s: float | None = None

    @property
    def label(self) -> str:
        """
        >>> Setting(16, "majority", ("beta", "esc:5"), 8, 3600.0).label
        'reps=16 voter=majority stop=beta,esc:5 workers=8 budget=3600s'
        """
        budget = "-" if self.budget_s is None else f"{self.budget_s:g}s"
        return (f"reps={self.reps} voter={self.voter} stop={self.stop_label} workers={self.workers} "
                f"budget={budget}")

    @property
    def stop_label(self) -> str:
        """The stoppers as every table and plot names them.

        >>> Setting(8, "majority", (), 1).stop_label, Setting(8, "majority", ("margin:3", "lossless"), 1).stop_label
        ('none', 'margin:3,lossless')
        """
        return ",".join(self.stoppers) or "none"


def grid(reps: Sequence[int], voters: Sequence[str], stoppers: Sequence[tuple[str, ...]],
         workers: Sequence[int], budgets: Sequence[float | None]) -> list[Setting]:
    """Every combination, repetitions varying fastest (the order plots use).

    >>> [s.reps for s in grid([8, 16], ["majority"], [(), ("beta",)], [4], [None])]
    [8, 16, 8, 16]
    """
    return [Setting(n, v, s, w, b) for v in voters for s in stoppers for w in workers for b in budgets for n in reps]


@dataclass(frozen=True)
class Plan:
    """Everything a chunk of trials needs; plain data so it pickles to a worker process."""

    prepared: list[Prepared]
    settings: list[Setting]
    vote: VoteConfig
    answers: AnswerConfig
    stop: StopConfig
    config: Config  # its budget section is used by budgeted settings (total_s and problems replaced)
    problems: int  # K
    draw: Draw
    max_reps: int  # the longest draw any setting needs


@dataclass
class ChunkResult:
    """Per setting: one row per trial."""

    scores: np.ndarray  # (settings, trials) problems right
    finished: np.ndarray  # (settings, trials) mean finished repetitions per problem
    launched: np.ndarray
    tokens: np.ndarray  # mean tokens per problem
    seconds: np.ndarray  # mean seconds per problem
    total_seconds: np.ndarray  # whole run
    stops: list[Counter[str]] = field(default_factory=list)  # per setting: stop reasons over problems
    right: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (settings, pools) times answered right
    drawn: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (pools,) times a problem was in a trial


def draw_indices(rng: np.random.Generator, available: int, length: int, draw: Draw) -> np.ndarray:
    """Indices of the repetitions one trial uses for one problem, in launch order.

    ``subset`` draws without replacement: a random subset of independently sampled repetitions is itself a real
    run, so every statistic of N repetitions comes out unbiased (and their prefixes are subsets too, so smaller
    N share the draw). ``bootstrap`` draws with replacement: it works for any N but is biased where answers are
    rare (a problem with k answers among M recorded loses them all with probability (1 - k/M)^N, which averages
    above a real run's (1 - a)^N). ``auto`` is ``subset`` where the problem has ``length`` repetitions recorded
    and ``bootstrap`` where it has fewer.

    >>> sorted(draw_indices(np.random.default_rng(0), 4, 4, "auto").tolist()), len(draw_indices(np.random.default_rng(0), 3, 5, "auto"))
    ([0, 1, 2, 3], 5)
    >>> draw_indices(np.random.default_rng(0), 3, 5, "subset")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.offline.pools.SimulationError: a problem has 3 recorded repetitions; subset draws of 5 need at least ...
    """
    if available == 0:
        return np.zeros(0, dtype=int)
    if draw == "subset" or (draw == "auto" and length <= available):
        if length > available:
            raise SimulationError(f"a problem has {available} recorded repetitions; subset draws of {length} "
                                  "need at least that many (use --draw auto or bootstrap)")
        return rng.permutation(available)[:length]
    return rng.integers(0, available, size=length)


class Grader:
    """Correctness of an answer per problem, remembered (``solver.report.Grader``: math-verify can take
    milliseconds per call)."""

    def __init__(self, rules: AnswerConfig) -> None:
        self._grade = AnswerGrader(rules)

    def __call__(self, problem: Problem, answer: str) -> bool:
        return problem.answer is not None and self._grade(answer, problem.answer)


def run_chunk(plan: Plan, trials: int, seed: Sequence[int]) -> ChunkResult:
    """``trials`` leaderboard runs of every setting on shared draws from ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(list(seed))
    s_count = len(plan.settings)
    shape = (s_count, trials)
    out = ChunkResult(*(np.zeros(shape) for _ in range(6)), stops=[Counter() for _ in range(s_count)],
                      right=np.zeros((s_count, len(plan.prepared))), drawn=np.zeros(len(plan.prepared)))
    grade = Grader(plan.answers)
    voters = {name: make_voter(replace(plan.vote, voter=name), plan.answers)
              for name in {s.voter for s in plan.settings}}
    stoppers = {(s.stoppers, s.reps): StopTable(make_stopper(replace(plan.stop, stoppers=s.stoppers), s.reps))
                for s in plan.settings}
    k = plan.problems
    for t in range(trials):
        order = rng.permutation(len(plan.prepared))[:k]
        draws = [draw_indices(rng, len(plan.prepared[p].seconds), plan.max_reps, plan.draw) for p in order]
        out.drawn[order] += 1
        for s_index, setting in enumerate(plan.settings):
            clock = FakeClock(0.0)
            manager = None
            if setting.budget_s is not None:
                budget = replace(plan.config.budget, total_s=setting.budget_s, problems=k)
                manager = BudgetManager(budget, clock)
            score, fin, lau, tok, sec = 0, 0, 0, 0.0, 0.0
            for p, idx in zip(order, draws):
                prep = plan.prepared[p]
                take = idx[: setting.reps]
                ballots = prep.ballots[setting.voter]
                deadline = None
                if manager is not None:
                    absolute = manager.next_deadline()
                    deadline = None if absolute is None else absolute - clock.now()
                result = play([ballots[i] for i in take], prep.seconds[take], prep.tokens[take],
                              voter=voters[setting.voter], stopper=stoppers[(setting.stoppers, setting.reps)],
                              default=plan.answers.default, workers=setting.workers, deadline_s=deadline)
                clock.advance(result.seconds)
                if manager is not None:
                    manager.finish_problem()
                right = grade(prep.problem, result.answer)
                score += right
                out.right[s_index, p] += right
                fin += result.finished
                lau += result.launched
                tok += result.tokens
                sec += result.seconds
                out.stops[s_index][result.stopped_by] += 1
            out.scores[s_index, t] = score
            out.finished[s_index, t] = fin / k
            out.launched[s_index, t] = lau / k
            out.tokens[s_index, t] = tok / k
            out.seconds[s_index, t] = sec / k
            out.total_seconds[s_index, t] = clock.now()
    return out


def _chunks(trials: int) -> list[int]:
    """
    >>> _chunks(120)
    [50, 50, 20]
    """
    return [min(TRIALS_PER_CHUNK, trials - start) for start in range(0, trials, TRIALS_PER_CHUNK)]


def run_trials(plan: Plan, trials: int, seed: int, jobs: int = 1) -> ChunkResult:
    """All trials, chunked and run in parallel with joblib; the same seed gives the same result for any jobs."""
    from joblib import Parallel, delayed

    chunks = [(size, (seed, number)) for number, size in enumerate(_chunks(trials))]
    if jobs == 1 or len(chunks) == 1:
        parts = [run_chunk(plan, size, chunk_seed) for size, chunk_seed in chunks]
    else:
        parts = Parallel(n_jobs=jobs)(delayed(run_chunk)(plan, size, chunk_seed) for size, chunk_seed in chunks)
    arrays = ("scores", "finished", "launched", "tokens", "seconds", "total_seconds")
    return ChunkResult(*(np.concatenate([getattr(p, name) for p in parts], axis=1) for name in arrays),
                       stops=[sum((p.stops[i] for p in parts), Counter()) for i in range(len(plan.settings))],
                       right=sum(p.right for p in parts), drawn=sum(p.drawn for p in parts))

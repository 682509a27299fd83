"""Leaderboard simulation: what score a setting (repetitions, voter, stopper, workers, time budget) gives on a
hidden set of K problems, and how much that score moves between reruns, estimated from recorded repetitions.

One trial plays a whole leaderboard run: K problems (a random subset of the recorded ones, in random order, as
the Kaggle gateway shuffles them), each solved by drawing repetitions from that problem's recording and replaying
the solve loop's decisions on them: W in flight, each taking its recorded time, votes counted as they finish,
the stopper asked after each one, the budget manager's deadline cutting the rest. Every setting is evaluated on
the same draws (common random numbers), so differences between settings are not sampling noise between them.

Draws: ``bootstrap`` samples a problem's repetitions with replacement (models fresh reruns; works for any N),
``subset`` without replacement (needs N <= recorded; never repeats a repetition, so it understates the spread
when N is close to the number recorded). Deterministic for a seed whatever the number of parallel jobs.

The calibration check splits each problem's repetitions into two disjoint halves, simulates N repetitions from
one half, and compares that score distribution with real N-repetition runs built from the other half.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np

from solver.core.answers import is_correct
from solver.core.budget import BudgetManager
from solver.clock import FakeClock
from solver.config import AnswerConfig, BudgetConfig, Config, ConfigError, StopConfig, VoteConfig
from solver.runlog import LogError, read_log
from solver.core.stopping import make_stopper, stop_reason
from solver.types import Ballot, Problem, Repetition, Stopper, Voter, VoteState
from solver.core.voting import decide, make_voter

Draw = Literal["bootstrap", "subset"]
TRIALS_PER_CHUNK = 50  # trials per parallel task; fixed, so results do not depend on the number of jobs


class SimulationError(ValueError):
    """Input the simulation cannot use; the message is one line meant for the user."""


# ---- inputs ----------------------------------------------------------------------------------------------


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
        stop = ",".join(self.stoppers) or "none"
        return f"reps={self.reps} voter={self.voter} stop={stop} workers={self.workers} budget={budget}"


def grid(reps: Sequence[int], voters: Sequence[str], stoppers: Sequence[tuple[str, ...]],
         workers: Sequence[int], budgets: Sequence[float | None]) -> list[Setting]:
    """Every combination, repetitions varying fastest (the order plots use).

    >>> [s.reps for s in grid([8, 16], ["majority"], [(), ("beta",)], [4], [None])]
    [8, 16, 8, 16]
    """
    return [Setting(n, v, s, w, b) for v in voters for s in stoppers for w in workers for b in budgets for n in reps]


@dataclass(frozen=True)
class Prepared:
    """What a trial needs of one problem, without the text: ballots per voter, seconds and tokens per rep."""

    problem: Problem
    ballots: dict[str, tuple[Ballot | None, ...]]  # voter name -> one ballot per recorded repetition
    seconds: np.ndarray  # float, per recorded repetition
    tokens: np.ndarray  # float, per recorded repetition


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
    for pool in pools:
        ballots = {name: tuple(v.ballot(r) if r.votes else None for r in pool.repetitions)
                   for name, v in made.items()}
        seconds = np.array([repetition_seconds(r, tokens_per_s) for r in pool.repetitions], dtype=float)
        tokens = np.array([r.generated_tokens for r in pool.repetitions], dtype=float)
        out.append(Prepared(pool.problem, ballots, seconds, tokens))
    return out


# ---- one problem, one draw (pure) -------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    answer: str
    finished: int  # repetitions that finished
    launched: int
    seconds: float  # wall time until the answer
    tokens: float  # generated tokens, cancelled repetitions counted pro rata of their elapsed time
    stopped_by: str


def pattern(ballots: Sequence[Ballot | None]) -> tuple[int, ...]:
    """Ballots with each answer renamed to its first-seen rank (-1 = no answer).

    >>> pattern([Ballot("7"), None, Ballot("3"), Ballot("7")])
    (0, -1, 1, 0)
    """
    ranks: dict[str, int] = {}
    return tuple(-1 if b is None else ranks.setdefault(b.answer, len(ranks)) for b in ballots)


class Reasons:
    """``stop_reason`` of one stopper, remembered per vote pattern. Stopping policies look at vote counts and
    agreement, never at answer values or weights (solver/core/stopping.py), so states with the same pattern decide
    alike; trials meet the same patterns over and over, and some policies (beta) cost tens of microseconds."""

    def __init__(self, stopper: Stopper) -> None:
        self.stopper = stopper
        self._seen: dict[tuple[tuple[int, ...], int], str | None] = {}

    def __call__(self, state: VoteState) -> str | None:
        key = (pattern(state.ballots), state.max_repetitions)
        if key not in self._seen:
            self._seen[key] = stop_reason(self.stopper, state)
        return self._seen[key]


def play(ballots: Sequence[Ballot | None], seconds: Sequence[float], tokens: Sequence[float], *, voter: Voter,
         stopper: Stopper | Reasons, default: str, workers: int, deadline_s: float | None = None) -> Outcome:
    """Replay the solve loop on one ordered draw: launch in order, W at a time, finish by recorded time (ties
    in launch order), ask the stopper after each finish, cancel everything in flight at a stop or the deadline.

    >>> from solver.config import StopConfig, VoteConfig, AnswerConfig
    >>> v = make_voter(VoteConfig(), AnswerConfig())
    >>> b = [Ballot("1"), Ballot("1"), Ballot("2"), Ballot("1")]
    >>> play(b, [1, 2, 2, 4], [10] * 4, voter=v, stopper=make_stopper(StopConfig(("agree:2",)), 4),
    ...      default="0", workers=2)
    Outcome(answer='1', finished=2, launched=3, seconds=2.0, tokens=25.0, stopped_by='agree:2')
    >>> play(b, [1, 2, 3, 4], [10] * 4, voter=v, stopper=make_stopper(StopConfig(), 4), default="0",
    ...      workers=1, deadline_s=2.5).stopped_by
    'deadline'
    """
    if workers < 1:
        raise ValueError(f"play needs at least one worker, got {workers}")
    n = len(ballots)
    if deadline_s is not None and deadline_s <= 0:
        return Outcome(default, 0, 0, 0.0, 0.0, "deadline")
    running: list[tuple[float, int, float]] = []  # (finish time, launch order, start time)
    finished: list[Ballot | None] = []
    launched, now, used_tokens = 0, 0.0, 0.0
    stopped: str | None = None
    while stopped is None:
        while len(running) < workers and launched < n:
            running.append((now + float(seconds[launched]), launched, now))
            launched += 1
        if not running:
            stopped = "max_reps"
            break
        running.sort()
        end, i, _ = running[0]
        if deadline_s is not None and end > deadline_s:
            now, stopped = deadline_s, "deadline"
            break
        running.pop(0)
        now = end
        finished.append(ballots[i])
        used_tokens += float(tokens[i])
        state = VoteState(tuple(finished), n)
        stopped = stopper(state) if isinstance(stopper, Reasons) else stop_reason(stopper, state)
    for end, i, start in running:  # cancelled: count the tokens generated before the cancel
        span = end - start
        used_tokens += float(tokens[i]) * ((now - start) / span if span > 0 else 0.0)
    return Outcome(decide(voter, finished, default), len(finished), launched, now, used_tokens, stopped)


# ---- many trials ------------------------------------------------------------------------------------------


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


def draw_indices(rng: np.random.Generator, available: int, length: int, draw: Draw) -> np.ndarray:
    """Indices of the repetitions one trial uses for one problem, in launch order.

    >>> draw_indices(np.random.default_rng(0), 3, 5, "subset")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.offline.simulate.SimulationError: a problem has 3 recorded repetitions; subset draws of 5 need at least ...
    """
    if available == 0:
        return np.zeros(0, dtype=int)
    if draw == "subset":
        if length > available:
            raise SimulationError(f"a problem has {available} recorded repetitions; subset draws of {length} "
                                  "need at least that many (use --draw bootstrap)")
        return rng.permutation(available)[:length]
    return rng.integers(0, available, size=length)


class Grader:
    """Correctness of an answer per problem, remembered (math-verify can take milliseconds per call)."""

    def __init__(self, rules: AnswerConfig) -> None:
        self.rules = rules
        self._seen: dict[tuple[str, str], bool] = {}

    def __call__(self, problem: Problem, answer: str) -> bool:
        key = (problem.id, answer)
        if key not in self._seen:
            self._seen[key] = problem.answer is not None and is_correct(answer, problem.answer, self.rules)
        return self._seen[key]


def run_chunk(plan: Plan, trials: int, seed: Sequence[int]) -> ChunkResult:
    """``trials`` leaderboard runs of every setting on shared draws from ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(list(seed))
    s_count = len(plan.settings)
    shape = (s_count, trials)
    out = ChunkResult(*(np.zeros(shape) for _ in range(6)), stops=[Counter() for _ in range(s_count)])
    grade = Grader(plan.answers)
    voters = {name: make_voter(replace(plan.vote, voter=name), plan.answers)
              for name in {s.voter for s in plan.settings}}
    stoppers = {(s.stoppers, s.reps): Reasons(make_stopper(replace(plan.stop, stoppers=s.stoppers), s.reps))
                for s in plan.settings}
    k = plan.problems
    for t in range(trials):
        order = rng.permutation(len(plan.prepared))[:k]
        draws = [draw_indices(rng, len(plan.prepared[p].seconds), plan.max_reps, plan.draw) for p in order]
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
                score += grade(prep.problem, result.answer)
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
                       stops=[sum((p.stops[i] for p in parts), Counter()) for i in range(len(plan.settings))])


# ---- summaries --------------------------------------------------------------------------------------------

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class Summary:
    setting: Setting
    problems: int  # K
    trials: int
    mean: float
    std: float
    quantiles: dict[float, float]
    at_least: dict[int, float]  # X -> P(score >= X)
    finished: float  # mean repetitions finished per problem
    launched: float
    tokens: float
    seconds: float  # mean seconds per problem
    total_seconds: float  # mean whole-run seconds
    stops: dict[str, float]  # stop reason -> share of problems
    scores: np.ndarray  # every trial's score


def summarise(settings: Sequence[Setting], result: ChunkResult, problems: int,
              thresholds: Sequence[int]) -> list[Summary]:
    out = []
    for i, setting in enumerate(settings):
        scores = result.scores[i]
        stops = result.stops[i]
        total = sum(stops.values()) or 1
        out.append(Summary(
            setting, problems, len(scores), float(scores.mean()), float(scores.std(ddof=1)) if len(scores) > 1
            else 0.0, {q: float(np.quantile(scores, q)) for q in QUANTILES},
            {x: float((scores >= x).mean()) for x in thresholds}, float(result.finished[i].mean()),
            float(result.launched[i].mean()), float(result.tokens[i].mean()), float(result.seconds[i].mean()),
            float(result.total_seconds[i].mean()), {k: v / total for k, v in stops.most_common()}, scores))
    return out


def default_thresholds(result: ChunkResult) -> list[int]:
    """Scores worth asking P(score >= X) about: the quartiles of all settings' scores together."""
    pooled = result.scores.ravel()
    return sorted({int(round(float(np.quantile(pooled, q)))) for q in (0.25, 0.5, 0.75)})


# ---- calibration ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """Simulated scores (from one half of each problem's repetitions) against held-out real runs (the other)."""

    setting: Setting
    splits: int
    simulated: np.ndarray
    held_out: np.ndarray
    mean_gap: float  # simulated mean - held-out mean, problems
    quantile_gaps: dict[float, float]  # q -> simulated quantile - held-out quantile
    ks: float  # two-sample Kolmogorov-Smirnov statistic
    ks_pvalue: float  # indicative only: held-out runs of different splits share repetitions

    @property
    def verdict(self) -> str:
        return "agree" if self.ks < 0.2 and abs(self.mean_gap) < 1.0 else "differ"


def calibrate(prepared: Sequence[Prepared], setting: Setting, config: Config, *, splits: int = 20,
              trials_per_split: int = 100, seed: int = 0, draw: Draw = "bootstrap") -> Calibration:
    """Split each problem's repetitions into halves A and B; simulate ``setting`` from A, and build real runs
    of ``setting.reps`` consecutive repetitions from B (disjoint chunks); compare the two score distributions.
    No budget here: the check is about the vote and the stopper."""
    from scipy.stats import ks_2samp

    n = setting.reps
    smallest = min(len(p.seconds) for p in prepared)
    if smallest < 2 * n:
        raise SimulationError(f"calibration with {n} repetitions needs at least {2 * n} recorded per problem; "
                              f"the smallest problem has {smallest}")
    rng = np.random.default_rng([seed, 7919])
    voter = make_voter(replace(config.vote, voter=setting.voter), config.answers)
    stopper = Reasons(make_stopper(replace(config.stop, stoppers=setting.stoppers), n))
    grade = Grader(config.answers)
    held: list[float] = []
    simulated: list[float] = []

    def run_score(parts: Sequence[tuple[Prepared, np.ndarray]]) -> float:
        score = 0
        for prep, idx in parts:
            b = prep.ballots[setting.voter]
            result = play([b[i] for i in idx], prep.seconds[idx], prep.tokens[idx], voter=voter, stopper=stopper,
                          default=config.answers.default, workers=setting.workers)
            score += grade(prep.problem, result.answer)
        return float(score)

    for _ in range(splits):
        halves = []
        for prep in prepared:
            perm = rng.permutation(len(prep.seconds))
            half = len(perm) // 2
            halves.append((perm[:half], perm[half:]))
        runs = min(len(b) for _, b in halves) // n
        for j in range(runs):
            held.append(run_score([(prep, b[j * n:(j + 1) * n]) for prep, (_, b) in zip(prepared, halves)]))
        for _ in range(trials_per_split):
            simulated.append(run_score([(prep, a[draw_indices(rng, len(a), n, draw)])
                                        for prep, (a, _) in zip(prepared, halves)]))
    sim, real = np.array(simulated), np.array(held)
    ks = ks_2samp(sim, real)
    return Calibration(setting, splits, sim, real, float(sim.mean() - real.mean()),
                       {q: float(np.quantile(sim, q) - np.quantile(real, q)) for q in (0.1, 0.5, 0.9)},
                       float(ks.statistic), float(ks.pvalue))


# ---- the whole simulation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimulationRequest:
    run_dirs: tuple[Path, ...]
    reps: tuple[int, ...] = ()  # empty: the run config's solve.reps
    voters: tuple[str, ...] = ()  # empty: the run config's voter
    stoppers: tuple[tuple[str, ...], ...] = ()  # empty: the run config's stoppers
    workers: tuple[int, ...] = ()  # empty: the run config's solve.workers
    budgets: tuple[float | None, ...] = (None,)
    problems: int | None = None  # K; None = every recorded problem
    trials: int = 500
    seed: int = 0
    draw: Draw = "bootstrap"
    tokens_per_s: float | None = None
    thresholds: tuple[int, ...] = ()  # empty: chosen from the scores
    jobs: int = 1
    calibration_reps: int | None = None  # None: the smallest reps that fits; 0 = skip the check
    overrides: tuple[tuple[str, object], ...] = ()  # dotted config keys applied to the runs' config, e.g.
    # (("budget.reserve_s", 0),) — the budget manager's floors and reserve come from the config


@dataclass(frozen=True)
class SimulationReport:
    request: SimulationRequest
    pools: int  # recorded problems
    recorded: tuple[int, int]  # fewest and most finished repetitions per problem
    zero_time: bool  # recorded durations are all zero (imported samples): timing is meaningless
    summaries: list[Summary]
    calibration: Calibration | None
    calibration_note: str | None
    budget: BudgetConfig  # the budget section budgeted settings used (total_s and problems per setting)


def auto_workers(reps: int, config: Config) -> int:
    """What ``solve.workers = 0`` (``--workers auto``) puts in flight, as the simulator models it: the solve loop
    launches while the engine has a free batch slot, so up to ``engine.args.max_num_seqs`` (every repetition when
    the run's config does not say), never more than the repetitions.

    >>> auto_workers(32, Config().replace({"engine.args.max_num_seqs": 16})), auto_workers(8, Config())
    (16, 8)
    """
    batch = config.engine.args.get("max_num_seqs")
    return max(1, min(reps, int(batch))) if isinstance(batch, int) and batch > 0 else reps


def validate(req: SimulationRequest) -> None:
    if any(n < 1 for n in req.reps):
        raise SimulationError("--reps values must be >= 1")
    if any(w < 1 for w in req.workers):
        raise SimulationError("--workers values must be >= 1")
    if any(b is not None and b <= 0 for b in req.budgets):
        raise SimulationError("--budget must be > 0 seconds")
    if req.trials < 1:
        raise SimulationError("--trials must be >= 1")
    if req.problems is not None and req.problems < 1:
        raise SimulationError("--problems must be >= 1")
    if req.tokens_per_s is not None and req.tokens_per_s <= 0:
        raise SimulationError("--tokens-per-s must be > 0")
    if req.draw not in ("bootstrap", "subset"):
        raise SimulationError("--draw must be bootstrap or subset")


def simulate(req: SimulationRequest) -> SimulationReport:
    """Load the runs, play every setting ``req.trials`` times, and run the calibration check."""
    validate(req)
    pools, config = load_pools(req.run_dirs)
    if req.overrides:
        try:
            config = config.replace(dict(req.overrides))
        except ConfigError as exc:
            raise SimulationError(str(exc)) from exc
    reps = req.reps or (config.solve.reps,)
    voters = req.voters or (config.vote.voter,)
    stoppers = req.stoppers or (config.stop.stoppers,)
    workers = req.workers or (config.solve.workers,)
    k = req.problems or len(pools)
    if k > len(pools):
        raise SimulationError(f"--problems {k} exceeds the {len(pools)} problems recorded")
    sizes = [len(p.repetitions) for p in pools]
    if max(sizes) == 0:
        raise SimulationError("the runs hold no finished repetitions")
    try:
        settings = [replace(s, workers=auto_workers(s.reps, config)) if s.workers == 0 else s
                    for s in grid(reps, voters, stoppers, workers, req.budgets)]
        for s in settings:  # fail early, in the parent, on unknown names
            make_stopper(replace(config.stop, stoppers=s.stoppers), s.reps)
        prepared = prepare(pools, voters, config, req.tokens_per_s)
    except ConfigError as exc:
        raise SimulationError(str(exc)) from exc
    plan = Plan(prepared, settings, config.vote, config.answers, config.stop, config, k, req.draw, max(reps))
    if req.draw == "subset" and max(reps) > min(sizes):
        raise SimulationError(f"a problem has only {min(sizes)} recorded repetitions; subset draws of "
                              f"{max(reps)} need more (use --draw bootstrap)")
    result = run_trials(plan, req.trials, req.seed, req.jobs)
    summaries = summarise(settings, result, k, req.thresholds or default_thresholds(result))
    calibration, note = None, None
    if req.calibration_reps != 0:
        n = req.calibration_reps or next((r for r in sorted(reps) if 2 * r <= min(sizes)), min(sizes) // 2)
        base = settings[0]
        if n < 1:
            note = "skipped: fewer than 2 recorded repetitions for some problem"
        else:
            try:
                calibration = calibrate(prepared, replace(base, reps=n, budget_s=None), config, seed=req.seed,
                                        draw=req.draw)
            except SimulationError as exc:
                note = f"skipped: {exc}"
    zero_time = all(float(p.seconds.sum()) == 0.0 for p in prepared)
    return SimulationReport(req, len(pools), (min(sizes), max(sizes)), zero_time, summaries, calibration, note,
                            config.budget)


# ---- output -----------------------------------------------------------------------------------------------


def summary_rows(report: SimulationReport) -> list[dict[str, object]]:
    rows = []
    for s in report.summaries:
        row: dict[str, object] = {
            "setting": s.setting.label, "reps": s.setting.reps, "voter": s.setting.voter,
            "stoppers": ",".join(s.setting.stoppers), "workers": s.setting.workers,
            "budget_s": s.setting.budget_s, "problems": s.problems, "trials": s.trials,
            "mean": round(s.mean, 4), "std": round(s.std, 4), "accuracy": round(s.mean / s.problems, 4),
        }
        row.update({f"q{int(q * 100):02d}": s.quantiles[q] for q in QUANTILES})
        row.update({f"p_ge_{x}": round(p, 4) for x, p in s.at_least.items()})
        row.update({"reps_per_problem": round(s.finished, 3), "launched_per_problem": round(s.launched, 3),
                    "tokens_per_problem": round(s.tokens, 1), "seconds_per_problem": round(s.seconds, 3),
                    "run_seconds": round(s.total_seconds, 1),
                    "deadline_share": round(s.stops.get("deadline", 0.0), 4)})
        rows.append(row)
    return rows


def markdown(report: SimulationReport) -> str:
    req = report.request
    k = report.summaries[0].problems
    lines = [
        "# Leaderboard simulation", "",
        f"Runs: {', '.join(str(p) for p in req.run_dirs)}  ",
        f"Recorded problems: {report.pools}; finished repetitions per problem: {report.recorded[0]}–"
        f"{report.recorded[1]}  ",
        f"K = {k} problems per leaderboard run, {req.trials} trials per setting, seed {req.seed}, "
        f"draw = {req.draw}, timing = " + (f"{req.tokens_per_s:g} tokens/s + recorded code time"
                                           if req.tokens_per_s else "recorded durations"), "",
    ]
    if report.zero_time:
        lines += ["**Recorded durations are all zero**: seconds and budgets are meaningless; pass --tokens-per-s.",
                  ""]
    at_least = list(report.summaries[0].at_least)
    head = ["setting", "mean", "std", "5%", "50%", "95%", *[f"P(≥{x})" for x in at_least], "reps/problem",
            "tokens/problem", "s/problem", "deadline"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in report.summaries:
        cells = [s.setting.label, f"{s.mean:.2f}", f"{s.std:.2f}", f"{s.quantiles[0.05]:g}",
                 f"{s.quantiles[0.5]:g}", f"{s.quantiles[0.95]:g}", *[f"{p:.2f}" for p in s.at_least.values()],
                 f"{s.finished:.1f}", f"{s.tokens:.0f}", f"{s.seconds:.1f}", f"{s.stops.get('deadline', 0):.0%}"]
        lines.append("| " + " | ".join(cells) + " |")
    if any(s.setting.budget_s is not None for s in report.summaries):
        b = report.budget
        lines += ["", "Budgeted settings use the budget manager (solver/core/budget.py) on a simulated clock with "
                  f"total_s = --budget, problems = K and the config's min_s = {b.min_s:g}, max_s = {b.max_s:g}, "
                  f"reserve_s = {b.reserve_s:g}, cutoff_s = {b.cutoff_s} (change them with --set budget.KEY=V)."]
        starved = [s.setting.budget_s for s in report.summaries
                   if s.setting.budget_s is not None and s.setting.budget_s <= b.reserve_s]
        if starved:
            lines.append(f"**Budget {starved[0]:g} s is not above budget.reserve_s = {b.reserve_s:g} s: no "
                         "problem gets any time.**")
    lines += ["", "## Calibration", ""]
    cal = report.calibration
    if cal is None:
        lines.append(f"Not run ({report.calibration_note or 'disabled'}).")
    else:
        gaps = ", ".join(f"{int(q * 100)}%: {g:+.2f}" for q, g in cal.quantile_gaps.items())
        lines += [
            f"Setting {cal.setting.label}, {cal.splits} random half splits of each problem's repetitions: "
            f"{len(cal.simulated)} simulated runs drawn from one half against {len(cal.held_out)} real "
            f"{cal.setting.reps}-repetition runs made of the other half.", "",
            f"- mean score: simulated {cal.simulated.mean():.2f}, held-out {cal.held_out.mean():.2f} "
            f"(gap {cal.mean_gap:+.2f} problems)",
            f"- std: simulated {cal.simulated.std():.2f}, held-out {cal.held_out.std():.2f}",
            f"- quantile gaps (simulated − held-out): {gaps}",
            f"- Kolmogorov–Smirnov statistic {cal.ks:.3f} (p = {cal.ks_pvalue:.2f}, indicative: held-out runs of "
            f"different splits share repetitions) → **{cal.verdict}** (agree = KS < 0.2 and |mean gap| < 1)",
        ]
    lines += ["", "Not modelled: the DeepConf online confidence filter (stop.confidence_warmup) and engine "
              "slow-down when more repetitions run at once (each repetition keeps its recorded time)."]
    return "\n".join(lines) + "\n"


def write_outputs(report: SimulationReport, out_dir: Path) -> list[Path]:
    """summary.csv, scores.csv, report.md and the plots, written into ``out_dir`` (files replaced whole)."""
    import pandas as pd

    from solver.offline.plots import plot_accuracy_vs_reps, plot_score_distributions

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    summary = out_dir / "summary.csv"
    _replace_text(summary, pd.DataFrame(summary_rows(report)).to_csv(index=False))
    scores = pd.DataFrame([{"setting": s.setting.label, "trial": t, "score": float(v)}
                           for s in report.summaries for t, v in enumerate(s.scores)])
    _replace_text(out_dir / "scores.csv", scores.to_csv(index=False))
    _replace_text(out_dir / "report.md", markdown(report))
    written += [summary, out_dir / "scores.csv", out_dir / "report.md"]
    written.append(plot_score_distributions(report.summaries, out_dir / "scores.png"))
    written.append(plot_accuracy_vs_reps(report.summaries, out_dir / "accuracy_vs_reps.png"))
    return written


def _replace_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def score_band(scores: np.ndarray, k: int) -> tuple[float, float, float]:
    """Mean accuracy and its 5–95 % leaderboard band for one setting.

    >>> score_band(np.array([8.0, 9.0, 10.0]), 10)
    (0.9, 0.81, 0.99)
    """
    lo, hi = np.quantile(scores, [0.05, 0.95])
    return round(float(scores.mean()) / k, 6), round(float(lo) / k, 6), round(float(hi) / k, 6)

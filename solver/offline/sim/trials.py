"""Monte-Carlo trials: many whole leaderboard runs of every setting on common random draws, in parallel chunks
(joblib) that give the same result for a seed whatever the number of jobs.

Each setting draws its own repetitions (``reps`` plus a second round's ``retry``): for a problem, a trial holds one
random order of its M recorded repetitions and one with-replacement sequence. With ``auto`` a setting that needs L
takes the order's first L where L <= M (exact: a random subset of real repetitions is a real run), and where L > M
all M in that order topped up with the sequence's first L - M (``bootstrapped``, counted per setting, its bias
estimated in ``solver.offline.sim.bias``): as exact as the recording goes. Both are fixed per trial and problem
whatever the grid holds, and a shorter draw is a prefix of a longer one, so a setting's row does not depend on
the other settings, and a second round never changes how its first round is drawn.

A problem's times come from a timeline (``solver.timing.timeline``): under the engine time model, one per draw and
W (computed once and shared by every stopper, voter and budget played over it, and, where W covers the draw, by
every order of the same repetitions); without one, each repetition's recorded seconds. A run's speed factor
(``--machine-speed``, a stress test off by default: no rule of AIMO3 varies the machine) multiplies every second of that run, the engine's start,
steps, requests, prefills and tool calls alike, as a uniformly slower or faster machine would: the engine time
model's seconds are all proportional to its parameters, so scaling the timeline is scaling the model. The factor
is drawn per trial and run from the trial's key alone, so every setting meets the same machine.

Under a scoring rule of two runs (``solver.offline.sim.scoring``, AIMO3's private leaderboard) a trial plays the
same K problems twice, in the order the rule gives (AIMO3's private set: the first run's, fixed) and with the draws
the seed policy gives (``sampling.seed_policy``): ``fixed``, the same seeds, replays the first run's draws (the two
runs differ only where their clocks cut differently, i.e. under the machine-speed stress test); ``per-run`` draws
afresh (the recorded repetitions the first run left, positions N..2N of the same order, where the problem has 2N
recorded: two disjoint random subsets are two independent real runs; elsewhere a draw of its own). A problem's
credit follows from how many of its runs answered right. The day is played under both policies (the other one for
its scores only), so the report shows what the choice does to the spread and P(>= the line).

The first run's order is random (``order: random``, the gateway's shuffle) or, as a stress setting, the problems
sorted by how hard the recordings make them (the share of recorded repetitions right): ``hard-first``,
``hard-last`` or ``hard-middle`` (the hardest in the middle, the easiest at both ends), ties in random order. The
budget allots time by position, so where the hard problems sit moves the cuts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

import numpy as np

from solver.config import AnswerConfig, Config
from solver.core.state import Rules
from solver.offline.sim.play import ProblemDraw, Rounds, SimulatedDay, simulated_day
from solver.offline.sim.pools import Prepared, SimulationError
from solver.offline.sim.scoring import DEFAULT_SCORING, SCORINGS, Scoring
from solver.core.grading import Grader
from solver.timing.model import EngineTimeModel
from solver.timing.timeline import Timeline, engine_timeline, fixed_timeline
from solver.types import Problem

Draw = Literal["auto", "bootstrap", "subset"]
Order = Literal["random", "hard-first", "hard-last", "hard-middle"]
ORDERS: tuple[str, ...] = get_args(Order)
SeedPolicy = Literal["fixed", "per-run"]
SEED_POLICIES: tuple[str, ...] = get_args(SeedPolicy)
TRIALS_PER_CHUNK = 50  # trials per parallel task; fixed, so results do not depend on the number of jobs
# Seed words that set a trial's other streams apart from its draws' ([key, problem, 0 or 1]; problems are indices
# far below these): the second run's order and key, and each run's speed factor.
SECOND_RUN, SPEED = 2**31 - 1, 2**31 - 2


@dataclass(frozen=True)
class Setting:
    """One point of the grid. ``stoppers`` empty = run every repetition; ``budget_s`` None = no time budget;
    ``retry``: a second round of that many (``solve.retry_reps``); ``clamp``: the budget's (min_s, max_s), None =
    the config's; ``banking``: time banking (``budget.banking``)."""

    reps: int
    voter: str
    stoppers: tuple[str, ...]
    workers: int
    budget_s: float | None = None
    retry: int = 0
    clamp: tuple[float, float] | None = None
    banking: bool = False

    @property
    def draws(self) -> int:
        """Repetitions a trial draws for one problem: both rounds."""
        return self.reps + self.retry

    @property
    def label(self) -> str:
        """
        >>> Setting(16, "majority", ("beta", "esc:5"), 8, 3600.0).label
        'reps=16 voter=majority stop=beta,esc:5 workers=8 budget=3600s'
        >>> Setting(8, "majority", ("agree:4",), 8, 18000.0, 8, (300.0, 900.0), True).label
        'reps=8 voter=majority stop=agree:4 workers=8 budget=18000s retry=8 clamp=300-900 banking'
        """
        budget = "-" if self.budget_s is None else f"{self.budget_s:g}s"
        text = (f"reps={self.reps} voter={self.voter} stop={self.stop_label} workers={self.workers} "
                f"budget={budget}")
        return text + self.policy_label

    @property
    def policy_label(self) -> str:
        """The time policy beyond the budget (a second round, the clamp, banking), as the label ends."""
        parts = [f" retry={self.retry}" if self.retry else "",
                 f" clamp={self.clamp[0]:g}-{self.clamp[1]:g}" if self.clamp else "",
                 " banking" if self.banking else ""]
        return "".join(parts)

    def config(self, base: Config, problems: int | None = None) -> Config:
        """``base`` with what this setting decides laid over it: the voter, the stoppers, the repetitions of both
        rounds, the workers and the budget (its total, the clamp, banking and, given, the ``problems`` it is shared
        among; none at all when ``budget_s`` is None). That is the config a run of the setting would have: its rules
        are ``Rules.of`` it and its budget is its ``budget`` section, as in the running loop.

        >>> c = Setting(6, "majority", ("agree:3",), 2, 600.0, 4, (60.0, 300.0)).config(Config(), 10)
        >>> c.solve.reps, c.solve.retry_reps, c.stop.stoppers, c.budget.total_s, c.budget.problems, c.budget.max_s
        (6, 4, ('agree:3',), 600.0, 10, 300.0)
        >>> Setting(6, "majority", (), 2).config(Config().replace({"budget.cutoff_s": 60})).budget.cutoff_s is None
        True
        """
        # Section by section (each validates itself): Config.replace would parse the whole config again, ~2 ms.
        if self.budget_s is None:
            budget = replace(base.budget, total_s=None, cutoff_s=None)
        else:
            budget = replace(base.budget, total_s=self.budget_s, banking=self.banking,
                             problems=base.budget.problems if problems is None else problems)
            if self.clamp is not None:
                budget = replace(budget, min_s=self.clamp[0], max_s=self.clamp[1])
        return replace(base, vote=replace(base.vote, voter=self.voter), stop=replace(base.stop, stoppers=self.stoppers),
                       solve=replace(base.solve, reps=self.reps, retry_reps=self.retry, workers=self.workers),
                       budget=budget)

    @property
    def rules_key(self) -> tuple[str, tuple[str, ...], int, int]:
        """What of the setting its rules depend on (settings that differ only in workers or budget share rules,
        and so one stop table)."""
        return self.voter, self.stoppers, self.reps, self.retry

    @property
    def stop_label(self) -> str:
        """The stoppers as every table and plot names them.

        >>> Setting(8, "majority", (), 1).stop_label, Setting(8, "majority", ("margin:3", "lossless"), 1).stop_label
        ('none', 'margin:3,lossless')
        """
        return ",".join(self.stoppers) or "none"


def grid(reps: Sequence[int], voters: Sequence[str], stoppers: Sequence[tuple[str, ...]],
         workers: Sequence[int], budgets: Sequence[float | None], retries: Sequence[int] = (0,),
         clamps: Sequence[tuple[float, float] | None] = (None,), banking: Sequence[bool] = (False,)) -> list[Setting]:
    """Every combination, repetitions varying fastest (the order plots use).

    >>> [s.reps for s in grid([8, 16], ["majority"], [(), ("beta",)], [4], [None])]
    [8, 16, 8, 16]
    """
    return [Setting(n, v, s, w, b, r, c, k) for v in voters for s in stoppers for w in workers for b in budgets
            for r in retries for c in clamps for k in banking for n in reps]


@dataclass(frozen=True)
class Plan:
    """Everything a chunk of trials needs; plain data so it pickles to a worker process."""

    prepared: list[Prepared]
    settings: list[Setting]
    config: Config  # the runs' config: each setting is laid over it (``Setting.config``)
    problems: int  # K
    draw: Draw
    model: EngineTimeModel | None = None  # None: each repetition's recorded seconds
    scoring: Scoring = SCORINGS[DEFAULT_SCORING]
    machine_speed: float = 0.0  # a run's seconds are multiplied by a factor drawn uniformly in 1 ± this
    order: Order = "random"  # the first run's order: the gateway's shuffle, or the hard problems placed (stress)

    @property
    def seed_policy(self) -> SeedPolicy:
        """How a rule's second run draws (``sampling.seed_policy`` of the runs' config, as the predictor reads it)."""
        return self.config.sampling.seed_policy


@dataclass
class ChunkResult:
    """Per setting: one row per trial (a day: the scoring rule's runs); costs are means over the day's runs."""

    scores: np.ndarray  # (settings, trials) the scoring rule's score
    first: np.ndarray  # (settings, trials) problems right in the first run alone
    finished: np.ndarray  # (settings, trials) mean finished repetitions per problem
    launched: np.ndarray
    tokens: np.ndarray  # mean tokens per problem
    seconds: np.ndarray  # mean seconds per problem
    total_seconds: np.ndarray  # a whole run, the engine's start included
    cut: np.ndarray  # problems per run the budget cut (stopped at their deadline)
    bootstrapped: np.ndarray  # problems per run that launched repetitions drawn again (more launched than recorded)
    retried: np.ndarray  # problems per run that ran a second round
    run_right: np.ndarray  # (settings, trials, runs) problems right in each run
    run_cut: np.ndarray  # (settings, trials, runs) problems cut in each run
    run_seconds: np.ndarray  # (settings, trials, runs) each run's seconds, the engine's start included
    speeds: np.ndarray  # (trials, runs) each run's speed factor (its seconds multiplied by it)
    keys: np.ndarray  # (trials,) each trial's key: its draws can be made again from it (``used_repetitions``)
    policy_scores: np.ndarray  # (settings, trials, 2) the score under each seed policy (SEED_POLICIES' order)
    credit: np.ndarray  # (settings, trials, pools) int8: runs that answered the problem right; -1: not drawn
    stops: list[Counter[str]] = field(default_factory=list)  # per setting: stop reasons over problems

    ARRAYS = ("scores", "first", "finished", "launched", "tokens", "seconds", "total_seconds", "cut",
              "bootstrapped", "retried")
    TRIAL_AXIS = {"speeds": 0, "keys": 0}  # every other array holds its trials on axis 1


def draw_indices(rng: np.random.Generator, available: int, length: int, draw: Draw) -> np.ndarray:
    """Indices of the repetitions one trial uses for one problem, in launch order.

    ``subset`` draws without replacement: a random subset of independently sampled repetitions is itself a real
    run, so every statistic of N repetitions comes out unbiased. ``bootstrap`` draws with replacement: it works for
    any N but is biased where answers are rare (a problem with k answers among M recorded loses them all with
    probability (1 - k/M)^N, which averages above a real run's (1 - a)^N). ``auto`` is ``subset`` where the
    problem has ``length`` repetitions recorded and, where it has fewer, all of them topped up with replacement
    (``Draws``, which the trials use, draws the same way).

    >>> sorted(draw_indices(np.random.default_rng(0), 4, 4, "auto").tolist()), len(draw_indices(np.random.default_rng(0), 3, 5, "auto"))
    ([0, 1, 2, 3], 5)
    >>> draw_indices(np.random.default_rng(0), 3, 5, "subset")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.offline.sim.pools.SimulationError: a problem has 3 recorded repetitions; subset draws of 5 need at least ...
    """
    if available == 0:
        return np.zeros(0, dtype=int)
    if draw == "subset" or (draw == "auto" and length <= available):
        if length > available:
            raise SimulationError(f"a problem has {available} recorded repetitions; subset draws of {length} "
                                  "need at least that many (use --draw auto or bootstrap)")
        return rng.permutation(available)[:length]
    if draw == "auto":
        return np.concatenate([rng.permutation(available), rng.integers(0, available, size=length - available)])
    return rng.integers(0, available, size=length)


class Draws:
    """One trial's draws for one problem: a random order of its M recorded repetitions and a with-replacement
    sequence, each fixed by (trial key, problem); ``take(L)`` is the order's first L (``subset``, or ``auto`` where
    L <= M), the whole order topped up with the sequence's first L - M (``auto`` where L > M), or the sequence's
    first L (``bootstrap``).

    >>> d = Draws(7, 0, 3, "auto")
    >>> (sorted(d.take(3)[0].tolist()), d.take(3)[1]), (sorted(d.take(5)[0][:3].tolist()), d.take(5)[1])
    (([0, 1, 2], False), ([0, 1, 2], True))
    >>> bool((d.take(4)[0] == d.take(6)[0][:4]).all())  # prefixes: a longer draw extends a shorter one
    True
    """

    def __init__(self, key: int, problem: int, available: int, draw: Draw) -> None:
        self.key, self.problem, self.available, self.draw = key, problem, available, draw
        self._order: np.ndarray | None = None
        self._sequence: np.ndarray | None = None

    def take(self, length: int) -> tuple[np.ndarray, bool]:
        """The first ``length`` indices, and whether they were drawn with replacement."""
        m = self.available
        if m == 0:
            return np.zeros(0, dtype=int), False
        if self.draw == "subset" and length > m:
            raise SimulationError(f"a problem has {m} recorded repetitions; subset draws of {length} need at "
                                  "least that many (use --draw auto or bootstrap)")
        if self.draw != "bootstrap" and self._order is None:
            self._order = np.random.default_rng([self.key, self.problem, 0]).permutation(m)
        if self.draw != "bootstrap" and length <= m:
            return self._order[:length], False
        if self._sequence is None or len(self._sequence) < length:
            self._sequence = np.random.default_rng([self.key, self.problem, 1]).integers(0, m, size=max(length, 64))
        if self.draw == "bootstrap":
            return self._sequence[:length], True
        return np.concatenate([self._order, self._sequence[: length - m]]), True

    def order(self) -> np.ndarray:
        """The trial's random order of the M recorded repetitions."""
        if self._order is None:
            self._order = np.random.default_rng([self.key, self.problem, 0]).permutation(self.available)
        return self._order


class SecondDraws:
    """The second run's draws for one problem (a scoring rule of two runs): the recorded repetitions the first run
    left, positions L..2L of its order, where the problem has 2L recorded (two disjoint random subsets of
    independent repetitions are two independent real runs); elsewhere a draw of its own, from ``key``.

    >>> first = Draws(7, 0, 6, "auto")
    >>> again = SecondDraws(first, 8)
    >>> a, b = first.take(3)[0], again.take(3)[0]
    >>> sorted(a.tolist() + b.tolist()), again.take(3)[1], len(again.take(4)[0])
    ([0, 1, 2, 3, 4, 5], False, 4)
    """

    def __init__(self, first: Draws, key: int) -> None:
        self.first = first
        self.available, self.draw = first.available, first.draw
        self.fresh = Draws(key, first.problem, first.available, first.draw)

    def take(self, length: int) -> tuple[np.ndarray, bool]:
        if self.draw != "bootstrap" and 0 < 2 * length <= self.available:
            return self.first.order()[length:2 * length], False
        return self.fresh.take(length)


class ProblemGrader:
    """Correctness of an answer per problem, remembered (``solver.core.grading.Grader``: math-verify can take
    milliseconds per call)."""

    def __init__(self, rules: AnswerConfig) -> None:
        self._grade = Grader(rules)

    def __call__(self, problem: Problem, answer: str) -> bool:
        return problem.answer is not None and self._grade(answer, problem.answer)


class Timelines:
    """First-round timelines, remembered per (problem, W, repetitions in launch order); where W covers every
    repetition they all start at once, so any order of the same repetitions shares one."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._memo: dict[tuple[int, int, tuple[int, ...]], Timeline] = {}

    def rounds(self, p: int, idx: np.ndarray, reps: int, workers: int, speed: float = 1.0) -> Rounds:
        """The timelines of one draw, every second multiplied by the run's ``speed`` factor: the first round's
        remembered, a second round's made when it comes."""
        prep, model = self.plan.prepared[p], self.plan.model

        def timeline(first: int, start: float) -> Timeline:
            chosen = idx[first:] if first else idx[:reps]
            if model is None:
                return fixed_timeline(prep.seconds[chosen] * speed, workers, prep.tokens[chosen], start)
            if first:
                if speed == 1.0:
                    return engine_timeline([prep.plans[i] for i in chosen], workers, model, start)
                return scaled(engine_timeline([prep.plans[i] for i in chosen], workers, model), speed, start)
            found = self.first(p, chosen, workers)
            return found if speed == 1.0 else scaled(found, speed, 0.0)

        return timeline

    def first(self, p: int, chosen: np.ndarray, workers: int) -> Timeline:
        assert self.plan.model is not None
        together = workers >= len(chosen)
        order = np.argsort(chosen, kind="stable") if together else np.arange(len(chosen))
        key = (p, min(workers, len(chosen)) if together else workers, tuple(chosen[order].tolist()))
        found = self._memo.get(key)
        if found is None:
            prep = self.plan.prepared[p]
            found = self._memo[key] = engine_timeline([prep.plans[i] for i in key[2]], workers, self.plan.model)
        if not together:
            return found
        back = np.empty(len(order), dtype=int)
        back[order] = np.arange(len(order))  # draw position -> position in the sorted key
        return Timeline(tuple(found.starts[j] for j in back), tuple(found.ends[j] for j in back),
                        tuple(found.tokens[j] for j in back))


def scaled(timeline: Timeline, speed: float, start: float) -> Timeline:
    """``timeline`` (made from 0) with every second multiplied by ``speed``, moved to ``start``.

    >>> scaled(Timeline((0.0, 1.0), (1.0, 3.0), (5.0, 5.0)), 1.1, 10.0)
    Timeline(starts=(10.0, 11.1), ends=(11.1, 13.3), tokens=(5.0, 5.0))
    """
    return Timeline(tuple(start + speed * s for s in timeline.starts), tuple(start + speed * e for e in timeline.ends),
                    timeline.tokens)


def speed_factor(key: int, run: int, jitter: float) -> float:
    """A run's speed factor: its seconds are multiplied by a number drawn uniformly in 1 ± ``jitter`` (the
    machine-speed stress test; a shape is assumed, none is known), fixed by the
    trial's key and the run, so every setting meets the same machine.

    >>> speed_factor(5, 0, 0.0), 0.9 <= speed_factor(5, 0, 0.1) <= 1.1
    (1.0, True)
    >>> speed_factor(5, 0, 0.1) == speed_factor(5, 1, 0.1)  # each run its own machine
    False
    """
    if jitter == 0:
        return 1.0
    return 1.0 + jitter * float(np.random.default_rng([key, SPEED, run]).uniform(-1.0, 1.0))


@dataclass(frozen=True)
class RunDraws:
    """One run of a day: the problems (pool indices) in the order played, each one's draws, the run's speed."""

    order: np.ndarray
    draws: list[Draws | SecondDraws]
    speed: float


def arrange(chosen: np.ndarray, accuracy: np.ndarray, order: Order) -> np.ndarray:
    """The day's problems (``chosen``, in random order) in the run's ``order``, by the recordings' ``accuracy``
    per pool (low = hard); ties keep their random order.

    >>> acc = np.array([0.9, 0.1, 0.5, 0.3, 0.7])  # pools 1, 3, 2, 4, 0 from hardest to easiest
    >>> [arrange(np.arange(5), acc, o).tolist() for o in ("hard-first", "hard-last", "hard-middle")]
    [[1, 3, 2, 4, 0], [0, 4, 2, 3, 1], [0, 2, 1, 3, 4]]
    >>> arrange(np.array([3, 0]), acc, "random").tolist()
    [3, 0]
    """
    if order == "random":
        return chosen
    hardest_first = chosen[np.argsort(accuracy[chosen], kind="stable")]
    if order == "hard-first":
        return hardest_first
    easiest_first = hardest_first[::-1]
    if order == "hard-last":
        return easiest_first
    return np.concatenate([easiest_first[0::2], easiest_first[1::2][::-1]])  # a tent: the hardest in the middle


def day_draws(plan: Plan, order: np.ndarray, key: int, policy: SeedPolicy) -> list[RunDraws]:
    """Per run of the scoring rule: the problems in the order played, their draws and the run's speed factor. The
    first run is ``order`` (already arranged) with the trial's key. A second run plays the same problems in the
    first run's order where the rule fixes it (AIMO3's private set) or a stress order places them, else in a new
    order; with the first run's draws under the ``fixed`` seed policy, fresh ones under ``per-run``."""
    draws = [Draws(key, int(p), len(plan.prepared[p].seconds), plan.draw) for p in order]
    runs = [RunDraws(order, list(draws), speed_factor(key, 0, plan.machine_speed))]
    if plan.scoring.runs == 2:
        shuffle, key2 = second_run(key, len(order))
        again = np.arange(len(order)) if plan.scoring.order == "fixed" or plan.order != "random" else shuffle
        second: list[Draws | SecondDraws] = [draws[i] if policy == "fixed" else SecondDraws(draws[i], key2)
                                             for i in again]
        runs.append(RunDraws(order[again], second, speed_factor(key, 1, plan.machine_speed)))
    return runs


def replays(run: RunDraws, first: RunDraws) -> bool:
    """Whether ``run`` plays the very draws of ``first``, in its order and at its speed: its day is the same.

    >>> d = [Draws(1, 0, 4, "auto")]
    >>> replays(RunDraws(np.array([0]), list(d), 1.0), RunDraws(np.array([0]), d, 1.0))
    True
    >>> replays(RunDraws(np.array([0]), [SecondDraws(d[0], 2)], 1.0), RunDraws(np.array([0]), d, 1.0))
    False
    """
    return (run.speed == first.speed and np.array_equal(run.order, first.order)
            and all(a is b for a, b in zip(run.draws, first.draws)))


def second_run(key: int, problems: int) -> tuple[np.ndarray, int]:
    """A second run's order where the rule shuffles each run (a permutation of the first run's positions) and its
    fresh draws' key, from the trial's."""
    again = np.random.default_rng([key, SECOND_RUN])
    return again.permutation(problems), int(again.integers(2**62))


def recorded_accuracy(plan: Plan) -> np.ndarray:
    """Per pool, the share of its recorded repetitions whose answer is right (by the first setting's voter's
    ballots; none recorded: 0): how hard the recordings make each problem, for the stress orders."""
    grade = ProblemGrader(plan.config.answers)
    voter = plan.settings[0].voter
    out = np.zeros(len(plan.prepared))
    for p, prep in enumerate(plan.prepared):
        ballots = prep.ballots[voter]
        if ballots:
            out[p] = sum(b is not None and grade(prep.problem, b.answer) for b in ballots) / len(ballots)
    return out


def distinct_runs(plan: Plan) -> int:
    """The runs of a day that draw apart: the rule's runs under per-run seeds; one under fixed seeds, whose second
    run replays the first's draws (so a day draws a problem's repetitions once, not twice)."""
    return plan.scoring.runs if plan.seed_policy == "per-run" else 1


def used_repetitions(plan: Plan, keys: np.ndarray, drawn: np.ndarray, lengths: Sequence[int]) -> dict[int, np.ndarray]:
    """Per draw length L: which recorded repetitions the days' draws of L use, every run's (under the plan's seed
    policy), made again from the trials' keys, as sorted codes (trial × P + problem) × M + repetition (P problems, M
    the most recorded); ``drawn`` (trials, P) says which problems each trial played."""
    pools = len(plan.prepared)
    width = max(1, max(len(p.seconds) for p in plan.prepared))
    found: dict[int, list[int]] = {length: [] for length in lengths}
    fresh = distinct_runs(plan) == 2
    for t, key in enumerate(keys):
        key2 = second_run(int(key), plan.problems)[1] if fresh else 0
        for p in np.flatnonzero(drawn[t]):
            available = len(plan.prepared[p].seconds)
            first = Draws(int(key), int(p), available, plan.draw)
            second = SecondDraws(first, key2) if fresh else None
            base = (t * pools + int(p)) * width
            for length in lengths:
                used = set(first.take(length)[0].tolist())
                if second is not None:
                    used |= set(second.take(length)[0].tolist())
                found[length].extend(base + i for i in used)
    return {length: np.array(sorted(codes), dtype=np.int64) for length, codes in found.items()}


def run_chunk(plan: Plan, trials: int, seed: Sequence[int]) -> ChunkResult:
    """``trials`` leaderboard days of every setting on shared draws from ``np.random.default_rng(seed)``: each day
    the scoring rule's runs, each run a simulated day (``simulated_day``) of the setting's config over the trial's
    problems; under a rule of two runs the second run is also played under the other seed policy, for its score."""
    rng = np.random.default_rng(list(seed))
    s_count, runs, pools = len(plan.settings), plan.scoring.runs, len(plan.prepared)
    shape = (s_count, trials)
    out = ChunkResult(*(np.zeros(shape) for _ in ChunkResult.ARRAYS), run_right=np.zeros((s_count, trials, runs)),
                      run_cut=np.zeros((s_count, trials, runs)), run_seconds=np.zeros((s_count, trials, runs)),
                      speeds=np.ones((trials, runs)), keys=np.zeros(trials, dtype=np.int64),
                      policy_scores=np.zeros((s_count, trials, len(SEED_POLICIES))),
                      credit=np.full((s_count, trials, pools), -1, dtype=np.int8),
                      stops=[Counter() for _ in range(s_count)])
    grade = ProblemGrader(plan.config.answers)
    configs = [s.config(plan.config, plan.problems) for s in plan.settings]
    rules: dict[tuple[str, tuple[str, ...], int, int], Rules] = {}
    for s, config in zip(plan.settings, configs):
        if s.rules_key not in rules:
            rules[s.rules_key] = Rules.of(config)
    timelines = Timelines(plan)
    start_s = plan.model.start_s if plan.model is not None else 0.0
    accuracy = recorded_accuracy(plan) if plan.order != "random" else np.zeros(pools)
    policy = plan.seed_policy
    other: SeedPolicy = "per-run" if policy == "fixed" else "fixed"
    k = plan.problems
    for t in range(trials):
        order = arrange(rng.permutation(pools)[:k], accuracy, plan.order)
        key = int(rng.integers(2**62))
        days = day_draws(plan, order, key, policy)
        alternate = day_draws(plan, order, key, other)[1] if runs == 2 else None
        out.keys[t] = key
        out.speeds[t] = [run.speed for run in days]
        for s_index, (setting, config) in enumerate(zip(plan.settings, configs)):

            def played(run: RunDraws) -> tuple[SimulatedDay, list[bool]]:
                picks = [draw.take(setting.draws)[0] for draw in run.draws]
                day = simulated_day(config, (ProblemDraw([plan.prepared[p].ballots[setting.voter][i] for i in idx],
                                                         timelines.rounds(int(p), idx, setting.reps, setting.workers,
                                                                          run.speed))
                                             for p, idx in zip(run.order, picks)),
                                    rules=rules[setting.rules_key], start_s=start_s * run.speed)
                return day, [grade(plan.prepared[p].problem, slot.played.answer)
                             for p, slot in zip(run.order, day.problems)]

            right_runs = np.zeros(pools, dtype=np.int8)
            fin, lau, tok, sec, total, cut, boot, retried = 0, 0, 0.0, 0.0, 0.0, 0, 0, 0
            first_right: list[bool] = []
            for r, run in enumerate(days):
                # A second run on the first run's draws, order and speed (the fixed seed policy) replays it exactly.
                day, rights = (day, rights) if r and replays(run, days[0]) else played(run)
                first_right = first_right or rights
                right_runs[run.order] += np.array(rights, dtype=np.int8)
                cut_here = 0
                for draw, slot in zip(run.draws, day.problems):
                    result = slot.played
                    fin += result.finished
                    lau += result.launched
                    tok += result.tokens
                    sec += result.seconds
                    cut_here += result.stopped_by == "deadline"
                    boot += result.launched > draw.available or draw.draw == "bootstrap"  # a drawn-again one ran
                    retried += result.launched > setting.reps
                    out.stops[s_index][result.stopped_by] += 1
                total += day.seconds
                cut += cut_here
                out.run_right[s_index, t, r], out.run_cut[s_index, t, r] = sum(rights), cut_here
                out.run_seconds[s_index, t, r] = day.seconds
            out.credit[s_index, t, order] = right_runs[order]
            score = float(plan.scoring.credit_of(right_runs[order]).sum())
            out.policy_scores[s_index, t, SEED_POLICIES.index(policy)] = score
            if alternate is None:
                out.policy_scores[s_index, t, SEED_POLICIES.index(other)] = score
            else:
                # The same draws in the same order at the same speed replay the first run exactly: no need to play.
                same = (other == "fixed" and np.array_equal(alternate.order, order)
                        and alternate.speed == days[0].speed)
                rights = first_right if same else played(alternate)[1]
                again = np.zeros(pools, dtype=np.int8)
                again[order] += np.array(first_right, dtype=np.int8)
                again[alternate.order] += np.array(rights, dtype=np.int8)
                out.policy_scores[s_index, t, SEED_POLICIES.index(other)] = float(
                    plan.scoring.credit_of(again[order]).sum())
            n = k * runs
            row = (score, out.run_right[s_index, t, 0], fin / n, lau / n, tok / n, sec / n, total / runs, cut / runs,
                   boot / runs, retried / runs)
            for name, value in zip(ChunkResult.ARRAYS, row):
                getattr(out, name)[s_index, t] = value
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
    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts], axis=ChunkResult.TRIAL_AXIS.get(name, 1))

    return ChunkResult(*(joined(name) for name in ChunkResult.ARRAYS), run_right=joined("run_right"),
                       run_cut=joined("run_cut"), run_seconds=joined("run_seconds"), speeds=joined("speeds"),
                       keys=joined("keys"), policy_scores=joined("policy_scores"), credit=joined("credit"),
                       stops=[sum((p.stops[i] for p in parts), Counter()) for i in range(len(plan.settings))])

"""Per setting, what the trials say: expected score, spread, quantiles, P(score >= X) and the line, the cost, how
the machine-speed stress test moves cuts and score, and the setting against the best one (``solver.offline.sim.separation``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from solver.offline.sim.scoring import DEFAULT_LINE, Scoring, at_or_above
from solver.offline.sim.separation import Difference, difference, family_z
from solver.offline.sim.draws import used_repetitions
from solver.offline.sim.setting import SEED_POLICIES, Plan, Setting, distinct_runs
from solver.offline.sim.trials import ChunkResult

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class RunShare:
    """The mean of a setting's runs whose speed factor fell in one part of its range."""

    runs: int  # runs in that part, over trials
    right: float  # problems right per run
    cut: float  # problems cut per run
    seconds: float  # the run's seconds


@dataclass(frozen=True)
class Jitter:
    """How a setting's runs fare on fast and slow machines: the runs whose factor (their seconds multiplied by
    it, drawn in 1 ± ``jitter``) lies in the lowest third of its range, and those in the highest third."""

    jitter: float
    fast: RunShare
    slow: RunShare


@dataclass(frozen=True)
class SeedRow:
    """A setting's score under one seed policy (a rule of two runs): ``fixed``, the second run replaying the
    first's draws, or ``per-run``, fresh draws."""

    policy: str
    mean: float
    std: float
    low: float  # 5 %
    high: float  # 95 %
    p_line: float  # P(score >= line)

    @classmethod
    def of(cls, policy: str, scores: np.ndarray, line: float) -> SeedRow:
        """
        >>> SeedRow.of("fixed", np.array([40.0, 41.0, 47.0, 48.0]), 47).p_line
        0.5
        """
        return cls(policy, float(scores.mean()), float(scores.std(ddof=1)) if len(scores) > 1 else 0.0,
                   float(np.quantile(scores, 0.05)), float(np.quantile(scores, 0.95)), at_or_above(scores, line))


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
    scores: np.ndarray  # every trial's score (the scoring rule's)
    right_share: np.ndarray  # per recorded problem (pools' order): its mean credit over the trials that drew it
    # (nan: never drawn)
    cut: float = 0.0  # mean problems per run the budget cut (stopped at their deadline)
    retried: float = 0.0  # mean problems per run that ran a second round
    bootstrapped: float = 0.0  # mean problems per run that launched repetitions drawn again (more than recorded)
    bootstrap_bias: float | None = None  # estimated score those draws add (problems per run; None: not estimated)
    total_std: float = 0.0  # spread of the whole run's seconds over trials
    first: np.ndarray | None = None  # the first run's problems right per trial (None: as ``scores``)
    runs: int = 1  # runs of the scoring rule per day
    line: float = DEFAULT_LINE
    jitter: Jitter | None = None
    vs_best: Difference | None = None  # this setting minus the best by mean (None: it is the best)
    seed_rows: tuple[SeedRow, ...] = ()  # a rule of two runs: the score under each seed policy

    @property
    def first_scores(self) -> np.ndarray:
        """Problems right in one run alone: AIMO3's public leaderboard's score."""
        return self.scores if self.first is None else self.first

    @property
    def p_line(self) -> float:
        """P(score >= line) under the scoring rule."""
        return at_or_above(self.scores, self.line)

    @property
    def first_p_line(self) -> float:
        return at_or_above(self.first_scores, self.line)

    @property
    def beyond_data(self) -> bool:
        """Whether most of a day's problems launch more repetitions than were recorded for them (each topped up
        by drawing its recorded ones again): the setting's row then says more about the method than the model.

        >>> from types import SimpleNamespace
        >>> Summary.beyond_data.fget(SimpleNamespace(bootstrapped=45.0, problems=50))
        True
        """
        return self.bootstrapped > self.problems / 2


def summarise(settings: Sequence[Setting], result: ChunkResult, problems: int, thresholds: Sequence[int],
              biases: Sequence[float | None] | None = None, scoring: Scoring | None = None,
              line: float = DEFAULT_LINE, jitter: float = 0.0) -> list[Summary]:
    """One summary per setting (set against the best by :func:`against_best`)."""
    runs = 1 if scoring is None else scoring.runs
    credit = credit_values(result, scoring)
    out = []
    for i, setting in enumerate(settings):
        scores = result.scores[i]
        stops = result.stops[i]
        total = sum(stops.values()) or 1
        drawn = (~np.isnan(credit[i])).sum(axis=0)
        share = np.divide(np.nansum(credit[i], axis=0), drawn, out=np.full(len(drawn), np.nan), where=drawn > 0)
        out.append(Summary(
            setting, problems, len(scores), float(scores.mean()), float(scores.std(ddof=1)) if len(scores) > 1
            else 0.0, {q: float(np.quantile(scores, q)) for q in QUANTILES},
            {x: float((scores >= x).mean()) for x in thresholds}, float(result.finished[i].mean()),
            float(result.launched[i].mean()), float(result.tokens[i].mean()), float(result.seconds[i].mean()),
            float(result.total_seconds[i].mean()), {k: v / total for k, v in stops.most_common()}, scores,
            share, float(result.cut[i].mean()), float(result.retried[i].mean()),
            float(result.bootstrapped[i].mean()), None if biases is None else biases[i],
            float(result.total_seconds[i].std()), None if runs == 1 else result.first[i], runs, line,
            jitter_of(result, i, jitter),
            seed_rows=() if runs == 1 else tuple(SeedRow.of(policy, result.policy_scores[i, :, j], line)
                                                 for j, policy in enumerate(SEED_POLICIES))))
    return out


def credit_values(result: ChunkResult, scoring: Scoring | None) -> np.ndarray:
    """(settings, trials, pools) each problem's credit per trial; nan where the trial did not draw it."""
    counts = result.credit.astype(int)
    table = np.asarray((0.0, 1.0) if scoring is None else scoring.credit, dtype=float)
    return np.where(counts < 0, np.nan, table[np.clip(counts, 0, None)])


def best_index(summaries: Sequence[Summary]) -> int:
    """The setting with the highest mean (the first of equals)."""
    return max(range(len(summaries)), key=lambda i: (summaries[i].mean, -i))


class Comparer:
    """Differences between the plan's settings on the common draws (``solver.offline.sim.separation``): the
    credits, the days' scores, and which recorded repetitions each day's draws used, made again from the trials'
    keys once per draw length."""

    def __init__(self, plan: Plan, result: ChunkResult) -> None:
        self.plan, self.result = plan, result
        self.credit = credit_values(result, plan.scoring)
        self.recorded = np.array([len(p.seconds) for p in plan.prepared])
        self.width = max(1, int(self.recorded.max(initial=0)))
        self._codes = used_repetitions(plan, result.keys, result.credit[0] >= 0,
                                       sorted({s.draws for s in plan.settings}))

    def __call__(self, a: int, b: int, family: int = 1) -> Difference:
        """``a`` minus ``b``, its interval one of ``family`` made together (Bonferroni)."""
        sa, sb = self.plan.settings[a], self.plan.settings[b]
        codes = np.union1d(self._codes[sa.draws], self._codes[sb.draws])
        trials, pools = self.credit.shape[1:]
        used = np.zeros(trials * pools * self.width, dtype=bool)
        used[codes] = True
        drawn = distinct_runs(self.plan) * max(sa.draws, sb.draws)  # fixed seeds: the second run's are the first's
        return difference(a, b, self.credit[a] - self.credit[b], used.reshape(trials, pools, self.width),
                          self.result.scores[a], self.result.scores[b], self.recorded, drawn, self.plan.problems,
                          family_z(family), family)


def against_best(summaries: Sequence[Summary], compare: Comparer) -> list[Summary]:
    """Each setting but the best (by mean) with its difference from the best: S − 1 comparisons against a best the
    same trials chose, so their intervals are made to hold together (``family_z``)."""
    if not summaries:
        return []
    best = best_index(summaries)
    family = len(summaries) - 1
    return [s if i == best else replace(s, vs_best=compare(i, best, family)) for i, s in enumerate(summaries)]


def jitter_of(result: ChunkResult, i: int, jitter: float) -> Jitter | None:
    """The fast and slow thirds of setting ``i``'s runs (None without jitter).

    >>> r = ChunkResult(*(np.zeros((1, 3)) for _ in ChunkResult.ARRAYS), run_right=np.array([[[40], [42], [44]]]),
    ...                 run_cut=np.array([[[3], [1], [0]]]), run_seconds=np.array([[[110], [100], [90]]]),
    ...                 speeds=np.array([[1.1], [1.0], [0.9]]), keys=np.zeros(3, dtype=np.int64),
    ...                 policy_scores=np.zeros((1, 3, 2)), credit=np.zeros((1, 3, 1), dtype=np.int8))
    >>> j = jitter_of(r, 0, 0.1)
    >>> j.fast, j.slow
    (RunShare(runs=1, right=44.0, cut=0.0, seconds=90.0), RunShare(runs=1, right=40.0, cut=3.0, seconds=110.0))
    """
    if jitter <= 0:
        return None
    speeds = result.speeds.ravel()
    right, cut, seconds = (getattr(result, name)[i].ravel() for name in ("run_right", "run_cut", "run_seconds"))

    def part(chosen: np.ndarray) -> RunShare:
        if not chosen.any():
            return RunShare(0, float("nan"), float("nan"), float("nan"))
        return RunShare(int(chosen.sum()), float(right[chosen].mean()), float(cut[chosen].mean()),
                        float(seconds[chosen].mean()))

    return Jitter(jitter, part(speeds <= 1 - jitter / 3), part(speeds >= 1 + jitter / 3))


def default_thresholds(result: ChunkResult) -> list[int]:
    """Scores worth asking P(score >= X) about: the quartiles of all settings' scores together."""
    pooled = result.scores.ravel()
    return sorted({int(round(float(np.quantile(pooled, q)))) for q in (0.25, 0.5, 0.75)})


def score_band(scores: np.ndarray, k: int) -> tuple[float, float, float]:
    """Mean accuracy and its 5–95 % leaderboard band for one setting.

    >>> score_band(np.array([8.0, 9.0, 10.0]), 10)
    (0.9, 0.81, 0.99)
    """
    lo, hi = np.quantile(scores, [0.05, 0.95])
    return round(float(scores.mean()) / k, 6), round(float(lo) / k, 6), round(float(hi) / k, 6)

"""The interval checked against a known truth, on the simulator's own path: synthetic recordings whose true expected
difference is known in closed form, played by ``run_trials`` (its draws; a second run's by ``SecondDraws`` under
per-run seeds), the difference made as every report makes it (``summary.Comparer``: ``used_repetitions``, then
``separation.difference``), and counted as covering the truth or not, case after case.

A case: P problems, each with a true accuracy q (0.2 … 0.9 evenly); a recording draws m repetitions per problem, each
right ("1") with probability q, else the one wrong answer ("2"). Setting A is the majority of n (n odd, all at once,
no stopper, no budget), setting B one repetition; every day plays every problem (K = P). A run draws without
replacement (m >= n: nothing topped up), so a run is a random subset of independent repetitions, and its expected
credit difference per problem is P(Binomial(n, q) > n / 2) − q whatever the rule and seed policy (a rule of two runs
scores a problem the mean of its two runs' credits: the same expectation); the day's truth is its sum.

A path: which variance the interval is made of, set by m against the repetitions the pair draws from a problem per
day (``drawn``: n, or 2n under a rule of two runs with per-run seeds; under fixed seeds the second run replays the
first's draws). ``unbiased``: m >= 2 drawn, the pairs of trials
(``pair_variance``); ``jackknife``: drawn < m < 2 drawn, the jackknife's upper bound; ``one day``: m <= drawn, one
day's variance. Per design: the share of the cases covering the truth, with its standard error at the nominal level
(√(0.95 · 0.05 / cases)), the mean half-width, the factor the half-widths would need to cover 95 % of the cases, and
the ratio of the estimated variance to the estimates' real variance across recordings.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import binom

from solver.config import Config
from solver.offline.sim.pools import Prepared
from solver.offline.sim.scoring import SCORINGS
from solver.offline.sim.separation import Z95
from solver.offline.sim.summary import Comparer
from solver.offline.sim.setting import Plan, SeedPolicy, Setting
from solver.offline.sim.trials import run_trials
from solver.types import Ballot, Problem

VariancePath = Literal["unbiased", "jackknife", "one day"]
PATHS: tuple[VariancePath, ...] = ("unbiased", "jackknife", "one day")
NOMINAL = 0.95
# Cases per design of the full check: the pairs' path carries it, 5,300 per rule (a standard error of 0.3 points at
# 95 %; the private rule's split between its two seed policies); each bound's path, an upper bound, 300.
UNBIASED_CASES, BOUNDED_CASES = 5300, 300
COMBOS: tuple[tuple[str, SeedPolicy], ...] = (("aimo3-public", "fixed"), ("aimo3-private", "fixed"),
                                            ("aimo3-private", "per-run"))


@dataclass(frozen=True)
class Design:
    """One cell of the check: a scoring rule, the second run's seed policy, and the variance path."""

    rule: str  # a name of ``SCORINGS``: aimo3-public (one run) or aimo3-private (two)
    policy: SeedPolicy
    path: VariancePath
    problems: int = 8  # P = K
    n: int = 3  # A: the majority of n; B: one
    trials: int = 60

    @property
    def drawn(self) -> int:
        """The repetitions the pair draws from a problem per day, as the report counts them (``Comparer``): both
        runs' under a rule of two runs with per-run seeds, one run's otherwise."""
        return (SCORINGS[self.rule].runs if self.policy == "per-run" else 1) * self.n

    @property
    def recorded(self) -> int:
        """m, the recorded repetitions per problem that put every problem on the design's path.

        >>> [Design("aimo3-private", "per-run", p).recorded for p in PATHS]
        [24, 8, 5]
        >>> [Design("aimo3-public", "fixed", p).recorded for p in PATHS]
        [24, 5, 3]
        """
        if self.path == "unbiased":
            return 24  # 2 drawn at most, and enough disjoint pairs of draws among the trials
        if self.path == "jackknife":
            return self.drawn + 2
        return max(self.n, self.drawn - 1)

    @property
    def label(self) -> str:
        return f"{self.rule} {self.policy} {self.path}"


@dataclass(frozen=True)
class CoverageCheck:
    """What ``cases`` synthetic recordings of one truth say of the interval on one design."""

    design: Design
    cases: int
    truth: float  # the true expected difference A − B of a day
    covered: int  # cases whose interval holds the truth
    half_width: float  # mean half-width of the intervals
    needed: float  # the factor the half-widths would need to cover 95 % of the cases: the 95th percentile of
    # |estimate − truth| / half-width (1 is right; above 1, too narrow)
    width_ratio: float  # √(mean estimated variance / variance of the estimates across cases): 1 is right
    conservative: float  # mean problems per case whose variance is an upper bound

    @property
    def coverage(self) -> float:
        return self.covered / self.cases

    @property
    def se(self) -> float:
        """The coverage's standard error, at the nominal level (what the check is held to).

        >>> round(CoverageCheck(Design("aimo3-public", "fixed", "unbiased"), 5300, 0.0, 5035, 1, 1, 1, 0).se, 4)
        0.003
        """
        return math.sqrt(NOMINAL * (1 - NOMINAL) / self.cases)


def truth(accuracy: np.ndarray, n: int) -> float:
    """The day's true expected difference: majority of n against one, summed over the problems.

    >>> round(truth(np.array([0.5, 0.8]), 3), 4)  # 0.5 − 0.5 + 0.896 − 0.8
    0.096
    """
    return float((binom.sf(n // 2, n, accuracy) - accuracy).sum())


def recording(rng: np.random.Generator, accuracy: np.ndarray, recorded: int) -> list[Prepared]:
    """One synthetic recording: per problem ``recorded`` repetitions, each right with its accuracy, as the trials
    read a run (the majority's ballots; a second each, which no setting here times)."""
    right = rng.random((len(accuracy), recorded)) < accuracy[:, None]
    ones = np.ones(recorded)
    return [Prepared(Problem(f"p{p}", "", "1"), {"majority": tuple(Ballot("1" if r else "2") for r in row)}, ones,
                     ones) for p, row in enumerate(right)]


@functools.cache
def runs_config(policy: SeedPolicy) -> Config:
    """The default config under ``policy`` (made once: parsing a config takes milliseconds)."""
    return Config().replace({"sampling.seed_policy": policy})


def one_case(design: Design, seed: Sequence[int]) -> tuple[float, float, float, int]:
    """One recording, its trials and its interval, from ``np.random.default_rng(seed)``: the estimate, the
    half-width, the recordings' variance estimate, and the problems bounded conservatively."""
    rng = np.random.default_rng(list(seed))
    accuracy = np.linspace(0.2, 0.9, design.problems)
    config = runs_config(design.policy)
    settings = [Setting(design.n, "majority", (), design.n), Setting(1, "majority", (), 1)]
    plan = Plan(recording(rng, accuracy, design.recorded), settings, config, design.problems, "auto",
                scoring=SCORINGS[design.rule])
    d = Comparer(plan, run_trials(plan, design.trials, int(rng.integers(2**31))))(0, 1)
    return d.mean, d.half, d.data_var, d.conservative


def case_seed(design: Design, seed: int, case: int) -> list[int]:
    """The seed of ``design``'s case number ``case`` under the check's ``seed``: (seed, the design, case), so the
    same whichever process plays it.

    >>> case_seed(Design("aimo3-private", "per-run", "jackknife"), 0, 7)
    [0, 1, 2, True, 7]
    """
    return [seed, PATHS.index(design.path), SCORINGS[design.rule].runs, design.policy == "per-run", case]


def case_rows(design: Design, cases: int, seed: int = 0, jobs: int = 1, first: int = 0) -> np.ndarray:
    """(cases, 4) per case the estimate, the half-width, the recordings' variance estimate and the problems bounded;
    cases ``first`` … ``first + cases − 1``, each from its ``case_seed``, so the same for any ``jobs`` and any part of
    a check played alone."""
    from joblib import Parallel, delayed

    seeds = [case_seed(design, seed, i) for i in range(first, first + cases)]
    if jobs == 1:
        rows = [one_case(design, s) for s in seeds]
    else:
        rows = Parallel(n_jobs=jobs, batch_size=16)(delayed(one_case)(design, s) for s in seeds)
    return np.array(rows, dtype=float).reshape(cases, 4)


def checked(design: Design, rows: np.ndarray) -> CoverageCheck:
    """What the cases' ``rows`` (``case_rows``) say of the interval."""
    cases = len(rows)
    true = truth(np.linspace(0.2, 0.9, design.problems), design.n)
    means, halves, data, bounded = rows.T
    noise = (halves / Z95) ** 2 - data  # the trials' own part, which the estimates' spread holds too
    ratio = float(np.sqrt((data + noise).mean() / means.var(ddof=1))) if cases > 1 else math.nan
    errors = np.abs(means - true)
    needed = float(np.quantile(np.divide(errors, halves, out=np.full(cases, np.inf), where=halves > 0), NOMINAL))
    return CoverageCheck(design, cases, true, int((errors <= halves).sum()), float(halves.mean()), needed, ratio,
                         float(bounded.mean()))


CHUNK = 25  # cases per chunk of the full check's record (``chunks``): about 1.5 s of play each, so a sample of
# them is replayed in seconds and every case's outcome counts in one of them


@dataclass(frozen=True)
class Chunk:
    """``CHUNK`` consecutive cases of a design (the last may hold fewer), summed: what replaying them must give."""

    covered: int  # cases whose interval holds the truth
    estimates: float  # sum of the estimates
    half_widths: float  # sum of the half-widths
    variances: float  # sum of the recordings' variance estimates
    bounded: int  # problems whose variance is an upper bound, over the cases


def chunks(design: Design, rows: np.ndarray) -> list[Chunk]:
    """The cases' ``rows`` (``case_rows`` from case 0) in chunks of ``CHUNK``: chunk j holds cases j·CHUNK onwards.

    >>> rows = np.array([[0.0, 1.0, 0.2, 1], [2.0, 1.0, 0.2, 0]] * 13)  # 26 cases; truth 0.072: the first kind covers
    >>> [(c.covered, c.bounded) for c in chunks(Design("aimo3-public", "fixed", "unbiased"), rows)]
    [(13, 13), (0, 0)]
    """
    true = truth(np.linspace(0.2, 0.9, design.problems), design.n)
    out = []
    for start in range(0, len(rows), CHUNK):
        means, halves, data, bounded = rows[start:start + CHUNK].T
        out.append(Chunk(int((np.abs(means - true) <= halves).sum()), float(means.sum()), float(halves.sum()),
                         float(data.sum()), int(round(bounded.sum()))))
    return out


def coverage_check(design: Design, cases: int, seed: int = 0, jobs: int = 1) -> CoverageCheck:
    """``cases`` recordings of one truth on ``design``; the same result for any ``jobs``.

    >>> c = coverage_check(Design("aimo3-private", "per-run", "unbiased", problems=2, trials=30), cases=3)
    >>> c.cases, 0 <= c.covered <= 3
    (3, True)
    """
    return checked(design, case_rows(design, cases, seed, jobs))


def cells(scale: float = 1.0) -> list[tuple[Design, int]]:
    """Every design of the full check with its cases (``scale`` times the full count, at least 2).

    >>> [(d.label, n) for d, n in cells()][:4]  # doctest: +NORMALIZE_WHITESPACE
    [('aimo3-public fixed unbiased', 5300), ('aimo3-public fixed jackknife', 300),
     ('aimo3-public fixed one day', 300), ('aimo3-private fixed unbiased', 2650)]
    """
    out = []
    for rule, policy in COMBOS:
        share = sum(r == rule for r, _ in COMBOS)
        for path in PATHS:
            full = UNBIASED_CASES // share if path == "unbiased" else BOUNDED_CASES
            out.append((Design(rule, policy, path), max(2, round(full * scale))))
    return out


def pooled(checks: Sequence[CoverageCheck]) -> tuple[float, float, int]:
    """The coverage over several checks' cases together, its standard error at the nominal level, and the cases.

    >>> d = Design("aimo3-public", "fixed", "unbiased")
    >>> pooled([CoverageCheck(d, 100, 0, 90, 1, 1, 1, 0), CoverageCheck(d, 300, 0, 290, 1, 1, 1, 0)])[0]
    0.95
    """
    cases = sum(c.cases for c in checks)
    return sum(c.covered for c in checks) / cases, math.sqrt(NOMINAL * (1 - NOMINAL) / cases), cases

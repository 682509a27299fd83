"""The interval checked against a known truth: synthetic recordings whose true expected difference is known in
closed form, played as the trials play them, the interval made by ``separation.difference`` and counted as covering
the truth or not, case after case.

A case: P problems, each with a true accuracy q; a recording draws m repetitions per problem, each right with
probability q (right or wrong, two answers). Setting A is the majority of the first ``n`` of a trial's random order
of them (n odd), setting B the first one alone, so the truth per problem is P(Binomial(n, q) > n / 2) − q and the day's
is its sum (K = P). Under AIMO3's private rule with per-run seeds, the second run takes positions n..2n of the same
order (B: position 1), as ``SecondDraws`` does, and a problem's credit is the mean of its two runs; with fixed seeds
the second run is the first and the rule is the public one. Each case gives the estimate (the mean over trials),
the interval's half-width, and the recordings' variance estimate; over the cases, the coverage of the truth, the
mean half-width, and the ratio of the estimated variance to the estimates' real variance across recordings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from solver.offline.sim.separation import Z95, difference


@dataclass(frozen=True)
class CoverageCheck:
    """What ``cases`` synthetic recordings of one truth say of the interval."""

    rule: str  # "public" (one run) or "private" (two runs, per-run seeds)
    cases: int
    truth: float  # the true expected difference A − B of a day
    coverage: float  # share of cases whose interval holds the truth
    half_width: float  # mean half-width of the intervals
    width_ratio: float  # √(mean estimated variance / variance of the estimates across cases): 1 is right
    conservative: float  # mean problems per case whose variance is an upper bound

    @property
    def nominal(self) -> float:
        return 0.95


def truth(accuracy: np.ndarray, n: int) -> float:
    """The day's true expected difference: majority of n against one, summed over the problems.

    >>> round(truth(np.array([0.5, 0.8]), 3), 4)  # 0.5 − 0.5 + 0.896 − 0.8
    0.096
    """
    return float((binom.sf(n // 2, n, accuracy) - accuracy).sum())


def one_case(rng: np.random.Generator, accuracy: np.ndarray, recorded: int, n: int, trials: int,
             private: bool, unbiased: bool = True) -> tuple[float, float, float, int]:
    """One recording and its trials: the estimate, the half-width, the recordings' variance estimate, and the
    problems bounded conservatively."""
    problems = len(accuracy)
    right = rng.random((problems, recorded)) < accuracy[:, None]  # the recording
    order = np.argsort(rng.random((trials, problems, recorded)), axis=2)  # each trial's random order
    seen = np.take_along_axis(np.broadcast_to(right, order.shape), order, axis=2)
    runs = [(seen[:, :, :n], seen[:, :, 0])]
    if private:
        runs.append((seen[:, :, n:2 * n], seen[:, :, 1]))
    credit_a = np.mean([votes.sum(axis=2) > n / 2 for votes, _ in runs], axis=0)
    credit_b = np.mean([first for _, first in runs], axis=0)
    y = (credit_a - credit_b).astype(float)  # (trials, problems)
    width = 2 * n if private else n
    used = np.zeros((trials, problems, recorded), dtype=bool)
    np.put_along_axis(used, order[:, :, :width], True, axis=2)
    d = difference(0, 1, y, used, credit_a.sum(axis=1), credit_b.sum(axis=1), np.full(problems, recorded),
                   width, problems, unbiased=unbiased)
    return d.mean, d.half, d.data_var, d.conservative


def coverage_check(private: bool, cases: int = 400, problems: int = 20, recorded: int = 24, n: int = 3, trials: int = 300,
          seed: int = 0, unbiased: bool = True) -> CoverageCheck:
    """``cases`` recordings of one truth (accuracies spread from 0.2 to 0.9) under the public or the private rule;
    ``unbiased`` False: the jackknife instead of the pairs (what the simulator did before).

    >>> c = coverage_check(False, cases=20, problems=4, trials=60)
    >>> c.cases, c.rule, 0 <= c.coverage <= 1
    (20, 'public', True)
    """
    rng = np.random.default_rng(seed)
    accuracy = np.linspace(0.2, 0.9, problems)
    true = truth(accuracy, n)
    found = np.array([one_case(rng, accuracy, recorded, n, trials, private, unbiased) for _ in range(cases)])
    means, halves, data, bounded = found.T
    noise = (halves / Z95) ** 2 - data  # the trials' own part, which the estimates' spread holds too
    covered = np.abs(means - true) <= halves
    ratio = float(np.sqrt((data + noise).mean() / means.var(ddof=1)))
    return CoverageCheck("private" if private else "public", cases, true, float(covered.mean()),
                         float(halves.mean()), ratio, float(bounded.mean()))

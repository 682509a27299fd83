"""What the data can tell: the difference between two settings played on the same draws, and whether the recorded
repetitions can separate it.

Two settings are played on common draws (the same problems, orders and recorded repetitions each trial), so their
difference is taken trial by trial: ``mean`` is the expected difference of the scores, and ``day`` the 5–95 % band
of one day's difference (what a single leaderboard day could show; no recording narrows it).

The interval is the data's: the expected difference is estimated from each problem's m recorded repetitions, and
another recording of the same problems would give another estimate. Per problem p the estimate is the mean, over
the trials that drew p, of the paired credit difference y; its variance over recordings is estimated by the
jackknife (delete one recorded repetition; Arvesen 1969 for statistics of this kind), read off the trials
themselves: the trials whose draws left repetition i out are draws from the recording without i, so their mean
of y is the delete-i estimate d_i, and

    V_p = (m - 1) / m · Σ_i (d_i - mean d)^2.

The d_i carry the trials' own noise, which this sum would count m - 1 times over: the trials are split in two
halves (even and odd) and the product of the halves' deviations is summed instead, which the two halves' noises,
independent, leave unbiased. Where every draw holds every recorded repetition (a setting drawing as many as were
recorded, or more: topped up), no trial leaves one out; there V_p is one day's variance of y (the recording is then
the whole draw, so another recording moves the estimate about as much as another draw does). Problems are
recorded independently, so the variances add, each weighted by (K / P)^2 (a day holds K of the P recorded
problems), and the trials' own noise of the mean is added:

    V = (K / P)^2 · Σ_p V_p + Var(day difference) / trials,   interval: mean ± z √V (z = 1.96: 95 %).

A difference whose interval holds 0 is "not separable on this data". The attempts per problem that would separate
it: the jackknife variance falls as 1 / m, so with m' recorded for every problem the recordings' part is
(K / P)^2 Σ_p V_p m_p / m' (m_p read as n, the repetitions the pair draws per problem and day, where the draws
held them all), below (mean / z)^2 from m' = z^2 (K / P)^2 Σ_p V_p m_p / mean^2 on, if the mean and the problems'
spread stay as measured. When the recordings' part alone already separates it, more trials would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Z95 = 1.959964  # two-sided 95 % normal quantile
LEFT_OUT_MIN = 5  # trials per half that must leave a repetition out for its delete-one estimate


@dataclass(frozen=True)
class Difference:
    """Setting ``a`` minus setting ``b`` (indices into the report's settings), in score points of K problems."""

    a: int
    b: int
    mean: float  # expected difference over the trials
    day: tuple[float, float]  # 5 % and 95 % of one day's difference
    half: float  # half-width of the 95 % interval
    attempts: float | None  # recorded attempts per problem that would separate it (None: separable, or more trials
    # would; inf: no difference to separate)

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    @property
    def separable(self) -> bool:
        return abs(self.mean) > self.half

    @property
    def verdict(self) -> str:
        """
        >>> Difference(0, 1, 1.5, (0.0, 3.0), 0.5, None).verdict
        'separable'
        >>> Difference(0, 1, 0.2, (-2.0, 2.0), 0.9, 41.2).verdict
        'not separable on this data (~42 recorded attempts per problem would separate it)'
        >>> Difference(0, 1, 0.2, (-2.0, 2.0), 0.3, None).verdict
        'not separable at these trials (more trials would separate it)'
        >>> Difference(0, 1, 0.0, (0.0, 0.0), 0.0, math.inf).verdict
        'the same on every draw'
        """
        if self.separable:
            return "separable"
        if self.attempts is None:
            return "not separable at these trials (more trials would separate it)"
        if math.isinf(self.attempts):
            return "the same on every draw" if self.half == 0 and self.day == (0.0, 0.0) else \
                "not separable on this data (no difference on these draws)"
        return f"not separable on this data (~{math.ceil(self.attempts)} recorded attempts per problem would " \
               "separate it)"

    def text(self) -> str:
        """
        >>> Difference(0, 1, -1.25, (-3.0, 1.0), 0.5, None).text()
        '-1.25 [-1.75, -0.75]'
        """
        return f"{self.mean:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"


def jackknife(y: np.ndarray, used: np.ndarray, recorded: int) -> float | None:
    """One problem's jackknife variance (module docstring) from its trials: ``y`` (trials,) the paired
    difference of each trial that drew it, ``used`` (trials, recorded) which recorded repetitions each trial's
    draws held; None where some repetition is left out by too few trials of a half.

    Three recorded repetitions, the difference 1 exactly when the draw holds repetition 0, 0 otherwise; the
    draws are the three pairs, each in both halves (the trials' noise is none here):

    >>> used = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1]] * 20, dtype=bool)
    >>> y = used[:, 0].astype(float)
    >>> round(jackknife(y, used, 3), 6)  # d = (0, 1, 1): (2/3) · (4/9 + 1/9 + 1/9)
    0.444444
    """
    if recorded < 2:
        return None
    sums = []
    for half in (0, 1):
        rows = np.arange(len(y)) % 2 == half
        yh, uh = y[rows], used[rows]
        left = (~uh).sum(axis=0)
        if (left < LEFT_OUT_MIN).any():
            return None
        d = ((~uh) * yh[:, None]).sum(axis=0) / left
        sums.append(d - d.mean())
    return float((recorded - 1) / recorded * (sums[0] * sums[1]).sum())


def difference(a: int, b: int, y: np.ndarray, used: np.ndarray, day_a: np.ndarray, day_b: np.ndarray,
               recorded: np.ndarray, drawn: int, problems: int, z: float = Z95) -> Difference:
    """``a`` minus ``b`` (module docstring): ``y`` (trials, P) the paired credit difference of each problem per
    trial, nan where the trial did not draw it; ``used`` (trials, P, M) which of a problem's recorded repetitions
    the trial's draws held; ``day_*`` (trials,) the days' scores; ``recorded`` (P,) repetitions recorded per
    problem; ``drawn`` the repetitions the pair draws from a problem per day; ``problems`` K.

    Two problems in every day, four trials, every draw holding all (a's win on problem 0 in half the trials):

    >>> y = np.array([[1, 0], [0, 0], [0, 0], [1, 0]], dtype=float)
    >>> d = difference(0, 1, y, np.ones((4, 2, 2), dtype=bool), y.sum(1), np.zeros(4), np.array([2, 2]), 2, 2)
    >>> d.mean, round(d.half, 4), d.separable  # V = 0.25 (problem 0's day variance) + 0.25 / 4
    (0.5, 1.0957, False)
    >>> round(d.attempts, 2)  # (1.96^2 · 0.25 · max(2, 2)) / 0.5^2
    7.68
    """
    diff = np.asarray(day_a, dtype=float) - np.asarray(day_b, dtype=float)
    trials = len(diff)
    mean = float(diff.mean())
    day = (float(np.quantile(diff, 0.05)), float(np.quantile(diff, 0.95)))
    pools = y.shape[1]
    weight = (problems / pools) ** 2
    jack, fallback, scaled = 0.0, 0.0, 0.0
    for p in range(pools):
        seen = ~np.isnan(y[:, p])
        m = int(recorded[p])
        if seen.sum() < 2:
            continue
        found = jackknife(y[seen, p], used[seen, p, :m], m) if drawn < m else None
        if found is not None:
            jack += found
            scaled += found * m
        else:
            spread = float(np.var(y[seen, p]))
            fallback += spread
            scaled += spread * max(m, drawn)
    data = weight * (max(0.0, jack) + fallback)
    noise = float(np.var(diff)) / trials if trials > 1 else 0.0
    half = z * math.sqrt(data + noise)
    if abs(mean) > half:
        return Difference(a, b, mean, day, half, None)
    if mean == 0 or scaled <= 0:
        return Difference(a, b, mean, day, half, math.inf)
    if z * math.sqrt(data) < abs(mean):
        return Difference(a, b, mean, day, half, None)  # the recordings would tell: the trials do not yet
    attempts = max(float(drawn), z * z * weight * max(scaled, 0.0) / (mean * mean))
    return Difference(a, b, mean, day, half, attempts)

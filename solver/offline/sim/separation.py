"""What the data can tell: the difference between two settings played on the same draws, and whether the recorded
repetitions can separate it.

Two settings are played on common draws (the same problems, orders and recorded repetitions each trial), so their
difference is taken trial by trial: ``mean`` is the expected difference of the scores, and ``day`` the 5–95 % band
of one day's difference (what a single leaderboard day could show; no recording narrows it).

The interval is the data's: the expected difference is estimated from each problem's m recorded repetitions, and
another recording of the same problems would give another estimate. Per problem p the estimate is the mean, over
the trials that drew p, of the paired credit difference y: an average of y over random draws of the recording, a
U-statistic of the recorded repetitions. Its variance over recordings is estimated without bias from pairs of trials
(:func:`pair_variance`): given the recording, two trials are independent, so the mean of y_t·y_t' over all pairs
estimates the square of the recording's value; over the pairs whose draws share no recorded repetition, the two
draws are of independent repetitions, so that mean estimates the square of the true value; the difference of the
two is the variance (E θ̂² − θ²). That needs draws of at most half the recording (a setting that draws k, or 2k
under a rule of two runs with per-run seeds, from m >= 2k), and enough disjoint pairs. Where there are not, the
delete-one jackknife over the recorded repetitions (Arvesen 1969), read off the trials (the trials whose draws left
repetition i out are draws from the recording without i; halves of the trials multiplied so their own noise
cancels), stands in: an upper bound (Efron–Stein), which overstates an order-c interaction of the vote c(m − 1) /
(m − c) times. Where every draw holds every recorded repetition (topped up), one day's variance of y stands in,
which overstates it too. Such problems are counted (``conservative``) and the verdict says so; so is every problem
where the pairs' estimates, noisy, sum to nothing though the draws vary (the recordings' variance is then below what
the trials resolve, and the jackknife bounds it).

Problems are recorded independently, so the variances add, each weighted by (K / P)^2 (a day holds K of the P
recorded problems), and the trials' own noise of the mean is added:

    V = (K / P)^2 · Σ_p V_p + Var(day difference) / trials,   interval: mean ± z √V.

z is 1.96 (95 %) for a pair chosen beforehand (``--compare``); each setting set against the best by mean is one of
S − 1 comparisons with a best the same data chose, so z is Bonferroni's over them (z at 1 − 0.05 / (2 (S − 1))), a
conservative stand-in for Hsu's multiple comparisons with the best. A difference whose interval holds 0 is "not
separable on this data", and so is one whose recordings show no variance at all (nothing to measure the interval
by: a zero is not a certainty).

The attempts per problem that would separate it: the variance falls as 1 / m (exactly for the first-order part, the
rest faster), so with m' recorded for every problem the recordings' part is (K / P)^2 Σ_p V_p m_p / m' (m_p read as
n, the repetitions the pair draws per problem and day, where the draws held them all). Separating with 80 % power at
the interval's z needs (z + z_0.8)^2 (K / P)^2 Σ_p V_p m_p / mean^2 attempts, if the mean and the problems' spread
stay as measured; the same figure at the ends of the mean's own interval is the figure's interval (unbounded above
where the interval holds 0: the data cannot rule out a difference too small to separate at any size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Z95 = 1.959964  # two-sided 95 % normal quantile
Z_POWER = 0.841621  # one-sided 80 % normal quantile: the attempts to separate at 80 % power
LEFT_OUT_MIN = 5  # trials per half that must leave a repetition out for its delete-one estimate
DISJOINT_MIN = 50  # pairs of trials with disjoint draws the unbiased estimate needs (below: the jackknife)
PAIR_TRIALS = 800  # at most this many trials per problem enter the pairs (their count grows as its square)


def family_z(comparisons: int, level: float = 0.95) -> float:
    """The two-sided normal quantile for ``comparisons`` intervals holding together at ``level`` (Bonferroni).

    >>> round(family_z(1), 4), round(family_z(4), 4)
    (1.96, 2.4977)
    """
    return NormalDist().inv_cdf(1 - (1 - level) / (2 * max(1, comparisons)))


@dataclass(frozen=True)
class Difference:
    """Setting ``a`` minus setting ``b`` (indices into the report's settings), in score points of K problems."""

    a: int
    b: int
    mean: float  # expected difference over the trials
    day: tuple[float, float]  # 5 % and 95 % of one day's difference
    half: float  # half-width of the interval (``family`` comparisons at 95 % together)
    attempts: float | None  # recorded attempts per problem that would separate it at 80 % power (None: separable,
    # or more trials would; inf: no difference to separate)
    data_var: float = 1.0  # the recordings' part of the variance (0: the recordings show none)
    attempts_range: tuple[float, float] | None = None  # the attempts at the ends of the mean's interval
    conservative: int = 0  # problems whose variance is an upper bound (jackknife or one day's), not unbiased
    family: int = 1  # comparisons the interval is adjusted for (Bonferroni)

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    @property
    def separable(self) -> bool:
        """The interval excludes 0, and the recordings gave a variance to make it with."""
        return abs(self.mean) > self.half and self.data_var > 0

    @property
    def verdict(self) -> str:
        """
        >>> Difference(0, 1, 1.5, (0.0, 3.0), 0.5, None).verdict
        'separable'
        >>> Difference(0, 1, 0.2, (-2.0, 2.0), 0.9, 41.2, attempts_range=(20.3, math.inf)).verdict
        'not separable on this data (~42 recorded attempts per problem would separate it at 80 % power; 21 … ∞)'
        >>> Difference(0, 1, 0.2, (-2.0, 2.0), 0.3, None).verdict
        'not separable at these trials (more trials would separate it)'
        >>> Difference(0, 1, 0.0, (0.0, 0.0), 0.0, math.inf, 0.0).verdict
        'the same on every draw'
        >>> Difference(0, 1, 1.0, (1.0, 1.0), 0.0, None, 0.0).verdict
        'not separable on this data (the recordings show no variance to measure it by)'
        """
        if self.separable:
            return "separable" + self.caveat
        if self.data_var <= 0 and self.mean != 0:
            return "not separable on this data (the recordings show no variance to measure it by)"
        if self.attempts is None:
            return "not separable at these trials (more trials would separate it)"
        if math.isinf(self.attempts):
            return "the same on every draw" if self.half == 0 and self.day == (0.0, 0.0) else \
                "not separable on this data (no difference on these draws)"
        spread = "" if self.attempts_range is None else \
            f"; {math.ceil(self.attempts_range[0])} … {attempts_text(self.attempts_range[1])}"
        return (f"not separable on this data (~{math.ceil(self.attempts)} recorded attempts per problem would "
                f"separate it at 80 % power{spread})" + self.caveat)

    @property
    def caveat(self) -> str:
        """
        >>> Difference(0, 1, 1.5, (0.0, 3.0), 0.5, None, conservative=3).caveat
        ' (wide: 3 problems by an upper bound)'
        """
        return f" (wide: {self.conservative} problems by an upper bound)" if self.conservative else ""

    def text(self) -> str:
        """
        >>> Difference(0, 1, -1.25, (-3.0, 1.0), 0.5, None).text()
        '-1.25 [-1.75, -0.75]'
        """
        return f"{self.mean:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"


def attempts_text(value: float) -> str:
    """
    >>> attempts_text(math.inf), attempts_text(12.2)
    ('∞', '13')
    """
    return "∞" if math.isinf(value) else str(math.ceil(value))


def pair_variance(y: np.ndarray, used: np.ndarray, limit: int = PAIR_TRIALS) -> float | None:
    """One problem's variance over recordings (module docstring), unbiased: the mean of y_t·y_t' over all pairs
    of trials less its mean over the pairs whose draws share no recorded repetition; ``y`` (trials,) the paired
    difference, ``used`` (trials, recorded) which recorded repetitions each trial's draws held. None with fewer
    than ``DISJOINT_MIN`` disjoint pairs. At most ``limit`` trials (the first) enter.

    Two recorded repetitions, each trial drawing one, y its value: the recording (a, b) has θ = (a + b) / 2 and
    the disjoint pairs are (a, b): (a + b)²/4 − ab = (a − b)²/4, here 1/4 for (1, 0) — which is Var θ̂ for two
    independent 0/1 values of mean 1/2, 1/8, in expectation over recordings.

    >>> used = np.array([[1, 0], [0, 1]] * 30, dtype=bool)
    >>> y = used[:, 0].astype(float)
    >>> round(pair_variance(y, used), 3)  # all pairs: (30·29 + 0)/(60·59) ≈ 0.246; disjoint: 0
    0.246
    """
    y, bits = y[:limit].astype(np.float64), np.packbits(used[:limit], axis=1)  # each draw's set as bytes
    apart = np.ones((len(y), len(y)), dtype=bool)
    for column in bits.T:
        apart &= (column[:, None] & column[None, :]) == 0
    np.fill_diagonal(apart, False)  # an empty draw shares nothing, even with itself
    pairs = float(apart.sum())
    if pairs < DISJOINT_MIN:
        return None
    n = len(y)
    total = float(y.sum())
    everyone = (total * total - float(y @ y)) / (n * (n - 1))
    return everyone - float(y @ (apart @ y)) / pairs


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
               recorded: np.ndarray, drawn: int, problems: int, z: float = Z95, family: int = 1,
               unbiased: bool = True) -> Difference:
    """``a`` minus ``b`` (module docstring): ``y`` (trials, P) the paired credit difference of each problem per
    trial, nan where the trial did not draw it; ``used`` (trials, P, M) which of a problem's recorded repetitions
    the trial's draws held; ``day_*`` (trials,) the days' scores; ``recorded`` (P,) repetitions recorded per
    problem; ``drawn`` the repetitions the pair draws from a problem per day; ``problems`` K; ``z`` the interval's
    quantile, for ``family`` comparisons; ``unbiased`` False leaves the pairs out (the jackknife wherever it
    can), to measure what they change.

    Two problems in every day, four trials, every draw holding all (a's win on problem 0 in half the trials):

    >>> y = np.array([[1, 0], [0, 0], [0, 0], [1, 0]], dtype=float)
    >>> d = difference(0, 1, y, np.ones((4, 2, 2), dtype=bool), y.sum(1), np.zeros(4), np.array([2, 2]), 2, 2)
    >>> d.mean, round(d.half, 4), d.separable, d.conservative  # V = 0.25 (problem 0's day variance) + 0.25 / 4
    (0.5, 1.0957, False, 1)
    >>> round(d.attempts, 2), d.attempts_range[1]  # (1.96 + 0.84)^2 · 0.25 · max(2, 2) / 0.5^2
    (15.7, inf)
    """
    diff = np.asarray(day_a, dtype=float) - np.asarray(day_b, dtype=float)
    trials = len(diff)
    mean = float(diff.mean())
    day = (float(np.quantile(diff, 0.05)), float(np.quantile(diff, 0.95)))
    pools = y.shape[1]
    weight = (problems / pools) ** 2
    exact, bound, scaled, conservative, varied = 0.0, 0.0, 0.0, 0, False
    for p in range(pools):
        seen = ~np.isnan(y[:, p])
        m = int(recorded[p])
        if seen.sum() < 2:
            continue
        yp, up = y[seen, p], used[seen, p, :m]
        if not yp.any():
            continue  # the same on every draw: nothing to add, and nothing bounded
        varied = varied or bool(np.ptp(yp) > 0)
        found = pair_variance(yp, up) if unbiased and 2 * drawn <= m else None
        if found is not None:
            exact += found
            scaled += found * m
            continue
        conservative += 1
        found = jackknife(yp, up, m) if drawn < m else None
        if found is None:
            found = float(np.var(yp))
            m = max(m, drawn)
        bound += max(0.0, found)
        scaled += max(0.0, found) * m
    if unbiased and exact + bound <= 0 and varied:
        # The pairs' estimate is unbiased but noisy: where it sums to nothing though the draws vary, the recordings'
        # variance is below what these trials resolve, not zero; the jackknife's upper bound stands in, flagged.
        return difference(a, b, y, used, day_a, day_b, recorded, drawn, problems, z, family, unbiased=False)
    data = weight * max(0.0, exact + bound)
    noise = float(np.var(diff)) / trials if trials > 1 else 0.0
    half = z * math.sqrt(data + noise)
    made = dict(data_var=data, conservative=conservative, family=family)
    if abs(mean) > half and data > 0:
        return Difference(a, b, mean, day, half, None, **made)
    if mean == 0 or scaled <= 0:
        return Difference(a, b, mean, day, half, math.inf, **made)
    if data > 0 and z * math.sqrt(data) < abs(mean):
        return Difference(a, b, mean, day, half, None, **made)  # the recordings would tell: the trials do not yet
    need = (z + Z_POWER) ** 2 * weight * scaled
    low, high = abs(mean) - half, abs(mean) + half
    attempts = max(float(drawn), need / (mean * mean))
    spread = (max(float(drawn), need / (high * high)), max(float(drawn), need / (low * low)) if low > 0 else math.inf)
    return Difference(a, b, mean, day, half, attempts, attempts_range=spread, **made)

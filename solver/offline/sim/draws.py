"""Which recorded repetitions a trial plays, for every problem of every run of its day.

Each setting draws its own repetitions (``reps`` plus a second round's ``retry``): for a problem, a trial holds one
random order of its M recorded repetitions and one with-replacement sequence. With ``auto`` a setting that needs L
takes the order's first L where L <= M (exact: a random subset of real repetitions is a real run), and where L > M
all M in that order topped up with the sequence's first L - M (``bootstrapped``, counted per setting, its bias
estimated in ``solver.offline.sim.bias``): as exact as the recording goes. Both are fixed per trial and problem
whatever the grid holds, and a shorter draw is a prefix of a longer one, so a setting's row does not depend on
the other settings, and a second round never changes how its first round is drawn.

A run's speed factor (``--machine-speed``, a stress test off by default: no rule of AIMO3 varies the machine) is
drawn per trial and run from the trial's key alone, so every setting meets the same machine.

Under a scoring rule of two runs (``solver.offline.sim.scoring``, AIMO3's private leaderboard) a trial plays the
same K problems twice, in the order the rule gives (AIMO3's private set: the first run's, fixed) and with the draws
the seed policy gives (``sampling.seed_policy``): ``fixed``, the same seeds, replays the first run's draws (the two
runs differ only where their clocks cut differently, i.e. under the machine-speed stress test); ``per-run`` draws
afresh (the recorded repetitions the first run left, positions N..2N of the same order, where the problem has 2N
recorded: two disjoint random subsets are two independent real runs; elsewhere a draw of its own).

The first run's order is random (``order: random``, the gateway's shuffle) or, as a stress setting, the problems
sorted by how hard the recordings make them (the share of recorded repetitions right): ``hard-first``,
``hard-last`` or ``hard-middle`` (the hardest in the middle, the easiest at both ends), ties in random order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solver.offline.sim.pools import SimulationError
from solver.offline.sim.setting import Draw, Order, Plan, SeedPolicy, distinct_runs

# Seed words that set a trial's other streams apart from its draws' ([key, problem, 0 or 1]; problems are indices
# far below these): the second run's order and key, and each run's speed factor.
SECOND_RUN, SPEED = 2**31 - 1, 2**31 - 2


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

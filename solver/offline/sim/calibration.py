"""The calibration check: does a simulated score distribution look like real runs of the same setting?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from solver.config import Config
from solver.core.state import Rules
from solver.offline.sim.play import fixed_rounds, play_on
from solver.offline.sim.pools import Prepared, SimulationError
from solver.offline.sim.draws import draw_indices
from solver.offline.sim.setting import Draw, Setting
from solver.offline.sim.trials import ProblemGrader


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
              trials_per_split: int = 100, seed: int = 0, draw: Draw = "auto") -> Calibration:
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
    rules = Rules.of(replace(setting, retry=0).config(config))  # real runs of n repetitions: no second round
    grade = ProblemGrader(config.answers)
    held: list[float] = []
    simulated: list[float] = []

    def run_score(parts: Sequence[tuple[Prepared, np.ndarray]]) -> float:
        score = 0
        for prep, idx in parts:
            b = prep.ballots[setting.voter]
            result = play_on([b[i] for i in idx], fixed_rounds(prep.seconds[idx], prep.tokens[idx], setting.workers),
                             rules, setting.workers)
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

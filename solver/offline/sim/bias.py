"""What drawing with replacement costs a setting's estimate: the bootstrap bias, per setting.

A problem with fewer recorded repetitions than a setting draws is bootstrapped (``solver.offline.sim.draws.Draws``):
its N ballots are its m recorded ones topped up with N - m drawn again from them, as if those m were all the
answers the model can give. With small m that is the model's whole answer distribution read off a handful of
draws: one right attempt of one makes every simulated run right, one wrong attempt every run wrong.

The bias is what the method does on average over recordings: E[right vote from a topped-up draw of a recording of
m] minus P(right vote from a real run of N). It needs the problem's answer distribution, which is estimated from
what was recorded: a Dirichlet posterior with a half vote (Jeffreys) on each answer seen (no answer counted as
one), on the reference answer where it was not seen, and on "something not seen" (a new wrong answer each time it
is drawn). Each sample draws a distribution from it, a recording of m from that distribution, a topped-up draw of
N from the recording and a real run of N from the distribution, and votes both under the setting's rules (votes
only: every repetition one second, W at a time, so no budget enters). A problem recorded N times or more is drawn
exactly, without bias; the setting's estimate is the sum over the bootstrapped problems, times the share of runs a
problem is in (K of the P recorded): the score the bootstrap adds (negative: takes away).
"""

from __future__ import annotations

from collections.abc import Sequence
import numpy as np

from solver.config import Config
from solver.core.state import Rules
from solver.offline.sim.play import play_on
from solver.offline.sim.pools import Prepared
from solver.offline.sim.setting import Setting
from solver.offline.sim.trials import ProblemGrader
from solver.timing.timeline import Timeline, fixed_timeline
from solver.types import Ballot

SAMPLES = 200  # bootstrap draws and posterior draws per (setting, problem)
PRIOR = 0.5  # votes each category of the posterior starts with (Jeffreys)


def bootstrap_biases(prepared: Sequence[Prepared], settings: Sequence[Setting], config: Config, problems: int,
                     seed: int = 0) -> list[float]:
    """Per setting, the estimated score (problems per run of ``problems``) its bootstrapped draws add."""
    grade = ProblemGrader(config.answers)
    cache: dict[tuple[str, tuple[str, ...], int, int, int], float] = {}
    out = []
    for setting in settings:
        key = (setting.voter, setting.stoppers, setting.reps, setting.retry, setting.workers)
        if key not in cache:
            cache[key] = _bias(prepared, setting, config, problems, grade, seed)
        out.append(cache[key])
    return out


def _bias(prepared: Sequence[Prepared], setting: Setting, config: Config, problems: int, grade: ProblemGrader,
          seed: int) -> float:
    length, workers = setting.draws, setting.workers
    rules = Rules.of(setting.config(config))

    def rounds(first: int, start: float) -> Timeline:
        return fixed_timeline([1.0] * (length - first), workers, None, start)

    def right(ballots: Sequence[Ballot | None], prep: Prepared) -> float:
        return float(grade(prep.problem, play_on(ballots, rounds, rules, workers).answer))

    total = 0.0
    for p, prep in enumerate(prepared):
        recorded = prep.ballots[setting.voter]
        m = len(recorded)
        if m == 0 or m >= length:
            continue
        categories, alpha = posterior(recorded, prep.problem.answer)
        rng = np.random.default_rng([seed, 7907, length, p])
        gap = 0.0
        for j in range(SAMPLES):
            shares = rng.dirichlet(alpha)

            def ballots(picks: np.ndarray, j: int = j) -> list[Ballot | None]:
                return [categories[c] if c < len(categories) else Ballot(f"unseen answer {j}.{n}")
                        for n, c in enumerate(picks)]

            recording = rng.choice(len(alpha), size=m, p=shares)
            topped = np.concatenate([rng.permutation(recording), rng.choice(recording, size=length - m)])
            gap += right(ballots(topped), prep) - right(ballots(rng.choice(len(alpha), size=length, p=shares)), prep)
        total += gap / SAMPLES
    return total * problems / len(prepared)


def posterior(recorded: Sequence[Ballot | None], reference: str | None) -> tuple[list[Ballot | None], np.ndarray]:
    """The categories of the answer distribution (each answer seen, no answer, the reference where not seen) and
    the Dirichlet parameters over them plus one last category, "something not seen".

    >>> categories, alpha = posterior([Ballot("7"), None, Ballot("7")], "5")
    >>> [c.answer if c else None for c in categories], alpha.tolist()
    (['7', None, '5'], [2.5, 1.5, 0.5, 0.5])
    """
    categories: list[Ballot | None] = []
    counts: list[float] = []
    for ballot in recorded:
        for i, seen in enumerate(categories):
            if (seen is None and ballot is None) or (seen is not None and ballot is not None
                                                    and seen.answer == ballot.answer):
                counts[i] += 1
                break
        else:
            categories.append(ballot)
            counts.append(1.0)
    if reference is not None and all(c is None or c.answer != reference for c in categories):
        categories.append(Ballot(reference))
        counts.append(0.0)
    return categories, np.array(counts + [0.0]) + PRIOR

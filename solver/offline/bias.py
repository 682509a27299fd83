"""What drawing with replacement costs a setting's estimate: the bootstrap bias, per setting.

A problem with fewer recorded repetitions than a setting draws is bootstrapped (``solver.offline.trials.Draws``):
its N ballots are drawn from its m recorded ones, as if those m were all the answers the model can give. With
small m that is the model's whole answer distribution read off a handful of draws: one right attempt of one makes
every simulated run right, one wrong attempt every run wrong.

The estimate compares, per bootstrapped problem, the bootstrap's chance of a right vote with the chance under the
posterior of its answer distribution given what was recorded: a Dirichlet with a half vote (Jeffreys) on each
answer seen (no answer counted as one), on the reference answer where it was not seen, and on "something not
seen" (a new wrong answer each time it is drawn); N ballots drawn from a posterior draw of that distribution and
voted under the setting's rules. Votes only (every repetition one second, W at a time), so it does not depend on
a budget. The setting's bias is the sum over bootstrapped problems times the share of runs a problem is in (K of
the P recorded): the score the bootstrap adds (negative: it takes away) under that prior. The prior matters most
at m = 1, where it is most of what is known; a problem recorded N times or more has no bias (drawn exactly).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from solver.config import Config
from solver.core.state import Rules
from solver.offline.model import play_on
from solver.offline.pools import Prepared
from solver.offline.trials import Grader, Setting
from solver.timing.timeline import Timeline, fixed_timeline
from solver.types import Ballot

SAMPLES = 200  # bootstrap draws and posterior draws per (setting, problem)
PRIOR = 0.5  # votes each category of the posterior starts with (Jeffreys)


def bootstrap_biases(prepared: Sequence[Prepared], settings: Sequence[Setting], config: Config, problems: int,
                     seed: int = 0) -> list[float]:
    """Per setting, the estimated score (problems per run of ``problems``) its bootstrapped draws add."""
    grade = Grader(config.answers)
    cache: dict[tuple[str, tuple[str, ...], int, int, int], float] = {}
    out = []
    for setting in settings:
        key = (setting.voter, setting.stoppers, setting.reps, setting.retry, setting.workers)
        if key not in cache:
            cache[key] = _bias(prepared, setting, config, problems, grade, seed)
        out.append(cache[key])
    return out


def _bias(prepared: Sequence[Prepared], setting: Setting, config: Config, problems: int, grade: Grader,
          seed: int) -> float:
    length, workers = setting.draws, setting.workers
    rules = Rules.build(replace(config.vote, voter=setting.voter), config.answers,
                        replace(config.stop, stoppers=setting.stoppers), setting.reps, setting.retry,
                        config.solve.retry_below)

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
        rng = np.random.default_rng([seed, 7907, length, p])
        boot = np.mean([right([recorded[i] for i in rng.integers(0, m, size=length)], prep) for _ in range(SAMPLES)])
        total += float(boot) - _posterior_right(recorded, prep, length, rng, right)
    return total * problems / len(prepared)


def _posterior_right(recorded: Sequence[Ballot | None], prep: Prepared, length: int, rng: np.random.Generator,
                     right) -> float:  # type: ignore[no-untyped-def]
    """The chance of a right vote when N ballots come from the posterior of the answer distribution."""
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
    reference = prep.problem.answer
    if reference is not None and all(c is None or c.answer != reference for c in categories):
        categories.append(Ballot(reference))
        counts.append(0.0)
    unseen = len(categories)  # the "something not seen" category: a new wrong answer per draw
    alpha = np.array(counts + [0.0]) + PRIOR
    hits = 0.0
    for j in range(SAMPLES):
        shares = rng.dirichlet(alpha)
        picks = rng.choice(len(alpha), size=length, p=shares)
        ballots = [categories[c] if c < unseen else Ballot(f"unseen answer {j}.{n}") for n, c in enumerate(picks)]
        hits += right(ballots, prep)
    return hits / SAMPLES

"""What drawing with replacement costs a setting's estimate: the bootstrap bias.

A problem with fewer recorded repetitions than a setting draws is bootstrapped (``solver.offline.trials.Draws``),
and a bootstrap from m repetitions is biased where answers are rare (the right answer seen once in m is missed more
often than a real run would miss it). The bias cannot be measured on that problem (it has no more repetitions), so
it is measured where it can be: on every problem recorded at least as many times as the setting draws, the vote of
a bootstrap from a random m of its repetitions against the vote of an exact draw from all of them, for each m a
sparse problem has. The estimate for a run is the sum over the sparse problems of the bias at their m, times the
share of runs a problem is in (K of P). Votes only (no time: every repetition takes one second, W at a time), so a
budget does not enter; the same for every budget, clamp and banking setting.
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
from solver.timing.timeline import fixed_timeline

SAMPLES = 300  # bootstrap-against-exact pairs per (setting, m), spread over the richly recorded problems


def bootstrap_biases(prepared: Sequence[Prepared], settings: Sequence[Setting], config: Config, problems: int,
                     seed: int = 0) -> list[float | None]:
    """Per setting, the estimated score (problems per run of ``problems``) its bootstrapped draws add: 0 when no
    problem is bootstrapped, None when no problem is recorded often enough to measure it."""
    grade = Grader(config.answers)
    sizes = [len(p.seconds) for p in prepared]
    cache: dict[tuple[str, tuple[str, ...], int, int, int], float | None] = {}
    out: list[float | None] = []
    for setting in settings:
        key = (setting.voter, setting.stoppers, setting.reps, setting.retry, setting.workers)
        if key not in cache:
            cache[key] = _bias(prepared, sizes, setting, config, problems, grade, seed)
        out.append(cache[key])
    return out


def _bias(prepared: Sequence[Prepared], sizes: list[int], setting: Setting, config: Config, problems: int,
          grade: Grader, seed: int) -> float | None:
    length = setting.draws
    sparse = [m for m in sizes if 0 < m < length]
    if not sparse:
        return 0.0
    rich = [i for i, m in enumerate(sizes) if m >= length]
    if not rich:
        return None
    rules = Rules.build(replace(config.vote, voter=setting.voter), config.answers,
                        replace(config.stop, stoppers=setting.stoppers), setting.reps, setting.retry,
                        config.solve.retry_below)
    rng = np.random.default_rng([seed, 104729, length])
    workers = setting.workers

    def right(prep: Prepared, idx: np.ndarray) -> bool:
        ballots = prep.ballots[setting.voter]

        def rounds(first: int, start: float):  # type: ignore[no-untyped-def]
            return fixed_timeline([1.0] * (len(idx) - first), workers, None, start)

        return grade(prep.problem, play_on([ballots[i] for i in idx], rounds, rules, workers).answer)

    per_m: dict[int, float] = {}
    for m in sorted(set(sparse)):
        gaps = []
        for j in range(SAMPLES):
            prep = prepared[rich[j % len(rich)]]
            total = len(prep.seconds)
            pool = rng.permutation(total)[:m]
            boot = pool[rng.integers(0, m, size=length)]
            exact = rng.permutation(total)[:length]
            gaps.append(float(right(prep, boot)) - float(right(prep, exact)))
        per_m[m] = float(np.mean(gaps))
    share = problems / len(prepared)
    return share * sum(per_m[m] for m in sparse)

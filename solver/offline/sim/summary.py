"""Per setting, what the trials say: expected score, spread, quantiles, P(score >= X) and the cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solver.offline.sim.trials import ChunkResult, Setting

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


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
    scores: np.ndarray  # every trial's score
    right_share: np.ndarray  # per recorded problem (pools' order): share of its trials answered right (nan: never drawn)
    cut: float = 0.0  # mean problems per run the budget cut (stopped at their deadline)
    retried: float = 0.0  # mean problems per run that ran a second round
    bootstrapped: float = 0.0  # mean problems per run that launched repetitions drawn again (more than recorded)
    bootstrap_bias: float | None = None  # estimated score those draws add (problems per run; None: not estimated)
    total_std: float = 0.0  # spread of the whole run's seconds over trials


def summarise(settings: Sequence[Setting], result: ChunkResult, problems: int, thresholds: Sequence[int],
              biases: Sequence[float | None] | None = None) -> list[Summary]:
    out = []
    for i, setting in enumerate(settings):
        scores = result.scores[i]
        stops = result.stops[i]
        total = sum(stops.values()) or 1
        out.append(Summary(
            setting, problems, len(scores), float(scores.mean()), float(scores.std(ddof=1)) if len(scores) > 1
            else 0.0, {q: float(np.quantile(scores, q)) for q in QUANTILES},
            {x: float((scores >= x).mean()) for x in thresholds}, float(result.finished[i].mean()),
            float(result.launched[i].mean()), float(result.tokens[i].mean()), float(result.seconds[i].mean()),
            float(result.total_seconds[i].mean()), {k: v / total for k, v in stops.most_common()}, scores,
            np.divide(result.right[i], result.drawn, out=np.full(len(result.drawn), np.nan), where=result.drawn > 0),
            float(result.cut[i].mean()), float(result.retried[i].mean()), float(result.bootstrapped[i].mean()),
            None if biases is None else biases[i], float(result.total_seconds[i].std())))
    return out


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

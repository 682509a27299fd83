"""How a leaderboard scores a day, as data: how many runs of the notebook it makes over the set, and the credit a
problem earns for the number of those runs that answered it right.

AIMO3 (its overview): the public leaderboard is one run over the public set; the private leaderboard runs the
notebook twice over the private set and concatenates the answers, a problem scoring 1 when both answers are right,
0.5 when one is and 0 when neither; the overall prize needs at least 47 of 50 on both sets. ``count`` is one run
counted plainly, for other competitions.

The order a run serves the problems in: the public set "one-by-one in random order", the private set in a "fixed,
random order" (AIMO3's rules). The gateway Kaggle runs says the same (``kaggle_evaluation/aimo_3_gateway.py``,
vendored in ``tests/kaggle/gateways/aimo3``: ``generate_data_batches`` shuffles ``test.csv`` with a seed from
``os.urandom`` unless ``USE_PRIVATE_SET``, "Set to True during the private rerun to disable shuffling", then serves
the rows as the file holds them): both private runs read the same file, so both play one order, random across
submissions. A rule's ``order`` says which: ``shuffled`` (each run its own) or ``fixed`` (every run the first's).
How the second run draws is the seed policy's (``sampling.seed_policy``, ``solver.offline.sim.draws``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from solver.offline.sim.pools import SimulationError

DEFAULT_LINE = 47.0  # AIMO3's prize line: at least 47 of 50 on both the public and the private set
PRIZE_PROBLEMS = 50  # the problems of the set that line is drawn on


def scaled_line(problems: int) -> float:
    """The line when none is given: AIMO3's prize line as the same share (47 of 50) of a day of ``problems``, so a
    small set of one's own is not held to 47.

    >>> scaled_line(50), scaled_line(6), scaled_line(88)
    (47.0, 5.64, 82.72)
    """
    return round(DEFAULT_LINE * problems / PRIZE_PROBLEMS, 2)


def line_text(line: float, given: bool, problems: int) -> str:
    """Where the line came from, for the reports.

    >>> line_text(5.64, False, 6)
    "the line 5.64: AIMO3's prize line, 47 of 50, scaled to the day's 6 problems (--line L sets one)"
    >>> line_text(40, True, 50)
    'the line 40 (--line)'
    """
    if given:
        return f"the line {line:g} (--line)"
    return (f"the line {line:g}: AIMO3's prize line, {DEFAULT_LINE:g} of {PRIZE_PROBLEMS}, scaled to the day's "
            f"{problems} problems (--line L sets one)")


@dataclass(frozen=True)
class Scoring:
    """A scoring rule: ``runs`` runs over the set, and ``credit[j]`` the score of a problem that ``j`` of them
    answered right.

    >>> SCORINGS["aimo3-private"].credit_of(np.array([0, 1, 2]))
    array([0. , 0.5, 1. ])
    """

    name: str
    runs: int
    credit: tuple[float, ...]  # index: runs that answered right (0..runs)
    text: str
    order: Literal["shuffled", "fixed"] = "shuffled"  # each run's own order, or every run the first run's

    def __post_init__(self) -> None:
        if self.runs < 1 or len(self.credit) != self.runs + 1:
            raise ValueError(f"scoring {self.name}: one credit per number of right runs, 0 to {self.runs}")

    def credit_of(self, right_runs: np.ndarray) -> np.ndarray:
        """Each problem's credit for its count of right runs (any array of whole counts)."""
        return np.asarray(self.credit, dtype=float)[right_runs]

    @property
    def first_run_name(self) -> str:
        """What a rule of two runs calls its first run alone: AIMO3's public leaderboard scores one run."""
        return "public (one run)" if self.name.startswith("aimo3") else "one run"


SCORINGS: dict[str, Scoring] = {
    "aimo3-public": Scoring("aimo3-public", 1, (0.0, 1.0),
                            "AIMO3's public leaderboard: one run over the set, a problem right scores 1"),
    "aimo3-private": Scoring("aimo3-private", 2, (0.0, 0.5, 1.0),
                             "AIMO3's private leaderboard: two runs over the same problems, a problem scores 1 when "
                             "both answers are right, 0.5 when one is, 0 when neither, both runs in one fixed order",
                             order="fixed"),
    "count": Scoring("count", 1, (0.0, 1.0), "problems right in one run"),
}
DEFAULT_SCORING = "aimo3-public"


def scoring(name: str) -> Scoring:
    """The rule of that name; a one-line ``SimulationError`` otherwise.

    >>> scoring("aimo3-private").runs
    2
    >>> scoring("kaggle")
    Traceback (most recent call last):
    ...
    solver.offline.sim.pools.SimulationError: unknown scoring 'kaggle': aimo3-public, aimo3-private or count
    """
    found = SCORINGS.get(name)
    if found is None:
        raise SimulationError(f"unknown scoring {name!r}: {', '.join(list(SCORINGS)[:-1])} or {list(SCORINGS)[-1]}")
    return found


def at_or_above(scores: np.ndarray, line: float) -> float:
    """P(score >= line) over the trials.

    >>> at_or_above(np.array([46.5, 47.0, 48.0, 45.0]), 47)
    0.5
    """
    return float((np.asarray(scores) >= line - 1e-9).mean())

"""The configuration's policy sections: what decides a problem and spends the time (the answer rules, the vote,
when to stop, how many repetitions, the time budget). ``solver tune`` writes these; ``solver.config`` holds them
with the rest of the configuration and is where they are imported from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from solver.errors import ConfigError


def check(ok: bool, message: str) -> None:
    """A ``ConfigError`` with ``message`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)


@dataclass(frozen=True)
class AnswerConfig:
    integer: bool = True  # olympiad rules: answers are integers
    modulus: int | None = None  # e.g. 1000 for AIMO2; applied before the range check
    low: int = 0
    high: int = 99999
    default: str = "0"  # submitted when no repetition produced a valid answer

    def __post_init__(self) -> None:
        check(self.low <= self.high, "answers.low must be <= answers.high")
        check(self.modulus is None or self.modulus > 0, "answers.modulus must be > 0 or null")


@dataclass(frozen=True)
class VoteConfig:
    voter: str = "majority"  # registry name
    tie: Literal["smallest", "largest", "first"] = "first"
    # Weight of an answer by rule, e.g. {"small": 0.6, "multiple_of_100": 0.6} for the weighted voter.
    weights: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check(self.tie in ("smallest", "largest", "first"), "vote.tie must be smallest, largest or first")


EVERY_REPETITION = "none"  # the stopper set that runs every repetition, spelled so by every command


def stopper_set(text: str) -> tuple[str, ...]:
    """A stopper set as every command's ``--stopper`` takes it: names joined by commas, or ``none``
    (:data:`EVERY_REPETITION`): no stopper, every repetition runs (only the cap, and a budget, end a problem).

    >>> stopper_set("beta, esc:5"), stopper_set("none"), stopper_set(" None ")
    (('beta', 'esc:5'), (), ())
    """
    if text.strip().lower() == EVERY_REPETITION:
        return ()
    return tuple(name.strip() for name in text.split(",") if name.strip())


@dataclass(frozen=True)
class StopConfig:
    stoppers: tuple[str, ...] = ()  # registry names; empty (--stopper none) = run every repetition
    combine: Literal["any", "all"] = "any"
    first_answer: bool = False  # end a repetition at its first final answer
    confidence_warmup: int = 0  # DeepConf-style online filter: 0 = off, else K warm-up repetitions
    confidence_percentile: float = 10.0  # threshold percentile of the warm-up repetitions' lowest confidence
    confidence_window: int = 256  # tokens per sliding group when measuring a repetition's confidence

    def __post_init__(self) -> None:
        check(self.combine in ("any", "all"), "stop.combine must be any or all")
        check(self.confidence_warmup >= 0, "stop.confidence_warmup must be >= 0")
        check(self.confidence_window > 0, "stop.confidence_window must be > 0")
        check(0 <= self.confidence_percentile <= 100, "stop.confidence_percentile must be in [0, 100]")


@dataclass(frozen=True)
class SolveConfig:
    reps: int = 8  # repetitions per problem at most
    workers: int = 8  # repetitions in flight per problem; 0 = auto (keep the engine's batch full)
    parallel_problems: int = 1  # problems solved at once; 1 = one at a time (Kaggle), more for validation runs
    # A second round: retry_reps more repetitions when all reps have finished and no answer has retry_below votes
    # (0 = none; solver/core/state.py decides it, for the loop and the simulator alike).
    retry_reps: int = 0
    retry_below: int = 2

    def __post_init__(self) -> None:
        check(self.retry_reps >= 0, "solve.retry_reps must be >= 0")
        check(self.retry_below >= 1, "solve.retry_below must be >= 1")
        check(self.reps > 0, "solve.reps must be > 0")
        check(self.workers >= 0, "solve.workers must be >= 0 (0 = auto)")
        check(self.parallel_problems >= 1, "solve.parallel_problems must be >= 1")


@dataclass(frozen=True)
class BudgetConfig:
    total_s: float | None = None  # wall time for the whole set; None = no budget
    problems: int = 50  # problems expected in the set
    min_s: float = 60.0  # a problem never gets less (unless the global cutoff is near)
    max_s: float = 900.0  # nor more
    reserve_s: float = 300.0  # kept back at the end for safety
    cutoff_s: float | None = None  # after this much elapsed time answer the default at once
    # Time banking: what a problem leaves of its max_s-capped allotment is banked, and a later problem may go past
    # max_s by the bank (never past the floors the problems after it keep). False: max_s caps every problem.
    banking: bool = False

    def __post_init__(self) -> None:
        check(self.problems >= 1, "budget.problems must be >= 1")
        check(0 <= self.min_s <= self.max_s, "budget.min_s must be >= 0 and <= budget.max_s")
        check(self.reserve_s >= 0, "budget.reserve_s must be >= 0")
        check(self.total_s is None or self.total_s > 0, "budget.total_s must be > 0 or null")

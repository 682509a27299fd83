"""The AIMO competitions as data, and the config overlay that lays a competition's rules over a preset."""

from __future__ import annotations

from dataclasses import dataclass

from solver.config import AnswerConfig, Config, ConfigError

# Seconds kept back from the gateway's per-call limit: the solver's wind-down after its deadline, the loop's own
# bound after that, and writing the answer.
CALL_MARGIN_S = 60.0


@dataclass(frozen=True)
class Competition:
    """One competition's contract, as read from its ``kaggle_evaluation`` gateway (the competition's
    own download; the AIMO2 and AIMO3 ones the tests drive are in ``tests/kaggle/gateways``).

    The gateway calls ``predict(*row)``: one polars Series per column of its test.csv, in order, so
    ``predict(id_, problem)`` for AIMO3 and ``predict(id_, question)`` for AIMO2.
    """

    name: str
    low: int  # answers are integers in low..high
    high: int
    modulus: int | None  # applied before the range check (AIMO2 answers are taken mod 1000)
    call_limit_s: float | None  # the gateway's response timeout for every call after the first, seconds
    total_s: float  # the whole notebook run, seconds
    problem_column: str  # test.csv's second column: the problem text
    input_dir: str  # where Kaggle mounts the competition data (test.csv, kaggle_evaluation)
    server: str  # "module:Class" of the competition's inference server in kaggle_evaluation
    default: int = 0  # submitted when nothing better is known

    @property
    def answers(self) -> AnswerConfig:
        return AnswerConfig(integer=True, modulus=self.modulus, low=self.low, high=self.high,
                            default=str(self.default))

    @property
    def columns(self) -> tuple[str, str]:
        """test.csv's columns, in the order the gateway passes them to ``predict``."""
        return ("id", self.problem_column)


COMPETITIONS: dict[str, Competition] = {
    "aimo2": Competition("aimo2", 0, 999, 1000, 30 * 60.0, 5 * 3600.0, "question",
                         "/kaggle/input/ai-mathematical-olympiad-progress-prize-2",
                         "kaggle_evaluation.aimo_2_inference_server:AIMO2InferenceServer"),
    "aimo3": Competition("aimo3", 0, 99999, None, 9 * 3600.0, 5 * 3600.0, "problem",
                         "/kaggle/input/ai-mathematical-olympiad-progress-prize-3",
                         "kaggle_evaluation.aimo_3_inference_server:AIMO3InferenceServer"),
}


def competition(name: str | Competition) -> Competition:
    """
    >>> competition("aimo2").high, competition("aimo3").high, competition("aimo2").columns
    (999, 99999, ('id', 'question'))
    >>> competition("aimo9")
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: unknown competition 'aimo9' (choose from aimo2, aimo3)
    """
    if isinstance(name, Competition):
        return name
    if name not in COMPETITIONS:
        raise ConfigError(f"unknown competition {name!r} (choose from {', '.join(sorted(COMPETITIONS))})")
    return COMPETITIONS[name]


def competition_config(config: Config, comp: Competition, total_s: float | None = None) -> Config:
    """The config with the competition's answer rules and time limits laid over it.

    The run's total is the competition's (or ``total_s``, e.g. a shorter rehearsal) unless the config asks for
    less; no problem may take longer than the per-call limit minus a margin; the cutoff never lies past the
    total minus the reserve.

    >>> c = competition_config(Config(), competition("aimo2"))
    >>> c.answers.modulus, c.answers.high, c.budget.total_s, c.budget.max_s, c.budget.cutoff_s
    (1000, 999, 18000.0, 900.0, 17700.0)
    >>> competition_config(Config(), competition("aimo3"), total_s=600).budget.cutoff_s
    300.0
    """
    b = config.budget
    total = min(x for x in (b.total_s, comp.total_s if total_s is None else total_s) if x is not None)
    max_s = b.max_s if comp.call_limit_s is None else min(b.max_s, comp.call_limit_s - CALL_MARGIN_S)
    latest = total - b.reserve_s
    cutoff = latest if b.cutoff_s is None else min(b.cutoff_s, latest)
    return config.replace({
        "answers.integer": True, "answers.modulus": comp.modulus, "answers.low": comp.low,
        "answers.high": comp.high, "answers.default": str(comp.default),
        "budget.total_s": total, "budget.max_s": max(max_s, b.min_s), "budget.cutoff_s": max(cutoff, 0.0),
    })

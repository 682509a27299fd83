"""Grading a run: the ballot of every recorded repetition and whether it was right, a run's problems summarised
(overall, per metadata group), and the small statistics reports and sweeps share (Wilson intervals, pass@k).

Pure: the records come in, the summary goes out; reading a run directory and writing its report is
``solver.runlog.report``'s business.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from solver.config import AnswerConfig, Config
from solver.core.state import cast
from solver.types import Ballot, Problem, ProblemResult, Repetition, RepetitionStatus, Voter

MAX_GROUP_VALUES = 12  # a metadata key with more distinct values than this is an identifier, not a group


# ---- small statistics (pure) -------------------------------------------------------------------------------


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion; ``successes`` may be fractional (an expected count).

    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]
    >>> wilson_interval(0, 0)
    (nan, nan)
    """
    if n <= 0:
        return (math.nan, math.nan)
    from scipy.stats import norm  # scipy costs ~0.3 s to import: only when a report is made

    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): chance that k of n samples, c of them right, include a right one.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4), pass_at_k(4, 0, 2), pass_at_k(2, 1, 8)
    (0.25, 1.0, 0.0, 1.0)
    """
    if n <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


# ---- grading (pure) ----------------------------------------------------------------------------------------


class Grader:
    """``is_correct`` under one set of answer rules, remembered per (answer, reference): MATH-style grading
    calls math-verify, which is slow, and a problem's repetitions repeat a handful of answers."""

    def __init__(self, rules: AnswerConfig) -> None:
        self.rules = rules
        self._seen: dict[tuple[str, str], bool] = {}

    def __call__(self, answer: str, reference: str) -> bool:
        from solver.core.answers import is_correct

        key = (answer, reference)
        if key not in self._seen:
            self._seen[key] = is_correct(answer, reference, self.rules)
        return self._seen[key]


@dataclass(frozen=True)
class GradedRepetition:
    """One finished repetition as the vote saw it."""

    index: int
    status: RepetitionStatus
    ballot: Ballot | None  # what it brought to the vote (``solver.core.state.cast``); None: no answer that counts
    correct: bool | None  # None when the reference is unknown; False when it cast no ballot
    duration_s: float
    generated_tokens: int
    executions: int

    @property
    def answer(self) -> str | None:
        return None if self.ballot is None else self.ballot.answer

    @property
    def weight(self) -> float:
        return 0.0 if self.ballot is None else self.ballot.weight


def grade_repetitions(reps: Iterable[Repetition], reference: str | None, voter: Voter,
                      grader: Grader) -> list[GradedRepetition]:
    """The ballot and its correctness for every repetition given (cancelled ones included if passed)."""
    graded: list[GradedRepetition] = []
    for rep in reps:
        ballot = cast(voter, rep)
        if reference is None:
            correct: bool | None = None
        else:
            correct = ballot is not None and grader(ballot.answer, reference)
        graded.append(GradedRepetition(rep.index, rep.status, ballot, correct, rep.duration_s,
                                       rep.generated_tokens, len(rep.executions)))
    return graded


# ---- summaries (pure) --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProblemSummary:
    problem: Problem
    result: ProblemResult | None  # None: the run has no result for it yet (interrupted)
    repetitions: tuple[GradedRepetition, ...]  # finished ones, by index
    correct: bool | None  # of the submitted answer; None when unknown or undecided

    @property
    def rep_accuracy(self) -> float | None:
        """Share of finished repetitions whose own ballot was right."""
        marks = [r.correct for r in self.repetitions if r.correct is not None]
        return sum(marks) / len(marks) if marks else None

    @property
    def any_correct(self) -> bool | None:
        if self.problem.answer is None:
            return None
        return any(r.correct for r in self.repetitions)

    def answer_counts(self) -> list[tuple[str | None, int]]:
        """Ballot answers by count, most common first (ties: first seen); None = no answer."""
        return Counter(r.answer for r in self.repetitions).most_common()

    def statuses(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.repetitions))


@dataclass(frozen=True)
class RunSummary:
    name: str
    config: Config | None
    problems: tuple[ProblemSummary, ...]
    groups: dict[str, list[tuple[str, tuple[ProblemSummary, ...]]]] = field(default_factory=dict)

    @property
    def graded(self) -> tuple[ProblemSummary, ...]:
        return tuple(p for p in self.problems if p.correct is not None)

    @property
    def correct(self) -> int:
        return sum(1 for p in self.graded if p.correct)


def summarise(name: str, config: Config | None, problems: Sequence[Problem], reps: Sequence[Repetition],
              results: Sequence[ProblemResult], voter: Voter, rules: AnswerConfig) -> RunSummary:
    """Grade every problem of a run. Problems known only from repetitions or results get a bare record."""
    grader = Grader(rules)
    known = {p.id: p for p in problems}
    finished: dict[str, list[Repetition]] = {}
    for rep in reps:
        if rep.finished:
            finished.setdefault(rep.problem_id, []).append(rep)
    by_result = {r.problem_id: r for r in results}
    order = list(dict.fromkeys([*known, *by_result, *finished]))
    summaries = []
    for pid in order:
        problem = known.get(pid, Problem(pid, ""))
        result = by_result.get(pid)
        graded = grade_repetitions(sorted(finished.get(pid, []), key=lambda r: r.index), problem.answer, voter,
                                   grader)
        correct = None if result is None or problem.answer is None else grader(result.answer, problem.answer)
        summaries.append(ProblemSummary(problem, result, tuple(graded), correct))
    return RunSummary(name, config, tuple(summaries), group_by_meta(summaries))


def group_by_meta(problems: Sequence[ProblemSummary]) -> dict[str, list[tuple[str, tuple[ProblemSummary, ...]]]]:
    """Problems per value of every metadata key that splits the set into a few groups (MATH level, subject, ...).

    >>> ps = [ProblemSummary(Problem(str(i), "t", None, {"level": str(i % 2), "url": str(i)}), None, (), None)
    ...       for i in range(4)]
    >>> [(key, [(value, len(members)) for value, members in groups]) for key, groups in group_by_meta(ps).items()]
    [('level', [('0', 2), ('1', 2)])]
    """
    keys = sorted({k for p in problems for k in p.problem.meta})
    out: dict[str, list[tuple[str, tuple[ProblemSummary, ...]]]] = {}
    for key in keys:
        values = [p.problem.meta.get(key, "-") for p in problems]
        distinct = list(dict.fromkeys(values))
        if 2 <= len(distinct) <= MAX_GROUP_VALUES and len(distinct) < len(problems):
            ordered = sorted(distinct, key=_natural)
            out[key] = [(v, tuple(p for p, pv in zip(problems, values) if pv == v)) for v in ordered]
    return out


def _natural(value: str) -> tuple[int, float, str]:
    """Numbers first in numeric order, then text (so level 10 follows level 9)."""
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)

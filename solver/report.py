"""Accuracy report of one run: overall, per metadata group, per problem, and why the wrong ones went wrong.

The pure core grades recorded repetitions (``grade_repetitions``) and summarises a run (``summarise``); the edges
read a run directory (``load_summary``) and write markdown (``render_report``, ``write_report``). The sweep
reuses the grading and the interval helpers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from solver.config import AnswerConfig, Config
from solver.files import atomic_write
from solver.core.state import cast
from solver.types import Ballot, Problem, ProblemResult, Repetition, RepetitionStatus, Voter

if TYPE_CHECKING:
    from solver.runlog import RunRecords

MAX_GROUP_VALUES = 12  # a metadata key with more distinct values than this is an identifier, not a group
EXCERPT_CHARS = 240  # problem text shown for a wrong problem


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


# ---- rendering (pure) --------------------------------------------------------------------------------------


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table; pipes and newlines inside cells are escaped.

    >>> print(markdown_table(["a", "b"], [[1, "x|y"]]))
    | a | b |
    |---|---|
    | 1 | x\\|y |
    """
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f} %"


def _accuracy_cell(correct: int, n: int) -> str:
    if n == 0:
        return "-"
    low, high = wilson_interval(correct, n)
    return f"{correct}/{n} = {_pct(correct / n)} [{100 * low:.0f}–{100 * high:.0f}]"


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _group_row(label: str, members: Sequence[ProblemSummary]) -> list[object]:
    graded = [p for p in members if p.correct is not None]
    right = sum(1 for p in graded if p.correct)
    return [label, len(members), _accuracy_cell(right, len(graded)),
            _pct(_mean(p.rep_accuracy for p in members)),
            _pct(_mean(None if p.any_correct is None else float(p.any_correct) for p in members)),
            sum(len(p.repetitions) for p in members)]


def _votes_cell(summary: ProblemSummary, top: int = 3) -> str:
    counts = summary.answer_counts()
    shown = [f"{'∅' if a is None else a}×{n}" for a, n in counts[:top]]
    return ", ".join(shown) + (" …" if len(counts) > top else "")


def _config_line(config: Config | None) -> str:
    if config is None:
        return "config: not recorded"
    stop = "+".join(config.stop.stoppers) or "none"
    return (f"preset `{config.preset}` · model `{config.engine.model or 'tiny'}` · prompt `{config.prompt.template}`"
            f" · T={config.sampling.temperature} · reps {config.solve.reps} · workers {config.solve.workers}"
            f" · voter `{config.vote.voter}` · stop `{stop}`")


def render_report(summary: RunSummary) -> str:
    """The report as markdown."""
    problems = summary.problems
    graded = summary.graded
    reps = sum(len(p.repetitions) for p in problems)
    seconds = sum(p.result.duration_s for p in problems if p.result is not None)
    tokens = sum(r.generated_tokens for p in problems for r in p.repetitions)
    executions = sum(r.executions for p in problems for r in p.repetitions)
    out = [f"# Run report: {summary.name}", "", _config_line(summary.config), ""]
    out += ["## Summary", "", markdown_table(
        ["problems", "graded", "majority accuracy [95 % CI]", "mean repetition accuracy", "pass@n",
         "repetitions", "generated tokens", "code runs", "solve time"],
        [[len(problems), len(graded), _accuracy_cell(summary.correct, len(graded)),
          _pct(_mean(p.rep_accuracy for p in problems)),
          _pct(_mean(None if p.any_correct is None else float(p.any_correct) for p in problems)),
          reps, tokens, executions, f"{seconds:.1f} s"]]), ""]
    out += ["Majority accuracy is the submitted (voted) answer; mean repetition accuracy the share of single "
            "repetitions that were right; pass@n whether any repetition was right. Intervals: Wilson, 95 %.", ""]
    for key, groups in summary.groups.items():
        out += [f"## By {key}", "", markdown_table(
            [key, "problems", "majority accuracy [95 % CI]", "mean repetition accuracy", "pass@n", "repetitions"],
            [_group_row(value, members) for value, members in groups]), ""]
    out += ["## Problems", "", markdown_table(
        ["id", "reference", "answer", "right", "answers (∅ = none)", "reps", "stopped by", "time", "tokens"],
        [[p.problem.id, p.problem.answer if p.problem.answer is not None else "?",
          p.result.answer if p.result else "-", {True: "✓", False: "✗", None: "·"}[p.correct], _votes_cell(p),
          len(p.repetitions), p.result.stopped_by if p.result else "unfinished",
          f"{p.result.duration_s:.1f} s" if p.result else "-", sum(r.generated_tokens for r in p.repetitions)]
         for p in problems]), ""]
    wrong = [p for p in problems if p.correct is False]
    if wrong:
        out += ["## Wrong problems", ""]
        for p in wrong:
            out += _wrong_section(p)
    unfinished = [p.problem.id for p in problems if p.result is None]
    if unfinished:
        out += ["## Unfinished", "", "No result recorded (the run was interrupted): " + ", ".join(unfinished), ""]
    return "\n".join(out).rstrip() + "\n"


def _wrong_section(p: ProblemSummary) -> list[str]:
    assert p.result is not None  # only decided problems are graded wrong
    text = " ".join(p.problem.text.split())
    excerpt = text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"
    rows = [["no answer" if a is None else a, n, "✓" if a is not None and any(
        r.correct for r in p.repetitions if r.answer == a) else ""] for a, n in p.answer_counts()]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(p.statuses().items()))
    right = sum(1 for r in p.repetitions if r.correct)
    top = max((n for a, n in p.answer_counts() if a is not None), default=0)
    if right and right == top:
        verdict = (f"{right} of {len(p.repetitions)} repetitions were right, tied for the most votes, and lost "
                   f"the tie-break")
    elif right:
        verdict = f"{right} of {len(p.repetitions)} repetitions were right but lost the vote"
    else:
        verdict = "no repetition found the reference answer" if p.repetitions else "no repetition finished"
    return [f"### {p.problem.id}: reference {p.problem.answer}, submitted {p.result.answer}", "",
            f"> {excerpt}" if excerpt else "> (problem text not recorded)", "",
            markdown_table(["answer", "repetitions", "right"], rows), "",
            f"{verdict}; statuses: {statuses or 'none'}; stopped by {p.result.stopped_by}.", ""]


# ---- edges -------------------------------------------------------------------------------------------------


def summarise_records(name: str, records: RunRecords) -> RunSummary:
    """Grade a run's records (as read from its log, or as a running session holds them)."""
    from solver.core.voting import make_voter

    config = records.config or Config()
    voter = make_voter(config.vote, config.answers)
    return summarise(name, records.config, records.problems, records.repetitions, records.results, voter,
                     config.answers)


def load_summary(run_dir: str | Path) -> RunSummary:
    """Read and grade a run directory (raises ``LogError`` with a one-line message when it cannot be read)."""
    from solver.runlog import read_log

    records = read_log(Path(run_dir))
    name = Path(run_dir).name if Path(run_dir).is_dir() else Path(run_dir).parent.name
    return summarise_records(name, records)


def write_report(run_dir: str | Path, out: str | Path | None = None) -> str:
    """Render the report of ``run_dir``; also write it to ``out`` (atomically) when given. Returns the markdown."""
    text = render_report(load_summary(run_dir))
    if out is not None:
        atomic_write(Path(out), text)
    return text

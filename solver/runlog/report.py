"""The accuracy report of one run, as markdown: overall, per metadata group, per problem, and why the wrong ones went
wrong; and the markdown table every written report uses.

The grading is ``solver.core.grading``'s (pure); here its summary is rendered (``render_report``), and a run
directory is read and its report written (``load_summary``, ``write_report``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from solver.config import Config
from solver.core.grading import ProblemSummary, RunSummary, summarise, wilson_interval
from solver.files import atomic_write
from solver.runlog.reading import RunRecords, read_log
from solver.types import Voter

EXCERPT_CHARS = 240  # problem text shown for a wrong problem


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


def summarise_records(name: str, records: RunRecords, voter: Voter | None = None) -> RunSummary:
    """Grade a run's records (as read from its log, or as a running session holds them). ``voter``: the one the
    run voted with (a running session's); None for a run read back from its folder, whose config names it."""
    config = records.config or Config()
    if voter is None:
        from solver.core.voting import make_voter

        voter = make_voter(config.vote, config.answers)
    return summarise(name, records.config, records.problems, records.repetitions, records.results, voter,
                     config.answers)


def load_summary(run_dir: str | Path) -> RunSummary:
    """Read and grade a run directory (raises ``LogError`` with a one-line message when it cannot be read)."""
    records = read_log(Path(run_dir))
    name = Path(run_dir).name if Path(run_dir).is_dir() else Path(run_dir).parent.name
    return summarise_records(name, records)


def write_report(run_dir: str | Path, out: str | Path | None = None) -> str:
    """Render the report of ``run_dir``; also write it to ``out`` (atomically) when given. Returns the markdown."""
    text = render_report(load_summary(run_dir))
    if out is not None:
        atomic_write(Path(out), text)
    return text

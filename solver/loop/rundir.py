"""A run directory while a run writes it: ``config.yaml`` and ``meta.json`` (written once, when the run is created),
``log.jsonl`` (problems, repetitions as they finish, results; each line fsynced), and at the end ``answers.csv``
(id, answer) and ``report.md``, each written atomically and rendered from the records the log holds in memory
(never read back). ``solver solve``, the Ray driver and the Kaggle predictor all write their runs through this
session; its methods fsync, so code on an event loop calls them in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Sequence
from pathlib import Path

from solver.config import Config
from solver.files import atomic_write
from solver.runlog import LOG_NAME, RunLog, RunRecords, render_report, summarise_records
from solver.types import Problem, ProblemResult, Repetition, Voter

ANSWERS_NAME = "answers.csv"
REPORT_NAME = "report.md"


class RunSession:
    """One session of a run over its directory: ``open`` a new run or resume one, then ``close``."""

    def __init__(self, log: RunLog, config: Config, voter: Voter, *, created: bool) -> None:
        self.log = log
        self.config = config  # as saved in the run directory
        self.voter = voter  # the run's: the one that voted its answers, which report.md grades by too
        self.created = created  # this session made the directory (a failed start may remove it)

    @classmethod
    def open(cls, run_dir: Path, config: Config | None = None, *, voter: Voter, resume: bool = False,
             records: RunRecords | None = None) -> RunSession:
        """The one way a run directory is opened: created for ``config`` (a new run), or with ``resume``
        continued with the config it saved (its decided problems and finished repetitions kept; ``records`` is that
        run as the caller has just read it, if it has). ``voter``: the one the run's solvers vote with (its rules',
        ``solver.core.state.Rules``), so ``answers.csv`` and ``report.md`` come from one vote. A ``LogError`` (one
        line) when it cannot be."""
        run_dir = Path(run_dir)
        if resume:
            log, saved = RunLog.resume(run_dir, records)
            return cls(log, saved, voter, created=False)
        if config is None:
            raise ValueError("a new run directory needs the run's config")
        existed = run_dir.exists()
        return cls(RunLog.create(run_dir, config), config, voter, created=not existed)

    @property
    def run_dir(self) -> Path:
        return self.log.run_dir

    # -- what the run holds --

    def add_problems(self, problems: Sequence[Problem]) -> None:
        """Record each problem's text and reference answer (once: a resumed run has them already)."""
        for problem in problems:
            self.log.append_problem(problem)

    def todo(self, problems: Sequence[Problem]) -> list[Problem]:
        """The problems not decided yet, in order."""
        decided = self.log.results()
        return [p for p in problems if p.id not in decided]

    def done(self, problem_id: str) -> list[Repetition]:
        """The problem's finished repetitions so far (an earlier session's, or one lost actor's)."""
        return self.log.completed().get(problem_id, [])

    def results(self, problems: Sequence[Problem]) -> list[ProblemResult]:
        """The results of the problems decided (now or in an earlier session), in problem order."""
        decided = self.log.results()
        return [decided[p.id] for p in problems if p.id in decided]

    @property
    def spent_s(self) -> float:
        """Wall seconds earlier sessions of this run spent (0 for a new run): a resumed run's budget goes on from
        there."""
        return self.log.spent_s

    # -- writing (each call fsyncs: off the event loop) --

    def record(self, rep: Repetition) -> None:
        """A repetition finished or was cancelled: on disk before it is voted."""
        self.log.append(rep)

    def decide(self, result: ProblemResult) -> None:
        self.log.append_result(result)

    def write_outputs(self, problems: Sequence[Problem]) -> None:
        """``answers.csv`` and ``report.md`` for the problems decided so far, from the records in memory: the
        answers the run's votes gave, and the report's ballots cast by the voter that made those votes."""
        records = self.log.records()
        atomic_write(self.run_dir / ANSWERS_NAME, answers_csv(self.results(problems)))
        atomic_write(self.run_dir / REPORT_NAME,
                     render_report(summarise_records(self.run_dir.name, records, self.voter)))

    def close(self) -> None:
        self.log.close()

    def discard_if_empty(self) -> None:
        """A run that failed before its first repetition leaves nothing behind (its directory was new)."""
        self.close()
        log = self.run_dir / LOG_NAME
        if self.created and (not log.exists() or b'"repetition"' not in log.read_bytes()):
            shutil.rmtree(self.run_dir, ignore_errors=True)


def answers_csv(results: Sequence[ProblemResult]) -> str:
    """
    >>> print(answers_csv([ProblemResult("p1", "42", {}, 1, 1, "max_reps", 1.0, 10)]), end="")
    id,answer
    p1,42
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "answer"])
    for result in results:
        writer.writerow([result.problem_id, result.answer])
    return buffer.getvalue()

"""The demo's progress screen: the latest problems (their votes, how many repetitions ran, what ended them) over
running totals (right so far, repetitions run against running every one, seconds).

On a terminal it is a rich live view that keeps its last state on screen; on a pipe (a log, a test) it prints
one line per finished problem instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from solver.loop.problem import SolveEvent
from solver.types import ProblemResult

RECENT_ROWS = 10  # problems shown at once: the view stays one screen for 88 problems


def votes_text(result: ProblemResult) -> str:
    """The final tally, most votes first, with the repetitions that gave no answer as ∅.

    >>> r = ProblemResult("p", "2", {"3": 3.0, "2": 6.0}, 17, 17, "hold:0.9", 0.4, 0)
    >>> votes_text(r)
    '2×6 3×3 ∅×8'
    >>> votes_text(ProblemResult("p", "0", {}, 4, 4, "max_reps", 4.1, 96))
    '∅×4'
    """
    parts = [f"{answer}×{weight:g}" for answer, weight in sorted(result.votes.items(), key=lambda kv: -kv[1])]
    # Repetitions whose ballot weighs 1 (majority, code_first): the ones not in the tally gave no answer.
    unanswered = result.repetitions - round(sum(result.votes.values()))
    if unanswered > 0:
        parts.append(f"∅×{unanswered}")
    return " ".join(parts)


def mark(result: ProblemResult) -> str:
    return "" if result.correct is None else ("✓" if result.correct else "✗")


class Totals:
    """What the finished problems add up to."""

    def __init__(self) -> None:
        self.done = 0
        self.graded = 0
        self.right = 0
        self.launched = 0  # repetitions started (cancelled ones included): what the run paid for
        self.ceiling = 0  # repetitions the same problems launch with every repetition run
        self.stopped_early = 0  # problems a stopping rule ended before the cap

    def add(self, result: ProblemResult, target: int) -> None:
        self.done += 1
        self.graded += result.correct is not None
        self.right += bool(result.correct)
        self.launched += result.launched
        self.ceiling += target
        self.stopped_early += result.launched < target

    def line(self, total: int, seconds: float) -> str:
        """
        >>> t = Totals(); t.add(ProblemResult("p", "2", {"2": 3.0}, 3, 3, "hold:0.9", 0.1, 0, True), 30)
        >>> t.line(88, 2.04)
        '1/88 problems · right 1/1 (100.0 %) · ran 3 of 30 repetitions, 27 saved by stopping · 2.0 s'
        """
        right = f"right {self.right}/{self.graded} ({100 * self.right / self.graded:.1f} %)" if self.graded else ""
        saved = self.ceiling - self.launched
        ran = f"ran {self.launched:,} of {self.ceiling:,} repetitions"
        if saved:
            ran += f", {saved:,} saved by stopping"
        return " · ".join(p for p in (f"{self.done}/{total} problems", right, ran, f"{seconds:.1f} s") if p)


class DemoProgress:
    """A ``SolveEvent`` listener that shows one part of the demo."""

    def __init__(self, total: int, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.console = console
        self.clock = clock
        self.started = clock()
        self.ended: float | None = None
        self.totals = Totals()
        self.rows: dict[str, SolveEvent] = {}
        self._live: Live | None = None

    def __enter__(self) -> DemoProgress:
        self.started = self.clock()
        if self.console.is_terminal:
            # Live renders this object on every refresh (``__rich__``), so the clock moves between events too.
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.ended = self.clock()
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
        else:
            self.console.print(self.totals.line(self.total, self.seconds), highlight=False)

    @property
    def seconds(self) -> float:
        """Since the view opened, until it closed."""
        return (self.ended if self.ended is not None else self.clock()) - self.started

    def __call__(self, event: SolveEvent) -> None:
        self.rows.pop(event.problem_id, None)
        self.rows[event.problem_id] = event  # the latest event last: the view shows the newest rows
        if event.kind == "end" and event.result is not None:
            self.totals.add(event.result, event.target)
            if self._live is None:
                r = event.result
                self.console.print(f"[{self.totals.done}/{self.total}] {r.problem_id}: {r.answer} {mark(r)} · votes "
                                   f"{votes_text(r)} · ran {r.launched}/{event.target}, {r.stopped_by} · "
                                   f"{r.duration_s:.1f} s", highlight=False, markup=False)
        if self._live is not None:
            self._live.refresh()

    def __rich__(self) -> Group:
        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("problem", "ran", "votes (∅ = no answer)", "answer", "ended by"):
            table.add_column(column)
        for event in list(self.rows.values())[-RECENT_ROWS:]:
            r = event.result
            if r is None:
                table.add_row(event.problem_id, f"{event.launched}/{event.target}",
                              f"leader {event.leader}" if event.leader else "", "", "running…")
            else:
                style = "green" if r.correct else ("red" if r.correct is False else "")
                table.add_row(event.problem_id, f"{r.launched}/{event.target}", votes_text(r),
                              Text(f"{r.answer} {mark(r)}", style=style), r.stopped_by)
        return Group(table, Text(self.totals.line(self.total, self.seconds), style="bold"))

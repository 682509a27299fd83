"""Live progress of a run: one row per problem with repetitions done and the answer leading the vote."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from solver.loop.problem import SolveEvent


class LiveProgress:
    """A rich live table on a terminal; on a pipe (CI, logs) one line per finished problem instead."""

    def __init__(self, total: int, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.total = total
        self.rows: dict[str, SolveEvent] = {}
        self._live: Live | None = None

    def __enter__(self) -> LiveProgress:
        if self.console.is_terminal:
            self._live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)

    def __call__(self, event: SolveEvent) -> None:
        self.rows[event.problem_id] = event
        if self._live is not None:
            self._live.update(self._table())
        elif event.kind == "end" and event.result is not None:
            r = event.result
            mark = "" if r.correct is None else (" correct" if r.correct else " wrong")
            self.console.print(f"[{len(self._ended())}/{self.total}] {r.problem_id}: answer {r.answer} "
                               f"({r.repetitions} reps, {r.stopped_by}, {r.duration_s:.1f} s){mark}",
                               highlight=False)

    def _ended(self) -> list[SolveEvent]:
        return [e for e in self.rows.values() if e.kind == "end"]

    def _table(self) -> Table:
        table = Table(title=f"solver: {len(self._ended())}/{self.total} problems")
        for column in ("problem", "reps done", "in flight", "leader", "status"):
            table.add_column(column)
        for event in self.rows.values():
            result = event.result
            status = "running" if result is None else result.stopped_by
            if result is not None and result.correct is not None:
                status += " ✓" if result.correct else " ✗"
            table.add_row(event.problem_id, f"{event.finished}/{event.target}",
                          str(max(0, event.launched - event.finished)) if result is None else "0",
                          event.leader or "-", status)
        return table

"""Appending to a run log, so that a killed run resumes without loss: every line is written with a single
``os.write`` and fsynced before ``append`` returns, so a SIGKILL can at worst leave one torn LAST line, which
readers ignore and ``RunLog.resume`` cuts off before appending. ``config.yaml`` and ``meta.json`` are written only
by the run whose exclusive create of ``log.jsonl`` succeeded. The log also keeps what it holds in memory (for
resume, for the report at the end), so nothing reads the file twice.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from solver.config import Config
from solver.errors import first_line
from solver.files import fsync_dir
from solver.runlog.codec import RecordType, encode_line
from solver.runlog.files import (CONFIG_NAME, LOG_NAME, LogError, environment_meta, note_resume, read_config,
                                 read_meta, session_starts, write_config, write_meta)
from solver.runlog.reading import RunRecords, finished_by_problem, read_log, spent_seconds
from solver.types import Problem, ProblemResult, Repetition


class RunLog:
    """The append side of a run log. Use ``create`` for a new run and ``resume`` to continue a killed one.
    Appends may come from worker threads (the solve loop fsyncs off its event loop)."""

    def __init__(self, run_dir: Path, fd: int, records: RunRecords | None = None) -> None:
        self.run_dir = run_dir
        self.path = run_dir / LOG_NAME
        self._fd: int | None = fd
        self._lock = threading.Lock()
        self._problems: dict[str, Problem] = {}
        self._reps: list[Repetition] = []
        self._keys: set[tuple[str, int]] = set()  # (problem id, index) of finished repetitions on disk
        self._results: dict[str, ProblemResult] = {}
        self.spent_s = 0.0  # wall seconds earlier sessions of this run spent (see spent_seconds); 0 for a new run
        self.config: Config | None = records.config if records is not None else None
        if records is not None:
            for problem in records.problems:
                self._problems.setdefault(problem.id, problem)
            for rep in records.repetitions:
                self._remember(rep)
            for result in records.results:
                self._results.setdefault(result.problem_id, result)

    @classmethod
    def create(cls, run_dir: Path, config: Config) -> RunLog:
        run_dir = Path(run_dir)
        taken = f"{run_dir} already holds a run log; resume it or choose another directory"
        if (run_dir / LOG_NAME).exists():
            raise LogError(taken)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            # O_EXCL first: of two runs started on one directory only the one that creates the log goes on to
            # write config.yaml and meta.json, so the other cannot overwrite the first run's files.
            fd = os.open(run_dir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError as exc:
            raise LogError(taken) from exc
        except OSError as exc:
            raise LogError(f"cannot create run directory {run_dir}: {exc.strerror}") from exc
        try:
            write_config(run_dir, config)
            write_meta(run_dir, environment_meta())
        except OSError as exc:
            os.close(fd)
            raise LogError(f"cannot write {run_dir}: {exc.strerror}") from exc
        fsync_dir(run_dir)
        log = cls(run_dir, fd)
        log.config = config
        return log

    @classmethod
    def resume(cls, run_dir: Path, records: RunRecords | None = None) -> tuple[RunLog, Config]:
        """Reopen a run for appending, cutting off a torn last line first; returns the log and its saved config.
        ``records`` is the run as ``read_log(run_dir, allow_empty=True)`` read it just before, when the caller
        has it (the log is then not read again)."""
        run_dir = Path(run_dir)
        if not (run_dir / CONFIG_NAME).is_file():
            raise LogError(f"{run_dir} is not a run directory (no {CONFIG_NAME})")
        path = run_dir / LOG_NAME
        if not path.is_file():  # killed between creating the directory and its log: nothing to keep
            records = RunRecords([], [], read_config(run_dir), path=path, meta=read_meta(run_dir))
        elif records is None or path.stat().st_size != _size(records):
            records = read_log(run_dir, allow_empty=True)
        config = records.config
        assert config is not None  # config.yaml exists, and a damaged one raised
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LogError(f"cannot open {path}: {exc.strerror}") from exc
        try:
            if records.torn:
                # Drop the partial line, or terminate a whole one that lost only its newline.
                os.ftruncate(fd, records.intact_bytes)
                if records.intact_bytes and _last_byte(path, records.intact_bytes) != b"\n":
                    _write_all(fd, b"\n")
                os.fsync(fd)
            note_resume(run_dir, records.meta)
        except (LogError, OSError) as exc:
            os.close(fd)
            if isinstance(exc, LogError):
                raise
            raise LogError(f"cannot repair {path}: {first_line(exc)}") from exc
        log = cls(run_dir, fd, records)
        log.config = config
        log.spent_s = spent_seconds(session_starts(records.meta), records.repetitions)
        return log, config

    # -- appends --

    def append_problem(self, problem: Problem) -> None:
        """Record a problem's text and reference answer once (a second call for the same id writes nothing)."""
        self._append_once(self._problems, problem.id, problem, "problem")

    def append(self, rep: Repetition) -> None:
        """Record a repetition durably. A finished repetition already on disk under the same (problem, index)
        is not written again, so the log never holds duplicates whatever the caller does after a resume."""
        with self._lock:
            if rep.finished and (rep.problem_id, rep.index) in self._keys:
                return
            self._write(encode_line("repetition", rep))
            self._remember(rep)

    def append_result(self, result: ProblemResult) -> None:
        """Record a problem's result once (a second call for the same problem writes nothing)."""
        self._append_once(self._results, result.problem_id, result, "result")

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what is already there --

    def completed(self) -> dict[str, list[Repetition]]:
        """Finished (non-cancelled) repetitions per problem id so far, one per index."""
        with self._lock:
            return finished_by_problem(self._reps)

    def results(self) -> dict[str, ProblemResult]:
        with self._lock:
            return dict(self._results)

    def problems(self) -> dict[str, Problem]:
        with self._lock:
            return dict(self._problems)

    def records(self) -> RunRecords:
        """Everything the log holds now (what it read on resume and what was appended since), in file order."""
        with self._lock:
            return RunRecords(list(self._reps), list(self._results.values()), self.config,
                              list(self._problems.values()), self.path)

    # -- internals --

    def _append_once(self, table: dict[str, Any], key: str, record: Any, kind: RecordType) -> None:
        """Write ``record`` as a ``kind`` line unless ``table`` (what the log holds) has ``key`` already: a
        problem's text and its result are each on disk once, however often a caller (a resumed run, a re-queued
        problem) records them."""
        with self._lock:
            if key in table:
                return
            self._write(encode_line(kind, record))
            table[key] = record

    def _remember(self, rep: Repetition) -> None:
        self._reps.append(rep)
        if rep.finished:
            self._keys.add((rep.problem_id, rep.index))

    def _write(self, line: bytes) -> None:
        if self._fd is None:
            raise LogError(f"run log {self.path} is closed")
        try:
            _write_all(self._fd, line)
            os.fsync(self._fd)
        except OSError as exc:
            raise LogError(f"cannot write {self.path}: {exc.strerror}") from exc


def _size(records: RunRecords) -> int:
    """The log's size when ``records`` were read: the intact prefix, plus the torn rest (unknown: -1)."""
    return records.intact_bytes if not records.torn else -1


def _last_byte(path: Path, end: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(end - 1)
        return handle.read(1)


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (rare on regular files); loop until every byte is out."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]

"""Reading a run log: its lines parsed (a torn last line, the trace of a killed write, is dropped; damage anywhere
else is a ``LogError``), its records decoded, and what a run needs of them (finished repetitions per problem, the
time earlier sessions spent)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solver.config import Config
from solver.runlog.codec import RECORDS, SCHEMA, decode
from solver.runlog.files import LOG_NAME, LogError, read_config, read_meta
from solver.types import Problem, ProblemResult, Repetition


@dataclass(frozen=True)
class RunRecords:
    """Everything one log holds, in file order."""

    repetitions: list[Repetition]  # every repetition line, cancelled ones included
    results: list[ProblemResult]
    config: Config | None  # from config.yaml beside the log, when present
    problems: list[Problem] = field(default_factory=list)
    path: Path | None = None  # the log file read
    meta: dict[str, Any] | None = None  # meta.json beside the log, when present
    intact_bytes: int = 0  # the length of the prefix made of whole, valid lines
    torn: bool = False  # a partial last line follows that prefix

    def finished(self) -> dict[str, list[Repetition]]:
        """Finished (non-cancelled) repetitions per problem id, one per index, in order of index."""
        return finished_by_problem(self.repetitions)


def finished_by_problem(reps: Iterable[Repetition]) -> dict[str, list[Repetition]]:
    """Finished repetitions per problem, the first record of each (problem, index) kept, sorted by index.

    >>> mk = lambda i, s: Repetition("p", i, 0, s, (), (), 0.0, 1.0)
    >>> out = finished_by_problem([mk(1, "done"), mk(0, "cancelled"), mk(0, "length"), mk(1, "done")])
    >>> [(r.index, r.status) for r in out["p"]]
    [(0, 'length'), (1, 'done')]
    """
    seen: dict[str, dict[int, Repetition]] = {}
    for rep in reps:
        if rep.finished:
            seen.setdefault(rep.problem_id, {}).setdefault(rep.index, rep)
    return {pid: [by_index[i] for i in sorted(by_index)] for pid, by_index in seen.items()}


def spent_seconds(session_starts: Iterable[float], reps: Iterable[Repetition]) -> float:
    """Wall seconds earlier sessions of a run spent: for each session (from its start, unix time, to the next
    one's), from its start to the end of the last repetition that started in it. A session that logged no
    repetition counts 0: the log cannot say how long it lived (a lower bound, as a budget wants).

    >>> mk = lambda start, dur: Repetition("p", 0, 0, "done", (), (), start, dur)
    >>> spent_seconds([1000.0, 5000.0], [mk(1010, 100), mk(1200, 50), mk(5020, 30)])
    300.0
    >>> spent_seconds([1000.0], [])
    0.0
    """
    starts = sorted(session_starts)
    ends = [float("-inf")] * len(starts)
    for rep in reps:
        session = next((i for i in range(len(starts) - 1, -1, -1) if rep.started_at >= starts[i]), None)
        if session is not None:
            ends[session] = max(ends[session], rep.started_at + rep.duration_s)
    return float(sum(max(0.0, end - start) for start, end in zip(starts, ends) if end != float("-inf")))


@dataclass(frozen=True)
class _Parsed:
    lines: list[dict[str, Any]]
    good_bytes: int  # length of the prefix made of whole, valid lines
    torn: bool  # a partial last line follows the good prefix


def parse(data: bytes, where: Path) -> _Parsed:
    """Split a log into records; a broken last line is torn (dropped), a broken line elsewhere is an error.

    >>> p = parse(b'{"type": "result", "schema": 1}\\n{"type": "rep', Path("x"))
    >>> len(p.lines), p.good_bytes, p.torn
    (1, 32, True)
    >>> parse(b'{"ty\\n{"type": "result", "schema": 1}\\n', Path("x"))
    Traceback (most recent call last):
    ...
    solver.runlog.files.LogError: x line 1 is not valid JSON: the log is damaged before its last line
    """
    chunks = data.split(b"\n")
    # A file that ends with "\n" splits into [..., b""]; anything else in the last slot is an unterminated line.
    lines: list[dict[str, Any]] = []
    offset = 0
    for number, chunk in enumerate(chunks, start=1):
        last = number == len(chunks)
        if last and chunk == b"":
            break
        try:
            record = json.loads(chunk.decode("utf-8"))
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except ValueError:
            if last or (number == len(chunks) - 1 and chunks[-1] == b""):
                return _Parsed(lines, offset, True)
            raise LogError(f"{where} line {number} is not valid JSON: the log is damaged before its last line")
        if record.get("schema") != SCHEMA:
            raise LogError(f"{where} line {number} has schema {record.get('schema')!r}; "
                           f"this solver reads schema {SCHEMA} (a log from another version)")
        if last:
            # Whole JSON but no newline: the write of this line ended exactly before its "\n". Keep it.
            lines.append(record)
            return _Parsed(lines, offset + len(chunk), True)
        lines.append(record)
        offset += len(chunk) + 1
    return _Parsed(lines, offset, False)


def records(parsed: _Parsed, where: Path) -> tuple[list[Problem], list[Repetition], list[ProblemResult]]:
    problems: list[Problem] = []
    reps: list[Repetition] = []
    results: list[ProblemResult] = []
    for number, line in enumerate(parsed.lines, start=1):
        kind = line.get("type")
        if kind not in RECORDS:
            raise LogError(f"{where} line {number} has unknown record type {kind!r}")
        try:
            record = decode(RECORDS[kind], line)
        except (KeyError, TypeError, ValueError) as exc:
            raise LogError(f"{where} line {number} is not a valid {kind} record ({exc!r})") from exc
        if isinstance(record, Repetition):
            reps.append(record)
        elif isinstance(record, ProblemResult):
            results.append(record)
        else:
            problems.append(record)
    return problems, reps, results


def log_path(run_dir_or_file: Path) -> Path:
    path = Path(run_dir_or_file)
    return path / LOG_NAME if path.is_dir() else path


def read_log(run_dir_or_file: Path, *, allow_empty: bool = False) -> RunRecords:
    """Read a run log (a run dir or its log.jsonl). A torn last line is ignored; other damage is a LogError.

    An empty log is an error unless ``allow_empty`` (a run killed before its first record can still resume)."""
    path = log_path(Path(run_dir_or_file))
    if not path.is_file():
        raise LogError(f"no run log at {path}")
    meta = read_meta(path.parent)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LogError(f"cannot read {path}: {exc.strerror}") from exc
    parsed = parse(data, path)
    if not parsed.lines and not allow_empty:
        raise LogError(f"run log {path} holds only a torn line (the run was killed while writing its first record)"
                       if parsed.torn else f"run log {path} is empty")
    problems, reps, results = records(parsed, path)
    return RunRecords(repetitions=reps, results=results, config=read_config(path.parent), problems=problems,
                      path=path, meta=meta, intact_bytes=parsed.good_bytes, torn=parsed.torn)

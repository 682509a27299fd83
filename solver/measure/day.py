"""A Kaggle day rehearsed at full length on one engine (``solver day``, ``benchmarks/day.py``): recorded attempts
through the Kaggle path, problem after problem, one device call after another.

Each problem of the slice goes through the real ``KagglePredictor``, called once per problem as the gateway calls
it: its ``BudgetManager`` hands the problem its deadline, its ``EngineSupervisor`` builds the engine on the first
call and rebuilds it after a death. The engine is the preset's, made to follow recorded gpt-oss-120b attempts
(``solver.recordings.replay_on_engine``: each request decodes the recorded number of tokens, then a scripted call or
answer); each tool call answers with the recorded output after the seconds it was measured to take (carried with the
extract: ``benchmarks/extract_attempts.py --measure-tools``; ``solver.recordings.RecordedCalls``); the config's own
limits end an attempt where they end a live one (``Caps.at_limit`` "length": 60k tokens per attempt, 32k per
request, 65k context in ``h100-gptoss``). ``--rules`` says what acts:

  kaggle  the preset's rules as on Kaggle: the first-answer cut, the stopper (``agree:4``) cancelling the rest, and
          the budget's clamp with each problem's deadline. The day is the preset's scaled to the slice (total,
          reserve and cutoff times N / ``budget.problems``; the per-problem floor and cap as they are);
  stop    the same without deadlines (a 5-hour day for the slice): the preset variants' comparison;
  none    every attempt to its end.

One device call is one command, the same for every call of a slice:

- one engine start; problems play in order while the time model says the next one ends before ``--until`` seconds
  after the process started (its prediction with the rules and its deadline, and an engine start where one is
  due, times ``--safety``); ``--max-problems`` caps a call;
- each finished problem goes to ``--json`` as it finishes (atomically); ``--resume`` continues that file with the
  same plan and seeds (the day's clock goes on from where the last call stopped; a problem interrupted mid-way is
  played again whole); past ``--hard-stop`` the problem in flight is abandoned, its partial timeline kept, every
  process of the run killed, exit 3;
- ``--kill-engine-at P:S`` kills vLLM's engine core process (V1 runs it in a child process) S seconds into problem
  P (an id, or its position in the slice): the supervisor rebuilds the engine at the next problem, and the JSON
  says how the problem in flight was answered, whether the run log lost anything, and the rebuild's seconds;
- ``--label L --table T``: the run's row, labelled, goes into one table JSON (a variant per row, printed together);
- ``--estimate``: the time model's prediction per problem and how the slice splits into calls; starts nothing.

Per problem the JSON and the printed table give the seconds and decoded tokens, attempts finished and cancelled,
the prefix-cache hit rate, preemptions and KV peak (the engine's metrics, polled), whether the deadline cut it,
the stop reason and the answer; with each problem's request timeline and metrics series (``solver.measure.timeline``).

    solver day --attempts-file X --problems 2 --attempts 4 --attempt-tokens 300 --json /tmp/day.json --resume
    solver day --gpu --model M --attempts-file X --problems 6 --until 520 --json .gpu/day/slice.json --resume
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from solver.config import Config, ConfigError, parse_overrides
from solver.core.clock import DayClock
from solver.engines.vllm_metrics import StartMark
from solver.measure.timeline import RequestTimeline, Sampler, TimedEngine, in_process_reader
from solver.errors import BadInput
from solver.files import atomic_write
from solver.measure.workload import (DEFAULT_ATTEMPTS_FILE, TOOL_TIME_MODES, Caps, HarmonyEndings, RecordedCalls, Replay,
                                     choose, fixed_tool_times, plan, preset_engine, read_tool_seconds, replay_on_engine,
                                     tool_time_mode, tool_time_seconds, with_tool_times)
from solver.replay import read_attempts

HARD_GRACE_S = 30.0  # --hard-stop's default: --until plus these seconds
CLOSE_S = 20.0  # seconds a call keeps for its end: the engine's shutdown, the log, the JSON
NO_DEADLINE_DAY_S = 18000.0  # rules stop/none: the slice gets a whole 5-hour day, so no deadline bites
# Environment variables that change nothing measured, left out of a run's identity (the rest of VLLM_* is in it).
QUIET_ENV = frozenset({"VLLM_CACHE_ROOT", "VLLM_LOGGING_LEVEL", "VLLM_CONFIGURE_LOGGING",
                       "VLLM_LOGGING_CONFIG_PATH"})


# ---- the pure core -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillAt:
    """Kill the engine ``seconds`` into ``problem`` (an id, or a 1-based position in the slice)."""

    problem: str
    seconds: float

    @classmethod
    def parse(cls, text: str) -> KillAt:
        """
        >>> KillAt.parse("2:45"), KillAt.parse("aimo3-15245:1.5")
        (KillAt(problem='2', seconds=45.0), KillAt(problem='aimo3-15245', seconds=1.5))
        >>> KillAt.parse("2")
        Traceback (most recent call last):
        ...
        solver.errors.BadInput: --kill-engine-at: PROBLEM:SECONDS (a problem id or position, seconds > 0), not '2'
        """
        head, _, tail = text.rpartition(":")
        try:
            seconds = float(tail)
        except ValueError:
            seconds = -1.0
        if not head or not seconds > 0:
            raise BadInput(f"--kill-engine-at: PROBLEM:SECONDS (a problem id or position, seconds > 0), not {text!r}")
        return cls(head, seconds)

    def resolve(self, ids: Sequence[str]) -> str:
        """The problem id it names among the slice's ``ids``.

        >>> KillAt("2", 1.0).resolve(["a", "b", "c"]), KillAt("c", 1.0).resolve(["a", "b", "c"])
        ('b', 'c')
        """
        if self.problem in ids:
            return self.problem
        if self.problem.isdigit() and 1 <= int(self.problem) <= len(ids):
            return ids[int(self.problem) - 1]
        raise BadInput(f"--kill-engine-at: {self.problem!r} is no problem of the slice (ids or positions 1..{len(ids)})")


def day_budget(budget: Any, problems: int, rules: str) -> dict[str, Any]:
    """Budget overrides for a slice of ``problems``. ``kaggle``: the preset's day scaled to the slice (total, reserve
    and cutoff in proportion to ``budget.problems``; the per-problem floor and cap as they are), so each problem
    meets the clamp a problem of the full day meets. ``stop``/``none``: a whole day for the slice, no floor, no
    cap: no deadline bites.

    >>> from solver.config import BudgetConfig
    >>> b = BudgetConfig(total_s=18000, problems=50, min_s=300, max_s=900, reserve_s=300, cutoff_s=17700)
    >>> day_budget(b, 6, "kaggle")
    {'budget.problems': 6, 'budget.total_s': 2160.0, 'budget.reserve_s': 36.0, 'budget.cutoff_s': 2124.0}
    >>> day_budget(b, 6, "stop")["budget.max_s"]
    18000.0
    """
    if rules != "kaggle":
        return {"budget.problems": problems, "budget.total_s": NO_DEADLINE_DAY_S, "budget.min_s": 0.0,
                "budget.max_s": NO_DEADLINE_DAY_S, "budget.reserve_s": 0.0, "budget.cutoff_s": None}
    share = problems / budget.problems
    out: dict[str, Any] = {"budget.problems": problems}
    if budget.total_s is not None:
        out["budget.total_s"] = round(budget.total_s * share, 3)
        out["budget.reserve_s"] = round(budget.reserve_s * share, 3)
    if budget.cutoff_s is not None:
        out["budget.cutoff_s"] = round(budget.cutoff_s * share, 3)
    return out


def hit_rate(samples: Sequence[Any], starts: Sequence[StartMark] = ()) -> float | None:
    """Prefix-cache hits over queries (tokens) across polled samples (``timeline.MetricsSample``); counters that
    start again from zero (a rebuilt engine registers its metrics afresh) count on from there. ``starts``: the
    engine starts within them, on the samples' clock (``timeline.StartMark``): what the counters moved while an
    engine started (its warm-up's prompts, every lookup a miss) is no problem's; counting goes on from the counters
    at its end.

    >>> from types import SimpleNamespace as S
    >>> hit_rate([S(t=0, prefix_queries=100, prefix_hits=50), S(t=1, prefix_queries=300, prefix_hits=150),
    ...           S(t=2, prefix_queries=100, prefix_hits=100)])
    0.6666666666666666
    >>> hit_rate([S(t=0, prefix_queries=0, prefix_hits=0)]) is None
    True

    The first problem opens the engine: before it, no counters; its warm-up looks up 264,000 tokens and finds none,
    then the problem finds 990 of its 1,000 (the samples alone would say 0.4 %):

    >>> samples = [S(t=0, prefix_queries=0, prefix_hits=0), S(t=50, prefix_queries=200_000, prefix_hits=0),
    ...            S(t=100, prefix_queries=264_500, prefix_hits=450), S(t=101, prefix_queries=265_000, prefix_hits=990)]
    >>> round(hit_rate(samples), 4), hit_rate(samples, [StartMark(1, 99, 264_000, 0)])
    (0.0037, 0.99)
    """
    events = sorted([(s.t, False, s.prefix_queries, s.prefix_hits) for s in samples]
                    + [(m.end, True, m.prefix_queries, m.prefix_hits) for m in starts], key=lambda e: (e[0], not e[1]))
    hits = queries = 0.0
    for (_, _, qa, ha), (tb, mark, qb, hb) in zip(events, events[1:]):
        if mark or any(m.begin <= tb <= m.end for m in starts):
            continue  # up to a start's end: its counters, not a problem's
        dq, dh = qb - qa, hb - ha
        if dq < 0 or dh < 0:
            dq, dh = qb, hb
        queries, hits = queries + dq, hits + dh
    return hits / queries if queries > 0 else None


def need_s(predicted_s: float, build_s: float, safety: float) -> float:
    """Seconds a problem must have left before it starts: its predicted seconds and any engine start due before it,
    times the safety factor, plus the end of a call (``CLOSE_S``).

    >>> need_s(100.0, 0.0, 1.25), need_s(100.0, 131.0, 1.0)
    (145.0, 251.0)
    """
    return safety * (predicted_s + build_s) + CLOSE_S


def split_calls(seconds: Sequence[float], start_s: float, until_s: float, safety: float) -> list[list[int]]:
    """How problems of ``seconds`` each (in order) fall into calls of ``until_s``, each call starting its engine
    (``start_s``) and taking a problem only when ``need_s`` says it fits; a problem that fits no call gets a call
    of its own (it will not run: the estimate says so).

    >>> split_calls([100, 100, 300, 100], 100, 500, 1.0)
    [[0, 1], [2], [3]]
    """
    calls: list[list[int]] = []
    used = 0.0
    for i, s in enumerate(seconds):
        if calls and used + need_s(s, 0.0, safety) <= until_s:
            calls[-1].append(i)
            used += safety * s
        else:
            calls.append([i])
            used = safety * (start_s + s)
    return calls


def attempt_plans(replays: Sequence[Replay]) -> list[Any]:
    """The replays as the engine time model plays them (``solver.timing.timeline.AttemptPlan``): per request its
    prompt, decoded tokens and the seconds of the call after it."""
    from solver.timing.timeline import AttemptPlan

    return [AttemptPlan(tuple(s.prompt_tokens for s in r.steps), tuple(s.tokens for s in r.steps),
                        tuple(s.tool_s if s.call else 0.0 for s in r.steps)) for r in replays]


def predict(replays: Sequence[Replay], config: Config, model: Any, deadline_s: float | None) -> Any:
    """The problem played on the time model with the config's rules (``solver.offline.sim.play_on``, the loop's
    own ``ProblemState``): each attempt's ballot its scripted answer (none where a limit ended it), the stop or the
    deadline ending the problem. A ``Played``: seconds, stop reason, answer."""
    from solver.core.state import Rules
    from solver.offline.sim import play_on
    from solver.timing.timeline import engine_timeline
    from solver.types import Ballot

    plans = attempt_plans(replays)
    ballots = [Ballot(r.answer) if r.answered else None for r in replays]
    workers = config.solve.workers or len(replays)
    return play_on(ballots, lambda first, start: engine_timeline(plans[first:], workers, model, start),
                   Rules.of(config), workers, deadline_s)


# ---- records -------------------------------------------------------------------------------------------------


@dataclass
class ProblemRecord:
    """One finished problem of the slice (seconds are wall seconds of this machine unless named ``day``)."""

    id: str
    position: int  # 1-based, in the slice
    call: int  # the device call that played it
    seconds: float  # the solve: the predictor's call less any engine start or close inside it
    call_s: float  # the predictor's whole call
    engine_s: float  # engine starts and closes inside the call (the first call's start, a rebuild)
    allotted_s: float | None  # the deadline the budget gave, seconds from the call's start
    day_start_s: float  # on the day's clock
    day_end_s: float
    status: str  # the predictor's: solved, partial, default, cutoff
    stopped_by: str
    deadline_cut: bool
    answer: int
    correct: bool | None  # against the recording's reference answer
    decoded_tokens: int  # what the engine decoded
    counted_tokens: int  # the voting attempts' tokens, as the predictor counts them (scripted endings included)
    requests: int
    tool_calls: int
    finished: int  # attempts that ended (done, length, error, filtered)
    cancelled: int
    statuses: dict[str, int]
    prefix_hit_rate: float | None  # the engine's counters over the problem
    cached_share: float | None  # prompt tokens found in the prefix cache, per request
    preemptions: int | None
    kv_peak: float | None
    running_peak: int | None
    predicted_s: float | None  # what the time model said before it started
    timeline: list[dict[str, Any]] = field(default_factory=list)  # times from the solve's start
    series: list[list[float]] = field(default_factory=list)  # [t, running, waiting, kv] from the call's start
    # the wall clock (epoch seconds) at the timeline's zero: lines it up with an engine log written with
    # --log-engine (benchmarks/holds.py)
    epoch_t0: float | None = None

    @property
    def tps(self) -> float:
        return self.decoded_tokens / self.seconds if self.seconds > 0 else 0.0


COLUMNS = (f"{'problem':<28}{'call':>5}{'s':>8}{'allot':>7}{'tokens':>9}{'tok/s':>8}{'done':>5}{'canc':>5}"
           f"{'prefix':>7}{'preempt':>8}{'KV':>5}{'cut':>4}  {'stopped by':<11}{'answer':>7}")


def problem_line(r: ProblemRecord) -> str:
    """One row of the printed table."""
    hit = "-" if r.prefix_hit_rate is None else f"{100 * r.prefix_hit_rate:.0f}%"
    kv = "-" if r.kv_peak is None else f"{100 * r.kv_peak:.0f}%"
    allot = "-" if r.allotted_s is None or r.allotted_s > 9999 else f"{r.allotted_s:.0f}"
    mark = "" if r.correct is None else (" ok" if r.correct else " x")
    return (f"{r.id:<28}{r.call:>5}{r.seconds:>8.1f}{allot:>7}{r.decoded_tokens:>9}{r.tps:>8.0f}{r.finished:>5}"
            f"{r.cancelled:>5}{hit:>7}{'-' if r.preemptions is None else r.preemptions:>8}{kv:>5}"
            f"{'yes' if r.deadline_cut else '':>4}  {r.stopped_by:<11}{r.answer:>7}{mark}")


# ---- the engine's life, recorded ------------------------------------------------------------------------------


class Recorder:
    """What the engine's life and the current problem did: written from the supervisor's loop thread (the engine
    opened and closed, each attempt reported), read on the main thread between problems."""

    def __init__(self, clock: DayClock) -> None:
        self.clock = clock
        self.timeline = RequestTimeline()
        self.timed: list[TimedEngine] = []
        self.events: list[tuple[str, float, float]] = []  # (open | close | open-failed, perf_counter at end, seconds)
        self.starts: list[dict[str, Any]] = []  # per engine start: its warm-up and compile cache (engine.warmup...)
        self.marks: list[StartMark] = []  # per engine start: its span and counters (perf_counter), for the figures
        self.reps: list[Any] = []
        self.ready = False  # an engine is open and not known dead
        self.killed = False

    def new_problem(self) -> None:
        self.timeline = RequestTimeline()
        for timed in self.timed:
            timed.timeline = self.timeline
        self.reps = []

    def opened(self, timed: TimedEngine | None, seconds: float) -> None:
        self.clock.resume()  # a resumed call's clock stood still until now
        self.events.append(("open" if timed is not None else "open-failed", time.perf_counter(), seconds))
        if timed is not None:
            self.timed.append(timed)
            self.ready, self.killed = True, False
            if not self.timeline.records:
                self.timeline.t0 = time.perf_counter()  # the problem's solve starts now

    def closed(self, seconds: float) -> None:
        self.ready = False
        self.events.append(("close", time.perf_counter(), seconds))

    def engine_seconds(self, since: float) -> tuple[float, float]:
        """Seconds of engine opens and closes that ended after ``since`` (perf_counter)."""
        opened = sum(s for kind, end, s in self.events if end >= since and kind != "close")
        closed = sum(s for kind, end, s in self.events if end >= since and kind == "close")
        return opened, closed


class DaySession:
    """What the Kaggle supervisor opens (its ``open_session``): the sandbox first, then the preset's engine made to
    follow the replays, and the solver over both; the engine's start and close timed into the ``Recorder``."""

    def __init__(self, config: Config, on_repetition: Any, recorder: Recorder, problems: list[list[Replay]],
                 script: HarmonyEndings, clock: DayClock) -> None:
        self.config, self.recorder, self.problems, self.script, self.clock = config, recorder, problems, script, clock
        self.report = on_repetition
        self.engine: Any = None
        self.sandbox: Any = None
        self.solver: Any = None

    def on_repetition(self, rep: Any) -> None:
        self.recorder.reps.append(rep)
        self.report(rep)

    async def __aenter__(self) -> DaySession:
        from solver.dialects import OutputStyle
        from solver.engines import open_engine
        from solver.loop.problem import ProblemSolver
        from solver.sandbox.pool import create_sandbox

        t0 = time.perf_counter()
        sandbox = create_sandbox(self.config.sandbox, busy=self.config.solve.workers)
        try:
            await sandbox.start()
            engine = await open_engine(self.config)
        except BaseException:
            await sandbox.close()
            self.recorder.opened(None, time.perf_counter() - t0)
            raise
        self.recorder.starts.append(start_notes(engine, time.perf_counter() - t0))
        mark = getattr(engine, "started", None)
        if mark is not None:
            self.recorder.marks.append(mark)
        timed = TimedEngine(engine, self.recorder.timeline)
        self.engine = replay_on_engine(timed, self.problems, self.script)
        self.sandbox = RecordedCalls(sandbox, self.problems, OutputStyle.from_config(self.config.prompt),
                                       self.config.sandbox.timeout_s)
        self.solver = ProblemSolver(self.config, self.engine, self.sandbox, clock=self.clock,
                                    on_repetition=self.on_repetition)
        self.recorder.opened(timed, time.perf_counter() - t0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        t0 = time.perf_counter()
        try:
            await self.engine.close()
        finally:
            await self.sandbox.close()
            self.recorder.closed(time.perf_counter() - t0)


def start_notes(engine: Any, seconds: float) -> dict[str, Any]:
    """An engine start as the call's record keeps it: its seconds (warm-up included), the warm-up's shapes and
    seconds, the engine's prefix-cache counters at its end, and what became of the compile cache."""
    warmup, cache = getattr(engine, "warmup", None), getattr(engine, "compile_cache", None)
    mark = getattr(engine, "started", None)
    return {"seconds": round(seconds, 3), "epoch_end": round(time.time(), 3),
            "warmup": None if warmup is None else {"shapes": len(warmup.shapes), "tokens": warmup.tokens,
                                                   "seconds": warmup.seconds, "failed": warmup.failed,
                                                   "line": warmup.line()},
            # the prefix-cache counters the start left (its warm-up's lookups): no problem's figures count them
            "prefix_queries": None if mark is None else mark.prefix_queries,
            "prefix_hits": None if mark is None else mark.prefix_hits,
            "compile_cache": None if cache is None else {"used": cache.usable, "line": cache.line}}


# ---- processes ---------------------------------------------------------------------------------------------------


def engine_cores() -> list[Any]:
    """vLLM V1's engine core processes of this process: ``AsyncLLM`` starts each with ``multiprocessing``, named
    ``EngineCore`` (``EngineCore_DP<i>`` with data parallelism), in vLLM 0.26 to 0.32."""
    import multiprocessing

    return [p for p in multiprocessing.active_children() if p.name.startswith("EngineCore")]


def kill_engine() -> list[int]:
    """SIGKILL every engine core process and its descendants (its executor's workers), as an out-of-memory kill
    or a crash would end them; the core is reaped by its own ``multiprocessing`` handle (so vLLM's shutdown later
    sees it gone). The pids killed."""
    import psutil

    killed = []
    for core in engine_cores():
        try:
            tree = [psutil.Process(core.pid), *psutil.Process(core.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in tree:
            try:
                proc.kill()
                killed.append(proc.pid)
            except psutil.NoSuchProcess:
                pass
        core.join(timeout=10.0)
        psutil.wait_procs(tree[1:], timeout=10.0)
    return killed


def still_running(grace_s: float = 10.0) -> list[dict[str, Any]]:
    """This process's descendants still alive after ``grace_s`` seconds for them to exit (zombies left out, and
    ``multiprocessing``'s resource tracker, the interpreter's own helper, which ends with this process)."""
    import psutil

    procs = [p for p in psutil.Process().children(recursive=True) if "resource_tracker" not in _cmdline(p)]
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    out = []
    for proc in alive:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append({"pid": proc.pid, "name": proc.name(), "cmdline": " ".join(proc.cmdline())[:160]})
        except psutil.NoSuchProcess:
            pass
    return out


def _cmdline(proc: Any) -> str:
    import psutil

    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def kill_descendants() -> list[int]:
    """SIGKILL every descendant of this process (the run's engine, sandbox and helpers); the pids."""
    import psutil

    procs = psutil.Process().children(recursive=True)
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10.0)
    return [p.pid for p in procs]


# ---- the run ---------------------------------------------------------------------------------------------------


def day_config(args: argparse.Namespace, problems: int) -> Config:
    """The preset with the user's overrides, K attempts at once, the rules ``--rules`` names, and the slice's day
    for ``problems`` problems (``day_budget``; the user's own ``budget.*`` overrides win)."""
    base = args.base
    budget = day_budget(base.budget, problems, args.rules)
    given = {k for k in parse_overrides(args.overrides) if k.startswith("budget.")}
    fixed: dict[str, Any] = {"solve.reps": args.attempts, "solve.workers": args.attempts,
                             "sandbox.code_mode": "stateful",
                             # the calls only sleep (RecordedOutputs): one worker per attempt, as beside a GPU
                             "sandbox.workers": args.attempts}
    if args.rules == "none":
        fixed["stop.stoppers"] = []
    return base.replace({**{k: v for k, v in budget.items() if k not in given}, **fixed})


def identity(args: argparse.Namespace, config: Config, ids: list[str]) -> dict[str, Any]:
    """What a resumed run must share with the file it continues: the same replays, engine and rules."""
    digest = hashlib.sha256(args.attempts_file.read_bytes()).hexdigest()[:16]
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("VLLM_") and k not in QUIET_ENV}
    return {"attempts_file": args.attempts_file.name, "attempts_sha256": digest, "problems": ids,
            "attempts": args.attempts, "attempt_tokens": args.attempt_tokens, "rules": args.rules,
            "preset": args.preset, "gpu": args.gpu, "model": str(config.engine.model),
            "overrides": list(args.overrides), "tool_time": args.tool_time, "env": env}


def check_same(stored: dict[str, Any], now: dict[str, Any], path: Path) -> None:
    """
    >>> check_same({"a": 1, "b": 2}, {"a": 1, "b": 2}, Path("x.json"))
    >>> check_same({"a": 1, "b": 2}, {"a": 1, "b": 3}, Path("x.json"))
    Traceback (most recent call last):
    ...
    solver.errors.BadInput: --resume: x.json was run with b = 2, this call has 3 (a new --json for a new run)
    """
    for key in sorted(set(stored) | set(now)):
        if stored.get(key) != now.get(key):
            raise BadInput(f"--resume: {path} was run with {key} = {stored.get(key)!r}, this call has "
                           f"{now.get(key)!r} (a new --json for a new run)")


def load_plan(args: argparse.Namespace, measure: bool = True) -> tuple[list[list[Replay]], str]:
    """The slice's replays (the config's limits ending attempts as live) with their tool seconds; how they were
    timed. ``measure`` False (a dry run): calls to be measured keep no seconds."""
    only = tuple(p.strip() for p in args.problem_ids.split(",") if p.strip())
    caps = Caps(len(only) or args.problems, args.attempts, args.attempt_tokens, None, only, at_limit="length")
    attempts = read_attempts(args.attempts_file)
    ids = list(choose([a.problem_id for a in attempts], caps.problems, caps.attempts, caps.only))
    if args.kill is not None and args.kill.resolve(ids) == ids[-1]:
        raise BadInput("--kill-engine-at: not the slice's last problem (the rebuild comes with the next one)")
    carried = read_tool_seconds(args.attempts_file)
    mode = tool_time_mode(args.tool_time, carried, args.attempts_file, BadInput)
    problems = plan(attempts, caps, args.base, carried if mode == "carried" else None)
    if mode == "measure" and measure:
        from solver.measure.workload import measure_tool_times
        from solver.sandbox.pool import create_sandbox

        async def measure() -> dict[str, float]:
            sandbox = create_sandbox(args.base.sandbox)
            await sandbox.start()
            try:
                return await measure_tool_times(problems, sandbox, args.base.sandbox.timeout_s)
            finally:
                await sandbox.close()

        problems = with_tool_times(problems, asyncio.run(measure()))
    elif mode not in ("carried", "measure"):  # fixed seconds a call; a dry run's calls to measure keep none
        problems = with_tool_times(problems, fixed_tool_times(problems, args.tool_s))
    return problems, mode


def time_model(args: argparse.Namespace, config: Config) -> Any:
    from solver.timing.model import load_time_model

    return load_time_model(args.time_model or config.engine.time_model or ("h100-gptoss" if args.gpu else "tiny"))


def estimate(args: argparse.Namespace, problems: list[list[Replay]], config: Config, model: Any) -> int:
    """The slice on the time model as the Kaggle path plays it: the engine's start first, each problem's deadline
    from the budget, the rules acting; then how it splits into calls of ``--until``."""
    from solver.core.budget import budget_for, problem_slot
    from solver.core.clock import SimulatedClock
    from solver.kaggle import competition, competition_config

    day = competition_config(config, competition("aimo3"))
    clock = SimulatedClock(model.start_s)
    budget = budget_for(day.budget, clock, 0.0)
    print(f"estimate on time model {model.name} (start {model.start_s:.0f} s), rules {args.rules}, "
          f"{len(problems)} problems x {args.attempts} attempts:")
    print(f"{'problem':<28}{'requests':>9}{'tokens':>9}{'tool s':>8}{'all s':>8}{'allot':>7}{'s':>8}  stopped by")
    seconds = []
    for replays in problems:
        with problem_slot(budget) as slot:  # the budget loop the predictor and the simulator run
            allot = slot.allotted_s if args.rules == "kaggle" else None
            played = predict(replays, config, model, allot)
            full = predict(replays, config.replace({"stop.stoppers": []}), model, None)
            clock.advance(played.seconds)
        seconds.append(played.seconds)
        steps = [s for r in replays for s in r.steps]
        print(f"{replays[0].problem.id:<28}{len(steps):>9}{sum(s.tokens for s in steps):>9}"
              f"{sum(s.tool_s for s in steps if s.call):>8.0f}{full.seconds:>8.0f}"
              f"{'-' if allot is None else f'{allot:.0f}':>7}{played.seconds:>8.0f}  {played.stopped_by}")
    print(f"the slice: {sum(seconds):.0f} s of problems, the day's clock at {clock.now():.0f} s")
    if args.until is not None:
        for k, call in enumerate(split_calls(seconds, model.start_s, args.until, args.safety), start=1):
            busy = model.start_s + sum(seconds[i] for i in call)
            fits = need_s(busy - model.start_s, model.start_s, args.safety) <= args.until
            print(f"call {k}: problems {', '.join(str(i + 1) for i in call)}: ~{busy:.0f} s with the engine's start"
                  + ("" if fits else f" (does not fit --until {args.until:.0f} at safety {args.safety})"))
    return 0


def table_row(state: dict[str, Any], label: str, json_path: Path) -> dict[str, Any]:
    """A run's row in a variants table."""
    records = state["problems"]
    seconds = sum(r["seconds"] for r in records)
    tokens = sum(r["decoded_tokens"] for r in records)
    first = state["calls"][0] if state["calls"] else {}
    return {"label": label, "json": str(json_path), "identity": state["identity"],
            "engine_args": state.get("engine_args"), "engine_env": state.get("engine_env"),
            "device": first.get("device"), "complete": len(records) == len(state["identity"]["problems"]),
            "seconds": seconds, "decoded_tokens": tokens, "tokens_per_s": tokens / seconds if seconds else 0.0,
            "problems": [{k: r[k] for k in ("id", "seconds", "decoded_tokens", "prefix_hit_rate", "cached_share",
                                             "preemptions", "kv_peak", "finished", "cancelled", "stopped_by",
                                             "answer", "deadline_cut")} for r in records]}


def upsert_row(table: Path, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Put ``row`` into the table JSON (replacing the row of the same label); every row."""
    data = json.loads(table.read_text()) if table.exists() else {"rows": []}
    rows = [r for r in data.get("rows", []) if r.get("label") != row["label"]] + [row]
    atomic_write(table, json.dumps({"rows": rows}, indent=1))
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'variant':<24}{'problems':>9}{'s':>9}{'tokens':>10}{'tok/s':>8}{'prefix':>8}{'preempt':>8}{'KV peak':>8}")
    for row in rows:
        probs = row["problems"]
        hits = [p["prefix_hit_rate"] for p in probs if p["prefix_hit_rate"] is not None]
        kv = max((p["kv_peak"] for p in probs if p["kv_peak"] is not None), default=None)
        print(f"{row['label']:<24}{len(probs):>5}/{len(row['identity']['problems']):<3}{row['seconds']:>9.1f}"
              f"{row['decoded_tokens']:>10}{row['tokens_per_s']:>8.0f}"
              f"{'-' if not hits else f'{100 * min(hits):.0f}%':>8}"
              f"{sum(p['preemptions'] or 0 for p in probs):>8}{'-' if kv is None else f'{100 * kv:.0f}%':>8}")


def device_line() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    except ImportError:
        pass
    return f"cpu ({os.cpu_count()} cores)"


def log_check(run_dir: Path, played: dict[str, list[Any]], attempts: int) -> dict[str, Any]:
    """Whether the run log lost anything: per problem this call played, every attempt the solver reported is in
    ``log.jsonl`` (by index), all ``attempts`` of them, and ``calls.jsonl`` has the problem's answer."""
    from solver.runlog import LogError, read_log

    try:
        logged = read_log(run_dir).repetitions
    except LogError as exc:
        return {"ok": False, "note": str(exc).splitlines()[0]}
    calls_path = run_dir / "calls.jsonl"
    answered = {json.loads(x)["id"] for x in calls_path.read_text().splitlines() if x.strip()} \
        if calls_path.exists() else set()
    per = {}
    for pid, reported in played.items():
        indices = sorted(r.index for r in logged if r.problem_id == pid)
        per[pid] = {"logged": len(indices), "reported": len(reported), "answered": pid in answered,
                    "ok": indices == sorted(r.index for r in reported) == list(range(attempts)) and pid in answered}
    return {"ok": all(p["ok"] for p in per.values()), "problems": per}


class DayCall:
    """One device call of a slice: the state file, the predictor, the problems in order."""

    def __init__(self, args: argparse.Namespace, problems: list[list[Replay]], tool_mode: str) -> None:
        self.args, self.problems = args, problems
        self.ids = [rs[0].problem.id for rs in problems]
        self.config = day_config(args, len(problems))
        self.model = time_model(args, self.config)
        ident = identity(args, self.config, self.ids)
        if args.resume and args.json.exists():
            try:
                self.state = json.loads(args.json.read_text())
            except (OSError, ValueError) as exc:
                raise BadInput(f"--resume: cannot read {args.json}: {str(exc).splitlines()[0]}") from exc
            check_same(self.state.get("identity", {}), ident, args.json)
        else:
            self.state = {"identity": ident, "argv": sys.argv[1:], "tool_time": tool_mode,
                          "engine_args": self.config.engine.args, "engine_env": self.config.engine.env,
                          "budget": asdict(self.config.budget), "plan": plan_rows(problems),
                          "problems": [], "calls": [], "fault": None}
        self.done = {r["id"] for r in self.state["problems"]}
        self.kill_id = args.kill.resolve(self.ids) if args.kill else None  # load_plan checked it
        self.call = len(self.state["calls"]) + 1
        spent = self.state["problems"][-1]["day_end_s"] if self.state["problems"] else 0.0
        self.clock = DayClock(spent, paused=bool(self.state["problems"]))
        self.recorder = Recorder(self.clock)
        self.run_dir = args.run_dir or args.json.with_name(f"{args.json.stem}-call{self.call}")
        self.call_record: dict[str, Any] = {
            "call": self.call, "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "until_s": args.until, "hard_stop_s": args.hard_stop, "device": device_line(), "vllm": vllm_version(),
            "run_dir": str(self.run_dir), "problems": [], "ended": None, "engine": [], "left_running": None}
        self.state["calls"].append(self.call_record)

    def save(self) -> None:
        self.call_record["engine"] = [{"what": k, "seconds": round(s, 3)} for k, _, s in self.recorder.events]
        self.call_record["engine_starts"] = self.recorder.starts
        atomic_write(self.args.json, json.dumps(self.state, indent=1))

    def predictor(self) -> Any:
        from solver.kaggle import KagglePredictor, PredictorOptions

        config = self.config.replace({"budget.problems": max(1, len(self.ids) - len(self.done))})
        script = HarmonyEndings()

        def open_session(cfg: Config, on_repetition: Any) -> DaySession:
            return DaySession(cfg, on_repetition, self.recorder, self.problems, script, self.clock)

        return KagglePredictor(config, "aimo3", PredictorOptions(run_dir=self.run_dir, clock=self.clock, start=0.0,
                                                                 open_session=open_session))

    async def play(self) -> str:
        from solver.kaggle import process_start

        import polars as pl

        args, born = self.args, process_start()
        predictor = self.predictor()
        played: dict[str, list[Any]] = {}
        ended = "done"
        try:
            for position, replays in enumerate(self.problems, start=1):
                pid = replays[0].problem.id
                if pid in self.done:
                    continue
                if args.max_problems is not None and len(played) >= args.max_problems:
                    ended = "max-problems"
                    break
                allot = predictor.budget.allot().seconds if args.rules == "kaggle" else None
                guess = predict(replays, self.config, self.model, allot).seconds
                build = 0.0 if self.recorder.ready and not self.recorder.killed else self.model.start_s
                left = None if args.until is None else args.until - (time.monotonic() - born)
                if left is not None and need_s(guess, build, args.safety) > left:
                    print(f"stop: problem {pid} needs ~{need_s(guess, build, args.safety):.0f} s by the estimate "
                          f"({guess:.0f} s{f' and an engine start of {build:.0f} s' if build else ''}, times "
                          f"{args.safety}), {left:.0f} s are left before --until", file=sys.stderr)
                    ended = "until"
                    break
                record = await self.one(predictor, position, replays, guess, born, pl)
                played[pid] = list(self.recorder.reps)
                self.state["problems"].append(asdict(record))
                self.call_record["problems"].append(pid)
                self.done.add(pid)
                print(problem_line(record), flush=True)
                self.save()
        finally:
            t0 = time.perf_counter()
            await asyncio.to_thread(predictor.close)
            self.call_record["close_s"] = round(time.perf_counter() - t0, 3)
        self.call_record["log"] = log_check(self.run_dir, played, args.attempts) if played else None
        if self.state.get("fault") and self.state["fault"].get("call") == self.call:
            self.state["fault"]["log_complete"] = bool(self.call_record["log"] and self.call_record["log"]["ok"])
        return ended

    async def one(self, predictor: Any, position: int, replays: list[Replay], guess: float, born: float,
                  pl: Any) -> ProblemRecord:
        args, problem = self.args, replays[0].problem
        self.recorder.new_problem()
        kill = None
        if problem.id == self.kill_id and not self.state.get("fault"):
            kill = asyncio.ensure_future(self.kill_later(args.kill.seconds))
        day0, t0 = self.clock.now(), time.perf_counter()
        hard = None if args.hard_stop is None else max(1.0, args.hard_stop - (time.monotonic() - born))
        async with Sampler(in_process_reader) as sampler:
            try:
                await asyncio.wait_for(asyncio.to_thread(predictor, pl.Series("id", [problem.id]),
                                                         pl.Series("problem", [problem.text])), timeout=hard)
            except TimeoutError:
                self.abandon(problem.id, time.perf_counter() - t0, sampler)
            finally:
                if kill is not None and not kill.done():
                    if self.recorder.killed:  # the kill is under way: the problem ended with the engine's death
                        await kill
                    else:
                        kill.cancel()
        call = predictor.calls[-1]
        call_s = time.perf_counter() - t0
        opened, closed = self.recorder.engine_seconds(t0)
        reps = [r for r in self.recorder.reps if r.problem_id == problem.id]
        statuses: dict[str, int] = {}
        for rep in reps:
            statuses[rep.status] = statuses.get(rep.status, 0) + 1
        usage = sampler.usage if sampler.samples else None
        # the engine's start (its warm-up's requests) within this problem is kept out of its figures
        hit = hit_rate(sampler.samples, [m.shifted(sampler.t0) for m in self.recorder.marks if m.end >= sampler.t0])
        rows = self.recorder.timeline.rows()
        record = ProblemRecord(
            problem.id, position, self.call, round(call_s - opened - closed, 3), round(call_s, 3),
            round(opened + closed, 3), call.allotted_s, round(day0, 3), round(self.clock.now(), 3), call.status,
            call.stopped_by, call.stopped_by == "deadline", call.answer,
            None if problem.answer is None else str(call.answer) == str(problem.answer),
            sum(r["generated_tokens"] for r in rows), call.generated_tokens, len(rows),
            sum(len(r.executions) for r in reps), sum(r.finished for r in reps),
            statuses.get("cancelled", 0), statuses, None if hit is None else round(hit, 4),
            self.recorder.timeline.cached_share(), usage.preemptions if usage else None,
            usage.kv_peak if usage else None, usage.running_peak if usage else None, round(guess, 1), rows,
            sampler.series(), round(time.time() - (time.perf_counter() - self.recorder.timeline.t0), 3))
        if kill is not None:
            self.fault_done(kill, problem.id, record, t0 + call_s)
        elif self.state.get("fault") and self.state["fault"].get("rebuild") is None \
                and self.state["fault"].get("call") == self.call:
            self.state["fault"]["rebuild"] = {"problem": problem.id, "close_s": round(closed, 3),
                                              "open_s": round(opened, 3), "rebuild_s": round(opened + closed, 3),
                                              "engine_builds": predictor.builds}
            print(f"fault: the engine was rebuilt at {problem.id} in {opened + closed:.1f} s (close {closed:.1f} s, "
                  f"start {opened:.1f} s); builds {predictor.builds}", file=sys.stderr)
        return record

    async def kill_later(self, seconds: float) -> dict[str, Any]:
        while not self.recorder.ready:
            await asyncio.sleep(0.05)
        await asyncio.sleep(seconds)
        t = time.perf_counter()
        self.recorder.killed = True
        pids = await asyncio.to_thread(kill_engine)
        self.recorder.killed = bool(pids)
        return {"pids": pids, "killed_at": t}

    def fault_done(self, kill: asyncio.Future[dict[str, Any]], pid: str, record: ProblemRecord, answered: float) -> None:
        """The fault's record: what was killed and how the problem in flight was answered (``answered``: when the
        predictor returned, perf_counter); the rebuild comes with the next problem."""
        done = kill.result() if kill.done() and not kill.cancelled() else None
        self.state["fault"] = {
            "problem": pid, "call": self.call, "at_s": self.args.kill.seconds, "killed": bool(done and done["pids"]),
            "pids": done["pids"] if done else [], "answered": {"status": record.status, "answer": record.answer,
                                                               "stopped_by": record.stopped_by},
            "answered_after_kill_s": None, "rebuild": None, "log_complete": None}
        if done and done["pids"]:
            self.state["fault"]["answered_after_kill_s"] = round(answered - done["killed_at"], 3)
            print(f"fault: killed the engine core (pids {done['pids']}) {self.args.kill.seconds} s into {pid}; the "
                  f"problem was answered {record.answer} ({record.status}, {record.stopped_by})", file=sys.stderr)
        else:
            print(f"fault: {pid} ended before the kill at {self.args.kill.seconds} s: nothing killed", file=sys.stderr)

    def abandon(self, pid: str, seconds: float, sampler: Any) -> None:
        """Past --hard-stop: keep what the problem did so far, kill every process of the run, exit 3."""
        self.call_record["ended"] = "interrupted"
        self.call_record["interrupted"] = {"problem": pid, "after_s": round(seconds, 1),
                                           "timeline": self.recorder.timeline.rows(), "series": sampler.series(),
                                           "note": "played again whole by the next call"}
        self.save()
        print(f"hard stop: {pid} abandoned after {seconds:.0f} s (--hard-stop {self.args.hard_stop:.0f}); the next "
              f"call plays it again whole", file=sys.stderr)
        kill_descendants()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)


def plan_rows(problems: list[list[Replay]]) -> list[dict[str, Any]]:
    """The plan as ``real_shape.py`` writes it (``solver.timing.fit`` reads it): per attempt its requests, and the
    answer it gives where it ends with one (its ballot: ``day_check.py`` plays the slice's stops in the simulator)."""
    return [{"problem": r.problem.id, "attempt": r.index, "answered": r.answered, "answer": r.answer,
             "steps": [{"tokens": s.tokens, "call": s.call, "tool_s": round(s.tool_s, 4),
                        "prompt_tokens": s.prompt_tokens, "ending": len(s.ending), "appended": len(s.appended),
                        "recorded_tokens": s.recorded_tokens, "limit": s.limit} for s in r.steps]}
            for rs in problems for r in rs]


def vllm_version() -> str | None:
    try:
        import vllm

        return str(vllm.__version__)
    except ImportError:
        return None


def log_engine() -> None:
    """vLLM's log (every process of the engine: its config file is read by each at import) and the solver's at INFO,
    each line beginning with epoch seconds to the ms (``solver.engines.engine_log.EPOCH_FORMAT``)."""
    import logging
    import tempfile

    from solver.engines.engine_log import EPOCH_FORMAT, vllm_logging_config

    path = Path(tempfile.mkdtemp(prefix="day-log-")) / "vllm-logging.json"
    path.write_text(json.dumps(vllm_logging_config()))
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(path)
    os.environ["VLLM_CONFIGURE_LOGGING"] = "1"
    # force: the CLI configured the root logger already; this call's lines carry epoch seconds
    logging.basicConfig(level=logging.WARNING, format=EPOCH_FORMAT, stream=sys.stderr, force=True)
    logging.getLogger("solver.engines").setLevel(logging.INFO)


# ---- the command's work ------------------------------------------------------------------------------------------


def checked(args: argparse.Namespace) -> argparse.Namespace:
    """The flags checked and completed (the slice's config, the dry run, the kill); ``BadInput`` for one that
    cannot run, before anything heavy starts. ``args.dry``: the command's ``DryRun``, or None."""
    for name in ("problems", "attempts", "attempt_tokens", "max_problems"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise BadInput(f"--{name.replace('_', '-')} must be >= 1")
    if args.safety < 1:
        raise BadInput("--safety must be >= 1")
    if args.tool_time not in TOOL_TIME_MODES:
        args.tool_s = tool_time_seconds(args.tool_time, BadInput)
    if args.hard_stop is None and args.until is not None:
        args.hard_stop = args.until + HARD_GRACE_S
    if args.until is not None and args.hard_stop is not None and args.hard_stop < args.until:
        raise BadInput("--hard-stop must be >= --until")
    if (args.label is None) != (args.table is None):
        raise BadInput("--label and --table go together")
    if args.attempts_file is None:
        args.attempts_file = DEFAULT_ATTEMPTS_FILE
    args.kill = KillAt.parse(args.kill_engine_at) if args.kill_engine_at else None
    # A dry run skips what only the GPU machine has (its carry, its runs/ folder) and checks the rest.
    args.attempts_here = args.dry.present(args.attempts_file, "--attempts-file", BadInput) if args.dry else True
    if args.attempts_here and not args.attempts_file.is_file():
        raise BadInput(f"--attempts-file: no file {args.attempts_file}")
    if args.estimate:
        args.json = args.table = None
    elif args.json is None:
        raise BadInput("--json: where the slice's results go (required but with --estimate)")
    for path in (args.json, args.table):
        if path is not None and (args.dry is None or args.dry.present(path.parent, f"{path}'s folder", BadInput)) \
                and not path.parent.is_dir():
            raise BadInput(f"no folder {path.parent} for {path}")
    if args.json is not None and args.json.exists() and not args.resume:
        raise BadInput(f"{args.json} exists: pass --resume to continue it, or remove it")
    try:
        overrides = parse_overrides(args.overrides)
        base = preset_engine(args.preset, args.gpu)
        if args.model:
            overrides["engine.model"] = args.model
        args.base = base.replace(overrides)
    except (ConfigError, ValueError) as exc:
        raise BadInput(str(exc).splitlines()[0]) from exc
    return args



def dry_run(args: argparse.Namespace) -> int:
    """``--dry-run``: the slice planned (where the attempts file is here, its calls not measured), the config of the
    day, the model; nothing started."""
    dry = args.dry
    dry.engine(args.base, BadInput)
    if args.attempts_here:
        problems, mode = load_plan(args, measure=False)
        config = day_config(args, len(problems))
        ids = ", ".join(rs[0].problem.id for rs in problems)
        dry.add(f"slice: {len(problems)} problems x {args.attempts} attempts ({ids}), "
                f"tool time {mode}{' (not measured in a dry run)' if mode == 'measure' else ''}")
    else:
        config = day_config(args, len([p for p in args.problem_ids.split(",") if p.strip()]) or args.problems)
        dry.add(f"slice: {args.problem_ids or f'the first {args.problems} problems'} x {args.attempts} attempts "
                "(the attempts file is not here: not planned)")
    if config.engine.warmup:
        dry.add("engine warm-up: every step shape before the first problem (solver/engines/warmup.py)")
    if config.engine.compile_cache and dry.present(config.engine.compile_cache, "engine.compile_cache", BadInput):
        from solver.engines.compile_cache import CacheError, read_manifest

        try:
            built = read_manifest(Path(config.engine.compile_cache)).fingerprint
        except CacheError as exc:
            raise BadInput(f"engine.compile_cache: {exc}") from exc
        dry.add(f"compile cache built for vLLM {built.vllm}, {built.model}, {built.device}")
    total = config.budget.total_s
    dry.add(f"rules {args.rules}; budget {'none' if total is None else f'{total:.0f} s'}; engine args "
            f"{json.dumps(config.engine.args, sort_keys=True)}"
            + ("; --estimate: the time model's play" if args.estimate else ""))
    return dry.print()


def rehearse_day(args: argparse.Namespace) -> int:
    """``solver day``'s work once its flags are parsed: check them (``BadInput``, exit 2, before anything heavy),
    then the dry run, the estimate, or one device call of the slice, printed as it goes."""
    args = checked(args)
    if args.dry is not None:
        return dry_run(args)
    if not args.gpu:
        for key, value in args.base.engine.env.items():
            os.environ.setdefault(key, str(value))
    if args.log_engine:
        log_engine()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    problems, tool_mode = load_plan(args)
    if args.estimate:
        config = day_config(args, len(problems))
        return estimate(args, problems, config, time_model(args, config))
    run = DayCall(args, problems, tool_mode)
    left = [i for i in run.ids if i not in run.done]
    steps = [s for rs in problems for r in rs for s in r.steps]
    print(f"day slice: {len(problems)} problems x {args.attempts} attempts from {args.attempts_file} "
          f"({sum(s.tokens for s in steps)} decoded tokens, {len(steps)} requests, tool time {tool_mode}); rules "
          f"{args.rules}; call {run.call}, {len(left)} problems left; engine {run.config.engine.model}, "
          f"{json.dumps(run.config.engine.args, sort_keys=True)}", file=sys.stderr)
    if not left:
        print("the slice is complete: nothing to play", file=sys.stderr)
        run.state["calls"].pop()
    else:
        print(COLUMNS)
        ended = asyncio.run(run.play())
        run.call_record["ended"] = ended
        run.call_record["left_running"] = still_running()
        if run.call_record["left_running"]:
            print(f"left running after the close: {run.call_record['left_running']}; killed", file=sys.stderr)
            kill_descendants()
        run.save()
        log = run.call_record["log"]
        print(f"call {run.call}: {ended}; run log {'complete' if log and log['ok'] else 'INCOMPLETE'} "
              f"({run.run_dir}); left running: {len(run.call_record['left_running'])}", file=sys.stderr)
    done = run.state["problems"]
    if done:
        total = sum(r["seconds"] for r in done)
        tokens = sum(r["decoded_tokens"] for r in done)
        print(f"slice so far: {len(done)}/{len(run.ids)} problems, {total:.1f} s, {tokens} tokens "
              f"({tokens / total if total else 0:.0f} tok/s), {sum(r['cancelled'] for r in done)} attempts cancelled, "
              f"{sum(r['deadline_cut'] for r in done)} cut by the deadline, {sum(bool(r['correct']) for r in done)} "
              f"right; the day's clock at {done[-1]['day_end_s']:.0f} s")
    run.save()
    if args.table is not None:
        try:
            print_table(upsert_row(args.table, table_row(run.state, args.label, args.json)))
        except (OSError, ValueError) as exc:
            print(f"solver day: error: --table {args.table}: {str(exc).splitlines()[0]} (the run's --json is written)",
                  file=sys.stderr)
            return 1
    return 0

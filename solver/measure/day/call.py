"""One device call of a day slice (``DayCall``): the state file it continues (``--resume``), the Kaggle predictor
over an engine made to follow the recorded attempts (``DaySession``), the problems played in order while they fit
(``--until``), the engine's life recorded (``Recorder``), the fault (``--kill-engine-at``) and the hard stop.
``solver.measure.day.kaggle_day`` says what the day is.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from solver.config import Config
from solver.core.clock import DayClock
from solver.engines.vllm_metrics import StartMark
from solver.errors import BadInput
from solver.files import atomic_write
from solver.measure.day.model import engine_start_s, need_s, predict, time_model
from solver.measure.day.options import DayOptions, day_config, plan_rows
from solver.measure.day.processes import kill_descendants
from solver.processes import kill_engine
from solver.measure.day.table import ProblemRecord, hit_rate, problem_line
from solver.measure.request_timeline import RequestTimeline, Sampler, TimedEngine, in_process_reader
from solver.measure.workload import HarmonyEndings, recorded_calls, Replay, replay_on_engine

# Environment variables that change nothing measured, left out of a run's identity (the rest of VLLM_* is in it).
QUIET_ENV = frozenset({"VLLM_CACHE_ROOT", "VLLM_LOGGING_LEVEL", "VLLM_CONFIGURE_LOGGING",
                       "VLLM_LOGGING_CONFIG_PATH"})


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

    def __init__(self, parts: Any, on_repetition: Any, recorder: Recorder, problems: list[list[Replay]],
                 script: HarmonyEndings, clock: DayClock) -> None:
        """``parts``: what the predictor's run made of its config (``solver.loop.parts.RunParts``)."""
        self.parts, self.config = parts, parts.config
        self.recorder, self.problems, self.script, self.clock = recorder, problems, script, clock
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
        self.sandbox = recorded_calls(sandbox, self.problems, OutputStyle.from_config(self.config.prompt),
                                       self.config.sandbox.timeout_s)
        self.solver = ProblemSolver(self.parts, self.engine, self.sandbox, clock=self.clock,
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



# ---- a call's state --------------------------------------------------------------------------------------------


def identity(options: DayOptions, config: Config, ids: list[str]) -> dict[str, Any]:
    """What a resumed run must share with the file it continues: the same replays, engine and rules."""
    selection = options.selection
    digest = hashlib.sha256(selection.attempts_file.read_bytes()).hexdigest()[:16]
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("VLLM_") and k not in QUIET_ENV}
    return {"attempts_file": selection.attempts_file.name, "attempts_sha256": digest, "problems": ids,
            "attempts": selection.attempts, "attempt_tokens": selection.attempt_tokens, "rules": options.rules,
            "preset": options.preset, "gpu": options.gpu, "model": str(config.engine.model),
            "overrides": list(options.overrides), "tool_time": selection.tool_time, "env": env}


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


def vllm_version() -> str | None:
    try:
        import vllm

        return str(vllm.__version__)
    except ImportError:
        return None


# ---- the call -------------------------------------------------------------------------------------------------


class DayCall:
    """One device call of a slice: the state file, the predictor, the problems in order."""

    def __init__(self, options: DayOptions, problems: list[list[Replay]], tool_mode: str) -> None:
        self.options, self.problems = options, problems
        self.ids = [rs[0].problem.id for rs in problems]
        self.config = day_config(options, len(problems))
        self.model = time_model(options, self.config)
        ident = identity(options, self.config, self.ids)
        if options.resume and options.json.exists():
            try:
                self.state = json.loads(options.json.read_text())
            except (OSError, ValueError) as exc:
                raise BadInput(f"--resume: cannot read {options.json}: {str(exc).splitlines()[0]}") from exc
            check_same(self.state.get("identity", {}), ident, options.json)
        else:
            self.state = {"identity": ident, "argv": sys.argv[1:], "tool_time": tool_mode,
                          "engine_args": self.config.engine.args, "engine_env": self.config.engine.env,
                          "budget": asdict(self.config.budget), "plan": plan_rows(problems),
                          "problems": [], "calls": [], "fault": None}
        self.done = {r["id"] for r in self.state["problems"]}
        self.kill_id = options.kill.resolve(self.ids) if options.kill else None  # load_plan checked it
        self.call = len(self.state["calls"]) + 1
        spent = self.state["problems"][-1]["day_end_s"] if self.state["problems"] else 0.0
        self.clock = DayClock(spent, paused=bool(self.state["problems"]))
        self.recorder = Recorder(self.clock)
        self.run_dir = options.run_dir or options.json.with_name(f"{options.json.stem}-call{self.call}")
        self.call_record: dict[str, Any] = {
            "call": self.call, "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "until_s": options.until, "hard_stop_s": options.hard_stop, "device": device_line(), "vllm": vllm_version(),
            "run_dir": str(self.run_dir), "problems": [], "ended": None, "engine": [], "left_running": None}
        self.state["calls"].append(self.call_record)

    def save(self) -> None:
        self.call_record["engine"] = [{"what": k, "seconds": round(s, 3)} for k, _, s in self.recorder.events]
        self.call_record["engine_starts"] = self.recorder.starts
        atomic_write(self.options.json, json.dumps(self.state, indent=1))

    def predictor(self) -> Any:
        from solver.kaggle import KagglePredictor, PredictorOptions

        config = self.config.replace({"budget.problems": max(1, len(self.ids) - len(self.done))})
        script = HarmonyEndings()

        def open_session(parts: Any, on_repetition: Any) -> DaySession:
            return DaySession(parts, on_repetition, self.recorder, self.problems, script, self.clock)

        return KagglePredictor(config, "aimo3", PredictorOptions(run_dir=self.run_dir, clock=self.clock, start=0.0,
                                                                 open_session=open_session))

    async def play(self) -> str:
        from solver.kaggle import process_start

        import polars as pl

        options, born = self.options, process_start()
        predictor = self.predictor()
        played: dict[str, list[Any]] = {}
        ended = "done"
        try:
            for position, replays in enumerate(self.problems, start=1):
                pid = replays[0].problem.id
                if pid in self.done:
                    continue
                if options.max_problems is not None and len(played) >= options.max_problems:
                    ended = "max-problems"
                    break
                allot = predictor.budget.allot().seconds if options.rules == "kaggle" else None
                guess = predict(replays, self.config, self.model, allot).seconds
                build = 0.0 if self.recorder.ready and not self.recorder.killed else engine_start_s(self.model,
                                                                                                   self.config)
                left = None if options.until is None else options.until - (time.monotonic() - born)
                if left is not None and need_s(guess, build, options.safety) > left:
                    print(f"stop: problem {pid} needs ~{need_s(guess, build, options.safety):.0f} s by the estimate "
                          f"({guess:.0f} s{f' and an engine start of {build:.0f} s' if build else ''}, times "
                          f"{options.safety}), {left:.0f} s are left before --until", file=sys.stderr)
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
        self.call_record["log"] = log_check(self.run_dir, played, options.selection.attempts) if played else None
        if self.state.get("fault") and self.state["fault"].get("call") == self.call:
            self.state["fault"]["log_complete"] = bool(self.call_record["log"] and self.call_record["log"]["ok"])
        return ended

    async def one(self, predictor: Any, position: int, replays: list[Replay], guess: float, born: float,
                  pl: Any) -> ProblemRecord:
        options, problem = self.options, replays[0].problem
        self.recorder.new_problem()
        kill = None
        if problem.id == self.kill_id and not self.state.get("fault"):
            kill = asyncio.ensure_future(self.kill_later(options.kill.seconds))
        day0, t0 = self.clock.now(), time.perf_counter()
        hard = None if options.hard_stop is None else max(1.0, options.hard_stop - (time.monotonic() - born))
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
        killed = await asyncio.to_thread(kill_engine)
        self.recorder.killed = bool(killed)
        return {"pids": killed, "killed_at": t}

    def fault_done(self, kill: asyncio.Future[dict[str, Any]], pid: str, record: ProblemRecord, answered: float) -> None:
        """The fault's record: what was killed and how the problem in flight was answered (``answered``: when the
        predictor returned, perf_counter); the rebuild comes with the next problem."""
        done = kill.result() if kill.done() and not kill.cancelled() else None
        self.state["fault"] = {
            "problem": pid, "call": self.call, "at_s": self.options.kill.seconds, "killed": bool(done and done["pids"]),
            "pids": done["pids"] if done else [], "answered": {"status": record.status, "answer": record.answer,
                                                               "stopped_by": record.stopped_by},
            "answered_after_kill_s": None, "rebuild": None, "log_complete": None}
        if done and done["pids"]:
            self.state["fault"]["answered_after_kill_s"] = round(answered - done["killed_at"], 3)
            print(f"fault: killed the engine core (pids {done['pids']}) {self.options.kill.seconds} s into {pid}; the "
                  f"problem was answered {record.answer} ({record.status}, {record.stopped_by})", file=sys.stderr)
        else:
            print(f"fault: {pid} ended before the kill at {self.options.kill.seconds} s: nothing killed",
                  file=sys.stderr)

    def abandon(self, pid: str, seconds: float, sampler: Any) -> None:
        """Past --hard-stop: keep what the problem did so far, kill every process of the run, exit 3."""
        self.call_record["ended"] = "interrupted"
        self.call_record["interrupted"] = {"problem": pid, "after_s": round(seconds, 1),
                                           "timeline": self.recorder.timeline.rows(), "series": sampler.series(),
                                           "note": "played again whole by the next call"}
        self.save()
        print(f"hard stop: {pid} abandoned after {seconds:.0f} s (--hard-stop {self.options.hard_stop:.0f}); the next "
              f"call plays it again whole", file=sys.stderr)
        kill_descendants()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)

"""How long a validation takes on G GPUs, before anything runs: P problems x N attempts, W in flight, played on the
engine time model of a layout (``solver.timing``: ``tp1``, ``tp2``, ... and N replicas), problems handed out from
one queue as the cluster's driver hands them out; and the same estimate checked against a run that was measured.

The parts:

- **the shape** of an attempt (its requests: prompt, decoded tokens, tool seconds) comes from recorded repetitions:
  runs given with ``--plan-from`` (an earlier sweep's runs, or real attempts imported with ``solver import-samples
  --measure-tools``), each cut to the sweep's limits as a live run would cut it (``solver.offline.sim.prepare``). A
  problem of the sweep that the recording holds gets its own attempts; any other gets a recorded problem's, in
  turn. N attempts take the recorded ones in index order, again from the first when there are fewer;
- **one problem** is its N attempts W at a time on one engine (``solver.timing.timeline.engine_timeline``, what the
  simulator plays); ``solve.parallel_problems`` k > 1 plays k problems together as one batch of k x W;
- **the run** is the problems in order, each taken by the first engine free (the driver's queue,
  ``solver.cluster.driver``): ``queue_makespan``. Engines: G // (GPUs per engine of the layout), each slowed by the
  layout's ``replica_time_scale`` when there are several; the engine start is the layout's ``start_s``, once for a
  cluster sweep (its actors are kept from run to run), once per run otherwise (each run starts its own engine).

The check (``check_run``, ``solver sweep --check RUN_DIR``) plays a finished run's own recorded
attempts the same way and compares with the run's measured solve time (its first repetition's start to its last
repetition's end: the engine start is not in it). It suits runs without a stopping rule (sweep generation runs, the
layout benchmark's runs), where every attempt ran to its end.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from solver.config import Config, Layout
from solver.offline.sweep.runs import plan_runs
from solver.offline.sweep.spec import SweepError, SweepSpec
from solver.timing.model import EngineTimeModel, load_time_model
from solver.timing.timeline import AttemptPlan, engine_timeline
from solver.types import Problem, Repetition

DEFAULT_TIME_MODEL = "h100-gptoss"  # a config without engine.time_model is timed as gpt-oss-120b on an H100
WITHIN = 0.10  # the check passes when the estimate is within this share of the measured time


def queue_makespan(durations: Sequence[float], engines: int, start: float = 0.0) -> tuple[float, list[int]]:
    """Seconds until the last of ``durations`` ends when ``engines`` take them in order, each the next when it is
    free (the cluster driver's queue), all free at ``start``; and which engine took each.

    >>> queue_makespan([4, 1, 1, 1, 3], 2)
    (6.0, [0, 1, 1, 1, 1])
    >>> queue_makespan([2, 2], 1, start=10.0)
    (14.0, [0, 0])
    >>> queue_makespan([], 3)
    (0.0, [])
    """
    if engines < 1:
        raise ValueError(f"a queue needs at least one engine, got {engines}")
    free = [(start, e) for e in range(engines)]
    heapq.heapify(free)
    taken, end = [], start
    for seconds in durations:
        at, engine = heapq.heappop(free)
        taken.append(engine)
        done = at + float(seconds)
        end = max(end, done)
        heapq.heappush(free, (done, engine))
    return (end if durations else 0.0), taken


def batch_seconds(problems: Sequence[Sequence[AttemptPlan]], workers: int, model: EngineTimeModel) -> float:
    """Seconds for problems played together on one engine, each with ``workers`` attempts in flight.

    >>> m = EngineTimeModel("m", ((1, 0.01), (2, 0.01)))
    >>> a = AttemptPlan((10,), (100,), (0.0,))
    >>> batch_seconds([[a, a, a]], 2, m), batch_seconds([[a], [a]], 1, m)
    (2.0, 1.0)
    """
    attempts = [a for p in problems for a in p]
    if not attempts:
        return 0.0
    timeline = engine_timeline(attempts, workers * len(problems), model)
    return max(timeline.ends)


@dataclass(frozen=True)
class Hardware:
    """Where the estimate runs: the layout (its engines as replicas) on the GPUs, and one engine's time model there."""

    layout: Layout  # one engine's parallel sizes, ``replicas`` engines of it
    gpus: int
    model: EngineTimeModel  # one engine's model in the layout (for_layout), slowed when engines > 1
    scale: float = 1.0  # every engine second of the base model times this here (time_scale x replica_time_scale)

    @classmethod
    def of(cls, time_model: EngineTimeModel, layout: Layout, gpus: int | None) -> Hardware:
        """``layout``'s engines on ``gpus`` GPUs (as many as they hold); ``gpus`` None: the layout's own GPUs."""
        time_model.figures(layout)  # a layout the data lacks is the error, before the GPUs it would need
        count = layout.gpus if gpus is None else gpus
        placed = layout.with_replicas(layout.engines_on(count))
        return cls(placed, count, time_model.for_layout(placed), time_model.scale(placed))

    @property
    def engines(self) -> int:
        return self.layout.replicas

    def shape(self) -> str:
        """
        >>> from solver.config import parse_layout
        >>> Hardware(parse_layout("tp2-replicas:2"), 4, EngineTimeModel("m", ((1, 0.01),)), 0.9).shape()
        'tp2: 2 engines of 2 GPUs, each engine second x0.900'
        """
        each = self.layout.engine_gpus
        return (f"{self.layout.name}: {self.engines} engine{'s' if self.engines > 1 else ''} of {each} GPU"
                f"{'s' if each > 1 else ''}, each engine second x{self.scale:.3f}")

    def line(self) -> str:
        each = self.layout.engine_gpus
        return (f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}, layout {self.layout.name}: {self.engines} engine"
                f"{'s' if self.engines > 1 else ''} of {each} GPU{'s' if each > 1 else ''} (time model "
                f"{self.model.name})")


@dataclass(frozen=True)
class RunEstimate:
    """One generation run: its problems' seconds on one engine each and the queue's makespan."""

    name: str
    problems: int
    reps: int
    workers: int
    slots: int  # problems at once per engine
    problem_s: tuple[float, ...]  # per problem (per batch of ``slots`` problems when slots > 1)
    solve_s: float  # the queue's makespan over the engines, engine start excluded


@dataclass(frozen=True)
class SweepEstimate:
    hardware: Hardware
    start_s: float  # one engine start (engines start side by side)
    starts: int  # engine starts the sweep pays: 1 on a cluster (actors kept), else one per run
    runs: tuple[RunEstimate, ...]

    @property
    def total_s(self) -> float:
        return self.start_s * self.starts + sum(r.solve_s for r in self.runs)

    def lines(self) -> list[str]:
        out = [f"plan: {self.hardware.line()}"]
        for run in self.runs:
            out.append(f"plan: run {run.name}: {run.problems} problems x {run.reps} attempts, {run.workers} in flight"
                       f"{f', {run.slots} problems at once per engine' if run.slots > 1 else ''}: "
                       f"{_duration(run.solve_s)} ({run.solve_s / max(1, run.problems):.1f} s a problem)")
        out.append(f"plan: engine start {_duration(self.start_s)} x {self.starts}; in all "
                   f"{_duration(self.total_s)}")
        return out


def fitting_layouts(model: EngineTimeModel, gpus: int) -> list[Layout]:
    """The time model's engine layouts (``tp1`` always) whose engine fits in ``gpus`` GPUs: ``tp1`` first, then the
    data's in order.

    >>> from solver.config import parse_layout
    >>> from solver.timing.model import LayoutFigures
    >>> m = EngineTimeModel("m", ((1, 0.01),), layouts=(LayoutFigures(Layout(), replica_time_scale=1.1),
    ...                                                 LayoutFigures(parse_layout("tp2"))))
    >>> [x.name for x in fitting_layouts(m, 1)], [x.name for x in fitting_layouts(m, 4)]
    (['tp1'], ['tp1', 'tp2'])
    """
    found = [Layout(), *(x.layout for x in model.layouts if x.name != Layout().name)]
    return [x for x in found if x.engine_gpus <= gpus]


def pick_layout(estimates: Sequence[SweepEstimate]) -> tuple[SweepEstimate, str]:
    """The estimate that ends soonest (a tie: the first given), and why, in one line against each other one.

    >>> from solver.config import parse_layout
    >>> m = EngineTimeModel("m", ((1, 0.01),))
    >>> run = lambda s: (RunEstimate("r", 8, 8, 8, 1, (s,), s),)
    >>> two = SweepEstimate(Hardware(parse_layout("replicas:2"), 2, m, 1.02), 100.0, 1, run(300.0))
    >>> one = SweepEstimate(Hardware(parse_layout("tp2"), 2, m, 0.88), 150.0, 1, run(500.0))
    >>> best, why = pick_layout([one, two]); best.hardware.layout.name
    'tp1'
    >>> why.split(", 1.62x ")  # doctest: +NORMALIZE_WHITESPACE
    ['it ends soonest: 6 min 40 s in all (tp1: 2 engines of 1 GPU, each engine second x1.020)',
     'sooner than tp2 (10 min 50 s; tp2: 1 engine of 2 GPUs, each engine second x0.880)']
    """
    if not estimates:
        raise SweepError("no layout of the time model fits the GPUs asked")
    best = min(estimates, key=lambda e: e.total_s)  # min keeps the first of equals
    others = [e for e in estimates if e is not best]
    if not others:
        return best, f"the only layout that fits {best.hardware.gpus} GPU{'s' if best.hardware.gpus > 1 else ''}"
    against = ", ".join(f"{e.total_s / best.total_s:.2f}x sooner than {e.hardware.layout.name} ({_duration(e.total_s)}; "
                        f"{e.hardware.shape()})" for e in sorted(others, key=lambda e: e.total_s))
    return best, f"it ends soonest: {_duration(best.total_s)} in all ({best.hardware.shape()}), {against}"


def _duration(seconds: float) -> str:
    """
    >>> _duration(42.0), _duration(3725.0)
    ('42 s', '1 h 02 min 05 s')
    """
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else f"{m} min {s:02d} s"


UNLIMITED = 1 << 40  # a limit no recording reaches


def as_run(config: Config) -> Config:
    """``config`` with no limit on a repetition's turns and tokens: the recording as it ran (a run's own attempts,
    for the check), not as another config would cut it."""
    return config.replace({"sampling.max_tokens": UNLIMITED, "sampling.max_total_tokens": UNLIMITED,
                           "sampling.max_turns": UNLIMITED, "engine.args.max_model_len": None})


def plans_of(repetitions: dict[str, list[Repetition]], problems: Sequence[Problem],
             config: Config) -> dict[str, list[AttemptPlan]]:
    """Per problem id, its recorded repetitions as the engine serves them under ``config``'s limits (``as_run``:
    none), in index order (``solver.offline.sim.prepare``)."""
    from solver.offline.sim import ProblemPool, prepare

    by_id = {p.id: p for p in problems}
    pools = [ProblemPool(by_id.get(pid) or Problem(pid, "", None), tuple(reps))
             for pid, reps in repetitions.items() if reps]
    prepared = prepare(pools, [config.vote.voter], config, None)
    return {p.problem.id: list(p.plans) for p in prepared if p.plans}


def shapes_from_runs(run_dirs: Sequence[Path], config: Config) -> dict[str, list[AttemptPlan]]:
    """Recorded attempts per problem id, pooled over ``run_dirs`` (``--plan-from``); SweepError on an unreadable
    run or none with a finished repetition."""
    from solver.runlog import LogError, read_log

    pooled: dict[str, list[Repetition]] = {}
    problems: list[Problem] = []
    for run_dir in run_dirs:
        try:
            records = read_log(Path(run_dir))
        except LogError as exc:
            raise SweepError(f"--plan-from: {exc}") from exc
        problems += records.problems
        for pid, reps in records.finished().items():
            pooled.setdefault(pid, []).extend(reps)
    shapes = plans_of(pooled, problems, config)
    if not shapes:
        raise SweepError(f"--plan-from: no finished repetition in {', '.join(str(r) for r in run_dirs)}")
    return shapes


def attempts_for(problems: Sequence[Problem], shapes: dict[str, list[AttemptPlan]],
                 reps: int) -> list[list[AttemptPlan]]:
    """N attempts per problem: its own recorded ones when the shapes hold it, else a recorded problem's in turn;
    the first N in order, from the first again when fewer were recorded.

    >>> a, b = AttemptPlan((1,), (10,), (0.0,)), AttemptPlan((1,), (20,), (0.0,))
    >>> out = attempts_for([Problem("x", ""), Problem("q", ""), Problem("y", "")], {"q": [a], "r": [b]}, 3)
    >>> [[p.tokens[0] for p in attempts] for attempts in out]
    [[10, 10, 10], [10, 10, 10], [20, 20, 20]]
    """
    others = [shapes[k] for k in sorted(shapes)]
    out, turn = [], 0
    for problem in problems:
        recorded = shapes.get(problem.id)
        if recorded is None:
            recorded, turn = others[turn % len(others)], turn + 1
        out.append([recorded[i % len(recorded)] for i in range(reps)])
    return out


def run_seconds(attempts: Sequence[Sequence[AttemptPlan]], workers: int, slots: int,
                hardware: Hardware) -> tuple[tuple[float, ...], float]:
    """Per problem (or batch of ``slots`` problems) its seconds on one engine, and the queue's makespan."""
    slots = max(1, slots)
    batches = [attempts[i:i + slots] for i in range(0, len(attempts), slots)]
    seconds = tuple(batch_seconds(batch, workers, hardware.model) for batch in batches)
    return seconds, queue_makespan(seconds, hardware.engines)[0]


def time_model_of(config: Config, name: str | None) -> EngineTimeModel:
    return load_time_model(name or config.engine.time_model or DEFAULT_TIME_MODEL)


def estimate_sweep(spec: SweepSpec, base: Config, problems: Sequence[Problem], shapes: dict[str, list[AttemptPlan]],
                   hardware: Hardware, *, cluster: bool) -> SweepEstimate:
    """The sweep's generation runs (``plan_runs``) on ``hardware``: see the module docstring."""
    runs = []
    for planned in plan_runs(spec, base, Path("plan")):
        attempts = attempts_for(problems, shapes, spec.max_reps)
        slots = planned.config.solve.parallel_problems
        seconds, makespan = run_seconds(attempts, planned.workers, slots, hardware)
        runs.append(RunEstimate(planned.run_dir.name, len(problems), spec.max_reps, planned.workers, slots, seconds,
                                makespan))
    return SweepEstimate(hardware, hardware.model.start_s, 1 if cluster else len(runs), tuple(runs))


# -- the check against a measured run --


@dataclass(frozen=True)
class RunCheck:
    run_dir: str
    hardware: Hardware
    problems: int
    attempts: int
    predicted_s: float
    measured_s: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1 if self.measured_s > 0 else float("inf")

    @property
    def within(self) -> bool:
        return abs(self.error) <= WITHIN

    def line(self) -> str:
        verdict = "within" if self.within else "NOT within"
        problems = f"{self.problems} problem{'s' if self.problems != 1 else ''}"
        return (f"check {self.run_dir}: {problems}, {self.attempts} attempts on {self.hardware.line()}: "
                f"{self.predicted_s:.1f} s predicted, {self.measured_s:.1f} s measured ({self.error:+.1%}, "
                f"{verdict} {WITHIN:.0%})")


def engines_in(run_dir: Path) -> int | None:
    """Engine actors a cluster run started (its ``cluster.jsonl``); None for a run on one engine."""
    events = Path(run_dir) / "cluster.jsonl"
    if not events.is_file():
        return None
    lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    return len({e["name"] for e in lines if e.get("event") == "actor"}) or None


def check_run(run_dir: Path, *, time_model: str | None = None, layout: Layout | None = None,
              gpus: int | None = None) -> RunCheck:
    """The run's own recorded attempts played as the estimate plays them, against its measured solve time. The
    layout defaults to the run's engine arguments; the GPUs to the engines it ran (``cluster.jsonl``) x the
    layout's GPUs. SweepError (one line) on a run that cannot be checked."""
    from solver.runlog import LogError, read_log

    try:
        records = read_log(Path(run_dir))
    except LogError as exc:
        raise SweepError(str(exc)) from exc
    config = records.config
    if config is None:
        raise SweepError(f"{run_dir} has no config.yaml")
    finished = records.finished()
    reps = [r for rs in finished.values() for r in rs]
    if not reps:
        raise SweepError(f"{run_dir} has no finished repetition")
    measured = max(r.started_at + r.duration_s for r in reps) - min(r.started_at for r in reps)
    model = time_model_of(config, time_model)
    engine = (layout or Layout.of(config.engine.args)).engine
    if gpus is None:
        gpus = (engines_in(Path(run_dir)) or 1) * engine.engine_gpus
    hardware = Hardware.of(model, engine, gpus)
    order = [p for p in records.problems if p.id in finished] or [Problem(pid, "") for pid in finished]
    shapes = plans_of(finished, order, as_run(config))
    attempts = [shapes.get(p.id, []) for p in order]
    _, predicted = run_seconds(attempts, config.solve.workers, config.solve.parallel_problems, hardware)
    return RunCheck(str(run_dir), hardware, len(order), len(reps), predicted, measured)

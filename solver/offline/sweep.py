"""Validation sweeps: accuracy against repetitions, runtime against workers, and prompt / temperature / voter /
stopping rule comparisons, as one CSV, one markdown table and a few plots.

How the grid is measured
------------------------
* Only what changes the samples is generated: one run per (temperature, prompt template, workers W), each with
  the largest repetition count N_max, no stopping rule and no time budget, under ``OUT/runs/``. A run directory
  that already holds the same config (with at least N_max repetitions) is reused and resumed, not regenerated,
  so a sweep can be restarted, extended to more problems, or re-analysed with other N, voters and stoppers.
* Repetition counts N < N_max are *resampled* from those N_max repetitions: each of ``draws`` random orders of a
  problem's repetitions launches the first N. Voters and stopping rules are replayed on the same draws offline
  (they never change what one repetition generates). Every setting sees the same draws (common random numbers),
  so differences between settings are not sampling noise.
* Workers change runtime, not samples, so each W is a real run (the engine's batching changes per-request speed,
  which a replay of one W's timings would not show). Runtime for a setting is simulated from that run's recorded
  repetition durations: repetitions start in draw order on W slots, each finish is voted, the stopping rule may
  end the problem and cancel what is in flight (the leaderboard simulator's model, ``solver.offline.simulate.play``).
  ``runtime_measured_s`` is the real wall time of the run (sum of per-problem solve times, engine start
  excluded), filled only where the setting is the run itself (its recorded N, no stopper). The simulation is
  pessimistic for N < W: fewer sequences in flight would each run faster than recorded.
* Per setting: majority accuracy (expected over draws; 95 % Wilson interval over the graded problems), mean
  per-repetition accuracy, unbiased pass@N, repetitions used, runtime, generated tokens, code executions and
  tokens per second. Tokens and executions of a cancelled repetition count in proportion to the time it ran.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from solver.config import Config, ConfigError, StopConfig
from solver.offline.report import Grader, GradedRepetition, grade_repetitions, markdown_table, pass_at_k, wilson_interval
from solver.types import Ballot, Problem, Stopper, Voter, VoteState  # noqa: F401 - VoteState: doctests

if TYPE_CHECKING:  # pandas and matplotlib are imported inside the functions that need them (slow imports)
    import pandas as pd
    from matplotlib.figure import Figure

NO_STOPPER = "none"
CSV_NAME = "sweep.csv"
MARKDOWN_NAME = "sweep.md"
SPEC_NAME = "sweep.yaml"
PLOTS = ("accuracy_vs_reps.png", "runtime_vs_workers.png", "accuracy_vs_cost.png")


class SweepError(ValueError):
    """A sweep that cannot run; the message is one line meant for the user."""


# ---- the grid ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep. Empty tuples mean "the base config's value"."""

    data: str
    reps: tuple[int, ...]
    workers: tuple[int, ...]
    temperatures: tuple[float, ...] = ()
    prompts: tuple[str, ...] = ()
    voters: tuple[str, ...] = ()
    stoppers: tuple[str, ...] = (NO_STOPPER,)  # each "none" or registry names joined by "+", e.g. "agree:4+esc:5"
    limit: int | None = None
    draws: int = 100  # random orders per problem and setting
    seed: int = 0
    jobs: int = 1  # processes for the offline replay (analysis only; results do not depend on it)
    preset: str = "tiny"
    config_file: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)  # dotted config keys, e.g. {"sampling.max_tokens": 64}

    def __post_init__(self) -> None:
        _require(bool(self.reps) and all(n > 0 for n in self.reps), "reps must be positive integers")
        _require(bool(self.workers) and all(w > 0 for w in self.workers), "workers must be positive integers")
        _require(all(t >= 0 for t in self.temperatures), "temperatures must be >= 0")
        _require(bool(self.stoppers), "stoppers must not be empty (use 'none')")
        _require(self.draws > 0, "draws must be > 0")
        _require(self.jobs >= 1, "jobs must be >= 1")
        _require(self.limit is None or self.limit > 0, "limit must be > 0")

    @property
    def max_reps(self) -> int:
        return max(self.reps)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise SweepError(message)


_SPEC_KEYS = {"data": "data", "reps": "reps", "workers": "workers", "temperature": "temperatures",
              "prompt": "prompts", "voter": "voters", "stopper": "stoppers", "limit": "limit", "draws": "draws",
              "seed": "seed", "jobs": "jobs", "preset": "preset", "config": "config_file", "set": "overrides"}


def spec_from_dict(data: dict[str, Any], where: str = "sweep spec") -> SweepSpec:
    """A spec from YAML-shaped data (keys as in ``evaluation/sweeps/*.yaml``); lists may be "1,2,4" strings.

    >>> s = spec_from_dict({"data": "demo", "reps": "1,2", "workers": [1, 2], "stopper": ["none", "agree:2"]})
    >>> s.reps, s.workers, s.stoppers, s.temperatures
    ((1, 2), (1, 2), ('none', 'agree:2'), ())
    >>> spec_from_dict({"data": "demo", "reps": [1], "workers": [1], "colour": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.offline.sweep.SweepError: sweep spec: unknown key 'colour' (known: config, data, draws, ...)
    """
    unknown = sorted(set(data) - set(_SPEC_KEYS))
    if unknown:
        raise SweepError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_SPEC_KEYS))})")
    for needed in ("data", "reps", "workers"):
        if data.get(needed) in (None, "", []):
            raise SweepError(f"{where}: {needed} is required")
    try:
        fields: dict[str, Any] = {
            "data": str(data["data"]),
            "reps": _numbers(data["reps"], int), "workers": _numbers(data["workers"], int),
            "temperatures": _numbers(data.get("temperature", ()), float),
            "prompts": _words(data.get("prompt", ())), "voters": _words(data.get("voter", ())),
            "stoppers": _words(data.get("stopper", ())) or (NO_STOPPER,),
        }
        for key in ("limit", "draws", "seed", "jobs"):
            if data.get(key) is not None:
                fields[key] = _numbers(data[key], int)[0]
    except SweepError as exc:
        raise SweepError(f"{where}: {exc}") from exc
    if data.get("preset") is not None:
        fields["preset"] = str(data["preset"])
    if data.get("config") is not None:
        fields["config_file"] = str(data["config"])
    overrides = data.get("set") or {}
    if not isinstance(overrides, dict):
        raise SweepError(f"{where}: set must be a mapping of dotted config keys")
    fields["overrides"] = dict(overrides)
    try:
        return SweepSpec(**fields)
    except SweepError as exc:
        raise SweepError(f"{where}: {exc}") from exc


def _numbers(value: Any, kind: type) -> tuple[Any, ...]:
    """Numbers from a list or a comma-separated string, de-duplicated and sorted.

    >>> _numbers("8,2,4,2", int), _numbers([0.6, 0.8], float), _numbers(3, int)
    ((2, 4, 8), (0.6, 0.8), (3,))
    """
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        try:
            number = kind(item)
        except (TypeError, ValueError):
            raise SweepError(f"not a number: {item!r}") from None
        if kind is int and isinstance(item, float) and item != number:
            raise SweepError(f"not a whole number: {item!r}")
        out.append(number)
    return tuple(sorted(set(out)))


def _words(value: Any) -> tuple[str, ...]:
    """Names from a list or a comma-separated string, order kept, de-duplicated.

    >>> _words("beta:0.95, none,beta:0.95"), _words(["tir"]), _words(None)
    (('beta:0.95', 'none'), ('tir',), ())
    """
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(dict.fromkeys(i.strip() for i in items if i.strip()))


def load_spec(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a sweep YAML file (CLI flags are layered on it before ``spec_from_dict``)."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SweepError(f"cannot read sweep spec {file}: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise SweepError(f"sweep spec {file} must be a mapping")
    return data


@dataclass(frozen=True)
class PlannedRun:
    """One generation run of the sweep."""

    temperature: float
    prompt: str
    workers: int
    config: Config
    run_dir: Path

    @property
    def label(self) -> str:
        return f"T{self.temperature:g}-{self.prompt}"


def plan_runs(spec: SweepSpec, base: Config, out: Path) -> list[PlannedRun]:
    """The runs a sweep needs: one per (temperature, prompt, workers), each with N_max repetitions.

    >>> spec = SweepSpec("demo", reps=(1, 4), workers=(1, 2), temperatures=(0.5,))
    >>> [(r.run_dir.name, r.config.solve.reps, r.config.stop.stoppers) for r in plan_runs(spec, Config(), Path("o"))]
    [('T0.5-tir-w1', 4, ()), ('T0.5-tir-w2', 4, ())]
    """
    temperatures = spec.temperatures or (base.sampling.temperature,)
    prompts = spec.prompts or (base.prompt.template,)
    planned = []
    for temperature, prompt, workers in itertools.product(temperatures, prompts, spec.workers):
        try:
            config = base.replace({
                "sampling.temperature": temperature, "prompt.template": prompt, "solve.reps": spec.max_reps,
                "solve.workers": workers, "stop.stoppers": [], "stop.confidence_warmup": 0,
                "budget.total_s": None, "budget.cutoff_s": None})
        except ConfigError as exc:
            raise SweepError(str(exc)) from exc
        planned.append(PlannedRun(temperature, prompt, workers, config,
                                  out / "runs" / f"T{temperature:g}-{prompt}-w{workers}"))
    return planned


# ---- generation (the edge that calls the engine) -----------------------------------------------------------


def check_spec(spec: SweepSpec, base: Config) -> None:
    """Fail on unknown voter or stopper names before any generation starts."""
    from solver.core.voting import make_voter

    for name in spec.stoppers:
        stopper_for(name, spec.max_reps)
    for name in spec.voters:
        try:
            make_voter(base.replace({"vote.voter": name}).vote, base.answers)
        except ConfigError as exc:
            raise SweepError(str(exc)) from exc


def _without_reps(config: Config) -> dict[str, Any]:
    data = config.to_dict()
    data["solve"] = {k: v for k, v in data["solve"].items() if k != "reps"}
    return data


def reusable_config(run: PlannedRun) -> Config | None:
    """The config of the run already in ``run.run_dir`` when it can serve this sweep (same settings, at least
    as many repetitions: extra ones only enlarge the pool the draws come from); None when there is none yet.
    Anything else is an error: reusing it would mix settings."""
    from solver.runlog import LogError, read_log

    if not (run.run_dir / "log.jsonl").exists():
        return None
    try:
        saved = read_log(run.run_dir).config
    except LogError as exc:
        raise SweepError(str(exc)) from exc
    if saved is None or _without_reps(saved) != _without_reps(run.config):
        raise SweepError(f"{run.run_dir} holds a run with another config; choose another --out")
    if saved.solve.reps < run.config.solve.reps:
        raise SweepError(f"{run.run_dir} holds {saved.solve.reps} repetitions per problem, the sweep needs "
                         f"{run.config.solve.reps}; choose another --out")
    return saved


async def generate(runs: Sequence[PlannedRun], problems: Sequence[Problem],
                   on_event: Callable[[Any], None] | None = None,
                   on_run: Callable[[PlannedRun], None] | None = None) -> None:
    """Run every planned run in turn, in one event loop, or resume it from its directory (problems it already
    decided are skipped). Each run starts and closes its own engine."""
    from solver.loop.run import solve_run

    for run in runs:
        saved = reusable_config(run)
        if on_run is not None:
            on_run(run)
        await solve_run(saved or run.config, problems, run.run_dir, resume=saved is not None, on_event=on_event)


# ---- analysis (pure core) ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One simulated solve of one problem."""

    answer: str
    finished: int
    launched: int
    seconds: float
    tokens: float
    executions: float


def simulate_problem(pool: Sequence[GradedRepetition], order: Sequence[int], reps: int, workers: int,
                     voter: Voter, stopper: Stopper, default: str) -> Outcome:
    """Replay one problem with the leaderboard simulator's solve-loop model (``solver.offline.simulate.play``): the
    first ``reps`` repetitions of ``order`` start on ``workers`` slots, each finish is voted and may stop the
    problem; what is still running then is cancelled and counts in proportion to the time it ran.

    >>> from solver.config import VoteConfig, AnswerConfig
    >>> from solver.core.voting import make_voter
    >>> pool = [GradedRepetition(i, "done", a, 1.0, None, d, 100, 1) for i, (a, d) in
    ...         enumerate([("7", 1.0), ("7", 2.0), ("3", 4.0)])]
    >>> majority = make_voter(VoteConfig(), AnswerConfig())
    >>> simulate_problem(pool, [0, 1, 2], 3, 3, majority, stopper_for("agree:2", 3), "0")
    Outcome(answer='7', finished=2, launched=3, seconds=2.0, tokens=250.0, executions=2.5)
    >>> simulate_problem(pool, [2, 0, 1], 3, 1, majority, stopper_for("none", 3), "0").seconds
    7.0
    """
    from solver.offline.simulate import play

    chosen = [pool[i] for i in order[:reps]]
    ballots = [None if r.answer is None else Ballot(r.answer, r.weight) for r in chosen]
    seconds = [r.duration_s for r in chosen]

    def replay(work: Sequence[float]) -> Any:
        return play(ballots, seconds, work, voter=voter, stopper=stopper, default=default, workers=workers)

    run = replay([float(r.generated_tokens) for r in chosen])
    if run.finished == len(chosen):  # nothing cancelled: every execution happened
        executions = float(sum(r.executions for r in chosen))
    else:  # the same replay, counting executions instead of tokens
        executions = replay([float(r.executions) for r in chosen]).tokens
    return Outcome(run.answer, run.finished, run.launched, run.seconds, run.tokens, executions)


@dataclass(frozen=True)
class RunPools:
    """A generation run read back: graded repetitions per problem for one voter."""

    run: PlannedRun
    problems: list[Problem]
    pools: dict[str, list[GradedRepetition]]
    measured_s: float | None  # sum of per-problem solve times, when every problem has a result
    recorded_reps: int  # solve.reps of the run (a reused run may hold more than the sweep's largest N)
    measured_tokens: int  # generated tokens of the problems with a result


def read_pools(run: PlannedRun, voter: Voter, grader: Grader, problem_ids: Sequence[str] | None = None) -> RunPools:
    """Grade a finished generation run with one voter; only ``problem_ids`` when given (a run directory
    reused from a larger sweep may hold more problems)."""
    from solver.runlog import LogError, read_log

    try:
        records = read_log(run.run_dir)
    except LogError as exc:
        raise SweepError(str(exc)) from exc
    wanted = None if problem_ids is None else set(problem_ids)
    problems = [p for p in records.problems if wanted is None or p.id in wanted]
    finished = records.finished()
    pools = {p.id: grade_repetitions(finished.get(p.id, []), p.answer, voter, grader) for p in problems}
    results = {r.problem_id: r for r in records.results if r.problem_id in pools}
    complete = bool(problems) and len(results) == len(problems)
    return RunPools(run, problems, pools,
                    measured_s=sum(r.duration_s for r in results.values()) if complete else None,
                    recorded_reps=(records.config or run.config).solve.reps,
                    measured_tokens=sum(r.generated_tokens for r in results.values()))


def stopper_for(setting: str, reps: int) -> Stopper:
    """The stopping rule of a sweep setting ("none" or names joined by "+").

    >>> stopper_for("none", 4)(VoteState((Ballot("1"),) * 3, 4)), stopper_for("none", 4)(VoteState((None,) * 4, 4))
    (False, True)
    """
    from solver.core.stopping import make_stopper

    names = () if setting == NO_STOPPER else tuple(s for s in setting.split("+") if s)
    try:
        return make_stopper(StopConfig(stoppers=names), reps)
    except ConfigError as exc:
        raise SweepError(f"stopper {setting!r}: {exc}") from exc


def analyse(runs: Sequence[PlannedRun], spec: SweepSpec, problem_ids: Sequence[str] | None = None, *,
            jobs: int = 1) -> pd.DataFrame:
    """One row per (temperature, prompt, voter, stopper, workers, repetitions) from finished generation runs.
    ``jobs`` > 1 replays rows in parallel processes (joblib); the draws are fixed first, so rows are the same
    for any number of jobs."""
    import pandas as pd
    from joblib import Parallel, delayed

    from solver.core.voting import make_voter

    tasks = []
    for run in runs:
        for voter_name in spec.voters or (run.config.vote.voter,):
            try:
                config = run.config.replace({"vote.voter": voter_name})
                voter = make_voter(config.vote, config.answers)
            except ConfigError as exc:
                raise SweepError(str(exc)) from exc
            grader = Grader(config.answers)
            read = read_pools(run, voter, grader, problem_ids)
            if not read.problems:
                raise SweepError(f"{run.run_dir} holds none of the sweep's problems")
            orders = {p.id: _orders(spec.seed, k, len(read.pools[p.id]), spec.draws)
                      for k, p in enumerate(read.problems)}
            for stopper_name, reps in itertools.product(spec.stoppers, spec.reps):
                stopper = stopper_for(stopper_name, reps)
                tasks.append(delayed(_row)(run, read, voter_name, voter, stopper_name, stopper, reps, orders,
                                           grader, config.answers.default))
    return pd.DataFrame(Parallel(n_jobs=jobs)(tasks))  # n_jobs=1 runs in this process


def _orders(seed: int, problem_number: int, size: int, draws: int) -> list[list[int]]:
    """``draws`` random orders of a problem's repetitions, the same for every setting (common random numbers).

    >>> _orders(0, 3, 4, 2) == _orders(0, 3, 4, 2), sorted(_orders(0, 3, 4, 1)[0])
    (True, [0, 1, 2, 3])
    """
    import numpy as np

    rng = np.random.default_rng([seed, problem_number])
    return [rng.permutation(size).tolist() for _ in range(draws)]


def _row(run: PlannedRun, read: RunPools, voter_name: str, voter: Voter, stopper_name: str, stopper: Stopper,
         reps: int, orders: dict[str, list[list[int]]], grader: Grader, default: str) -> dict[str, Any]:
    correct: list[float] = []
    rep_accuracy: list[float] = []
    passes: list[float] = []
    used = launched = seconds = tokens = executions = 0.0
    for problem in read.problems:
        pool = read.pools[problem.id]
        outcomes = [simulate_problem(pool, order, reps, run.workers, voter, stopper, default)
                    for order in orders[problem.id]]
        n = len(outcomes)
        used += sum(o.finished for o in outcomes) / n
        launched += sum(o.launched for o in outcomes) / n
        seconds += sum(o.seconds for o in outcomes) / n
        tokens += sum(o.tokens for o in outcomes) / n
        executions += sum(o.executions for o in outcomes) / n
        if problem.answer is not None:
            correct.append(sum(grader(o.answer, problem.answer) for o in outcomes) / n)
            right = sum(1 for r in pool if r.correct)
            rep_accuracy.append(right / len(pool) if pool else 0.0)
            passes.append(pass_at_k(len(pool), right, reps))
    count = len(read.problems) or 1
    low, high = wilson_interval(sum(correct), len(correct))
    exact = reps == read.recorded_reps and stopper_name == NO_STOPPER
    measured = read.measured_s if exact else None
    return {
        "temperature": run.temperature, "prompt": run.prompt, "voter": voter_name, "stopper": stopper_name,
        "workers": run.workers, "reps": reps, "problems": len(read.problems), "graded": len(correct),
        "accuracy": _mean_or_nan(correct), "accuracy_low": low, "accuracy_high": high,
        "rep_accuracy": _mean_or_nan(rep_accuracy), "pass_at_n": _mean_or_nan(passes),
        "reps_used": used / count, "launched": launched / count, "runtime_s": seconds,
        "runtime_measured_s": math.nan if measured is None else measured,
        "tokens": tokens, "executions": executions,
        "tokens_per_s": (read.measured_tokens / measured if measured else tokens / seconds if seconds else math.nan),
        "run": run.run_dir.name,
    }


def _mean_or_nan(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


# ---- outputs -----------------------------------------------------------------------------------------------


def _setting_label(row: Any, varying: Sequence[str]) -> str:
    parts = [f"{key}={row[key]}" for key in varying]
    return ", ".join(parts) or "majority"


def _varying(df: pd.DataFrame, keys: Sequence[str] = ("temperature", "prompt", "voter", "stopper")) -> list[str]:
    return [k for k in keys if df[k].nunique() > 1]


def _groups_at_most_workers(df: pd.DataFrame) -> tuple[list[str], list[pd.DataFrame]]:
    """The rows at the largest worker count, one group per setting (sorted by N), and the columns that vary."""
    at = df[df["workers"] == df["workers"].max()]
    varying = _varying(at)
    groups = at.groupby(varying, sort=False) if varying else [((), at)]
    return varying, [group.sort_values("reps") for _, group in groups]


def plot_accuracy(df: pd.DataFrame) -> Figure:
    """Majority accuracy (line, 95 % band), pass@N (dotted) and mean repetition accuracy (dashed) against N,
    at the largest worker count."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    varying, groups = _groups_at_most_workers(df)
    for number, group in enumerate(groups):
        colour = f"C{number % 10}"
        label = _setting_label(group.iloc[0], varying)
        ax.plot(group["reps"], 100 * group["accuracy"], marker="o", color=colour, label=label)
        ax.fill_between(group["reps"], 100 * group["accuracy_low"], 100 * group["accuracy_high"], color=colour,
                        alpha=0.12, linewidth=0)
        ax.plot(group["reps"], 100 * group["pass_at_n"], linestyle=":", color=colour)
        ax.plot(group["reps"], 100 * group["rep_accuracy"], linestyle="--", color=colour, alpha=0.7)
    import pandas as pd

    at = pd.concat(groups) if groups else df.iloc[:0]
    reps = sorted(at["reps"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(reps, [str(r) for r in reps])
    ax.set_ylim(-2, 102)
    ax.set_xlabel("repetitions per problem (N)")
    ax.set_ylabel("accuracy (%)")
    problems = int(at["graded"].max()) if len(at) else 0
    ax.set_title(f"Accuracy vs repetitions ({problems} graded problems, band = 95 % Wilson)")
    ax.grid(alpha=0.3)
    settings = ax.legend(fontsize="small", loc="upper left", title="setting")
    ax.add_artist(settings)
    styles = [Line2D([], [], color="grey", marker="o", label="majority vote"),
              Line2D([], [], color="grey", linestyle=":", label="pass@N (any repetition right)"),
              Line2D([], [], color="grey", linestyle="--", label="single repetition")]
    ax.legend(handles=styles, fontsize="small", loc="lower right")
    return fig


def plot_runtime(df: pd.DataFrame) -> Figure:
    """Simulated runtime (lines per N) and measured runtime (crosses) against workers; throughput beside it."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    first = df.iloc[0] if len(df) else None
    base = df
    if first is not None:  # one generation setting and no stopper: the plain cost of N repetitions
        base = df[(df["temperature"] == first["temperature"]) & (df["prompt"] == first["prompt"])
                  & (df["voter"] == first["voter"])]
        if (base["stopper"] == NO_STOPPER).any():
            base = base[base["stopper"] == NO_STOPPER]
        else:
            base = base[base["stopper"] == base["stopper"].iloc[0]]
    for number, (reps, group) in enumerate(base.groupby("reps")):
        group = group.sort_values("workers")
        left.plot(group["workers"], group["runtime_s"], marker="o", color=f"C{number % 10}",
                  label=f"N={reps} (simulated)")
    measured = base.dropna(subset=["runtime_measured_s"]).sort_values("workers")
    if len(measured):
        left.plot(measured["workers"], measured["runtime_measured_s"], linestyle="none", marker="x",
                  markersize=10, color="black", label=f"N={int(measured['reps'].max())} (measured)")
        right.plot(measured["workers"], measured["tokens_per_s"], marker="s", color="C0")
    workers = sorted(df["workers"].unique())
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(workers, [str(w) for w in workers])
        ax.set_xlabel("workers (repetitions in flight)")
        ax.grid(alpha=0.3)
    left.set_ylabel("runtime for the set (s)")
    left.set_title("Runtime vs workers")
    left.set_ylim(bottom=0)
    left.legend(fontsize="small")
    right.set_ylabel("generated tokens per second")
    right.set_title("Engine throughput (measured runs)")
    right.set_ylim(bottom=0)
    return fig


def plot_cost(df: pd.DataFrame) -> Figure:
    """Accuracy against repetitions actually used: what each stopping rule saves and what it costs."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    varying, groups = _groups_at_most_workers(df)
    for number, group in enumerate(groups):
        label = _setting_label(group.iloc[0], varying)
        ax.plot(group["reps_used"], 100 * group["accuracy"], marker="o", color=f"C{number % 10}", label=label)
        for _, row in group.iterrows():
            ax.annotate(f"N={row['reps']}", (row["reps_used"], 100 * row["accuracy"]), fontsize="x-small",
                        textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("repetitions used per problem (mean)")
    ax.set_ylabel("majority accuracy (%)")
    ax.set_ylim(-2, 102)
    ax.set_title("Accuracy vs cost")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def render_markdown(df: pd.DataFrame, spec: SweepSpec) -> str:
    """The sweep as a markdown page: the settings table, the plots and how they were measured."""
    def num(value: float, digits: int = 1, scale: float = 1.0) -> str:
        return "-" if math.isnan(value) else f"{scale * value:.{digits}f}"

    rows = []
    for _, r in df.iterrows():
        interval = f"[{num(r['accuracy_low'], 0, 100)}–{num(r['accuracy_high'], 0, 100)}]"
        rows.append([r["temperature"], r["prompt"], r["voter"], r["stopper"], r["workers"], r["reps"],
                     f"{num(r['accuracy'], 1, 100)} {interval}",
                     num(r["rep_accuracy"], 1, 100), num(r["pass_at_n"], 1, 100), num(r["reps_used"], 2),
                     num(r["runtime_s"]), num(r["runtime_measured_s"]), num(r["tokens"], 0),
                     num(r["executions"], 1), num(r["tokens_per_s"])])
    table = markdown_table(
        ["T", "prompt", "voter", "stopper", "W", "N", "majority % [95 % CI]", "single rep %", "pass@N %",
         "reps used", "runtime s (sim)", "runtime s (measured)", "tokens", "code runs", "tok/s"], rows)
    problems = int(df["problems"].max()) if len(df) else 0
    graded = int(df["graded"].max()) if len(df) else 0
    return "\n".join([
        f"# Sweep: {spec.data}", "",
        f"{problems} problems ({graded} with reference answers); repetitions {list(spec.reps)}, workers "
        f"{list(spec.workers)}; {spec.draws} random draws per problem and setting (seed {spec.seed}).", "",
        table, "",
        "![accuracy vs repetitions](accuracy_vs_reps.png)", "",
        "![runtime vs workers](runtime_vs_workers.png)", "",
        "![accuracy vs cost](accuracy_vs_cost.png)", "",
        "## How this was measured", "",
        "One generation run per temperature, prompt and worker count with the largest N and no stopping rule "
        "(`runs/`). Smaller N, voters and stopping rules are replayed offline on random orders of those "
        "repetitions (the same orders for every setting). Runtime is simulated from recorded repetition "
        "durations on W slots; the measured column is the real run. Majority accuracy is expected over the "
        "draws, with a 95 % Wilson interval over the graded problems.", ""])


def write_outputs(df: pd.DataFrame, spec: SweepSpec, out: Path) -> list[Path]:
    """sweep.csv, sweep.md, sweep.yaml (the spec) and the PNG plots in ``out``. Returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / CSV_NAME, out / MARKDOWN_NAME, out / SPEC_NAME]
    _atomic(out / CSV_NAME, df.to_csv(index=False))
    _atomic(out / MARKDOWN_NAME, render_markdown(df, spec))
    _atomic(out / SPEC_NAME, yaml.safe_dump(spec_to_dict(spec), sort_keys=False))
    for name, plot in zip(PLOTS, (plot_accuracy, plot_runtime, plot_cost)):
        path = out / name
        tmp = path.with_name(f".{name}.tmp.png")
        plot(df).savefig(tmp, dpi=110)
        tmp.replace(path)
        written.append(path)
    return written


def spec_to_dict(spec: SweepSpec) -> dict[str, Any]:
    """The spec in the YAML shape ``spec_from_dict`` reads (saved beside the results)."""
    return {"data": spec.data, "limit": spec.limit, "preset": spec.preset, "config": spec.config_file,
            "set": dict(spec.overrides), "reps": list(spec.reps), "workers": list(spec.workers),
            "temperature": list(spec.temperatures), "prompt": list(spec.prompts), "voter": list(spec.voters),
            "stopper": list(spec.stoppers), "draws": spec.draws, "seed": spec.seed, "jobs": spec.jobs}


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def load_sweep(out: str | Path) -> pd.DataFrame:
    """The table of a finished sweep directory."""
    import pandas as pd

    path = Path(out) / CSV_NAME
    if not path.is_file():
        raise SweepError(f"no sweep results at {path}")
    return pd.read_csv(path)


def best_settings(df: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The ``top`` settings by majority accuracy, cheaper first among equals, with the columns that matter."""
    columns = ["temperature", "prompt", "voter", "stopper", "workers", "reps", "accuracy", "accuracy_low",
               "accuracy_high", "rep_accuracy", "pass_at_n", "reps_used", "runtime_s", "tokens"]
    ranked = df.sort_values(["accuracy", "runtime_s", "reps_used"], ascending=[False, True, True])
    return ranked[columns].head(top).reset_index(drop=True)


def run_dirs(out: str | Path) -> list[Path]:
    """The generation runs of a sweep directory, by name."""
    runs = Path(out) / "runs"
    return sorted(p for p in runs.iterdir() if (p / "log.jsonl").is_file()) if runs.is_dir() else []


def run_sweep(spec: SweepSpec, base: Config, problems: Sequence[Problem], out: Path, *, generate_runs: bool = True,
              on_event: Callable[[Any], None] | None = None,
              on_run: Callable[[PlannedRun], None] | None = None) -> pd.DataFrame:
    """Generate (or reuse) the runs, analyse them and write the outputs. ``generate_runs=False`` analyses the
    runs already in ``out`` and fails if one is missing."""
    import asyncio

    check_spec(spec, base)
    runs = plan_runs(spec, base, out)
    missing = [str(r.run_dir) for r in runs if reusable_config(r) is None]  # a mismatched dir fails here, early
    if generate_runs:
        asyncio.run(generate(runs, problems, on_event=on_event, on_run=on_run))
    elif missing:
        raise SweepError(f"no run at {missing[0]} (run the sweep without --offline first)")
    df = analyse(runs, spec, [p.id for p in problems], jobs=spec.jobs)
    write_outputs(df, spec, out)
    return df

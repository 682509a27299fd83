"""The generation runs a sweep needs: one per (temperature, prompt, workers), planned, checked for reuse, and
generated (the edge that calls the engine)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.config import Config, ConfigError
from solver.offline.sweep.spec import SweepError, SweepSpec, stopper_for
from solver.types import Problem


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


# The live loop's one run (``solver.loop.run.solve_run``), handed in by the caller: the sweep plans and analyses,
# the loop generates, and this package never imports it.
SolveRun = Callable[..., Awaitable[Any]]


async def generate(runs: Sequence[PlannedRun], problems: Sequence[Problem], solve: SolveRun,
                   on_event: Callable[[Any], None] | None = None,
                   on_run: Callable[[PlannedRun], None] | None = None) -> None:
    """Run every planned run in turn with ``solve`` (the loop's ``solve_run``), in one event loop, or resume it
    from its directory (problems it already decided are skipped). Each run starts and closes its own engine."""
    for run in runs:
        saved = reusable_config(run)
        if on_run is not None:
            on_run(run)
        await solve(saved or run.config, problems, run.run_dir, resume=saved is not None, on_event=on_event)


def run_dirs(out: str | Path) -> list[Path]:
    """The generation runs of a sweep directory, by name."""
    runs = Path(out) / "runs"
    return sorted(p for p in runs.iterdir() if (p / "log.jsonl").is_file()) if runs.is_dir() else []

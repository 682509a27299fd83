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
  end the problem and cancel what is in flight (the leaderboard simulator's model, ``solver.offline.sim.play.play``).
  ``runtime_measured_s`` is the real wall time of the run (sum of per-problem solve times, engine start
  excluded), filled only where the setting is the run itself (its recorded N, no stopper). The simulation is
  pessimistic for N < W: fewer sequences in flight would each run faster than recorded.
* Per setting: majority accuracy (expected over draws; 95 % Wilson interval over the graded problems), mean
  per-repetition accuracy, unbiased pass@N, repetitions used, runtime, generated tokens, code executions and
  tokens per second. Tokens and executions of a cancelled repetition count in proportion to the time it ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solver.config import Config
from solver.offline.sweep.analysis import analyse
from solver.offline.sweep.output import PLOTS, write_outputs
from solver.offline.sweep.runs import PlannedRun, SolveRun, check_spec, generate, plan_runs, reusable_config
from solver.offline.sweep.spec import SweepError, SweepSpec, spec_from_dict
from solver.types import Problem

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PLOTS", "run_sweep", "spec_from_dict"]  # what callers of the whole sweep need in one place


def run_sweep(spec: SweepSpec, base: Config, problems: Sequence[Problem], out: Path, *, solve: SolveRun | None,
              on_event: Callable[[Any], None] | None = None,
              on_run: Callable[[PlannedRun], None] | None = None) -> pd.DataFrame:
    """Generate (or reuse) the runs with ``solve`` (the loop's ``solve_run``), analyse them and write the outputs.
    ``solve=None`` analyses the runs already in ``out`` and fails if one is missing."""
    import asyncio

    check_spec(spec, base)
    runs = plan_runs(spec, base, out)
    missing = [str(r.run_dir) for r in runs if reusable_config(r) is None]  # a mismatched dir fails here, early
    if solve is not None:
        asyncio.run(generate(runs, problems, solve, on_event=on_event, on_run=on_run))
    elif missing:
        raise SweepError(f"no run at {missing[0]} (run the sweep without --offline first)")
    df = analyse(runs, spec, [p.id for p in problems], jobs=spec.jobs)
    write_outputs(df, spec, out)
    return df

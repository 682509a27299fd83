"""The leaderboard simulation: a Kaggle day played on recorded repetitions, many times over.

- ``plans``: recordings cut to a config's limits, and each attempt's turns as the time model plays them;
- ``pools``: a run log's problems as pools of ballots, seconds, tokens and plans;
- ``play``: one problem played on one ordered draw, each finish an event of the loop's ``ProblemState``, and a
  simulated day of them, each under the deadline the budget gives it (``simulated_day``; on given draws under an
  engine's time model: ``simulated_run``);
- ``scoring``: how a leaderboard scores a day (runs, credit, the line), as data;
- ``trials``: whole leaderboard days of every setting on common random draws, each run at its own speed;
  ``bias``: the bootstrap's bias;
- ``simulate``: the request, the report; ``summary``: a setting's scores; ``separation``: what the data can tell
  two settings apart by; ``estimators``: the exact all-orders values the trials sample, for small recordings;
  ``calibration``: simulated against held-out real runs; ``coverage``: the interval against a known truth (the
  simulator against the pipeline replaying the same draws is the measurement wing's: ``solver.measure.check_replay``);
- ``output``, ``plots``: tables and pictures.

Outsiders import from here, what they use; the modules behind it are this package's own.
"""

from solver.offline.sim import coverage  # the full check's parts, for its script (evaluation/interval_coverage.py)
from solver.offline.sim.output import (DIFFERENCE_NOTE, calibration_lines, data_flag, difference_rows, difference_table,
                                       jitter_text, markdown, summary_rows, timing_text, write_outputs)
from solver.offline.sim.play import Played, play, play_on, simulated_run
from solver.offline.sim.plots import plot_accuracy_vs_reps, plot_score_distributions, pyplot, save_figure, zoom_accuracy
from solver.offline.sim.pools import ProblemPool, SimulationError, load_pools, prepare
from solver.offline.sim.separation import Difference
from solver.offline.sim.simulate import SimulationReport, SimulationRequest, load, simulate, simulate_pools, validate
from solver.offline.sim.summary import Summary
from solver.offline.sim.setting import Setting

__all__ = ["DIFFERENCE_NOTE", "Difference", "Played", "ProblemPool", "Setting", "SimulationError",
           "SimulationReport", "SimulationRequest", "Summary", "calibration_lines", "coverage", "data_flag",
           "difference_rows", "difference_table", "jitter_text", "load", "load_pools", "markdown", "play", "play_on",
           "plot_accuracy_vs_reps", "plot_score_distributions", "prepare", "pyplot", "save_figure", "simulate",
           "simulate_pools", "simulated_run", "summary_rows", "timing_text", "validate", "write_outputs",
           "zoom_accuracy"]

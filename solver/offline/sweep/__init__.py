"""Validation sweeps: the grid's runs generated on the engine (``runs``), analysed offline on common draws
(``analysis``), written as tables and plots (``output``); ``spec`` is the grid, ``run`` the whole sweep;
``estimate`` says how long it takes on G GPUs before it runs (``solver sweep --plan``) and checks that against
measured runs.

Outsiders import from here; the modules behind it are this package's own.
"""

from solver.offline.sweep.analysis import analyse, simulate_problem
from solver.offline.sweep.estimate import (Hardware, RunCheck, SweepEstimate, check_run, estimate_sweep,
                                          fitting_layouts, pick_layout, queue_makespan, shapes_from_runs,
                                          time_model_of)
from solver.offline.sweep.output import (PLOTS, best_settings, load_sweep, plot_accuracy, plot_cost, plot_runtime,
                                        write_outputs)
from solver.offline.sweep.run import run_sweep
from solver.offline.sweep.runs import PlannedRun, check_spec, plan_runs, reusable_config, run_dirs
from solver.offline.sweep.spec import SweepError, SweepSpec, load_spec, spec_from_dict, stopper_for

__all__ = ["PLOTS", "Hardware", "PlannedRun", "RunCheck", "SweepError", "SweepEstimate", "SweepSpec", "analyse",
           "best_settings", "check_run", "check_spec", "estimate_sweep", "fitting_layouts", "load_spec", "load_sweep",
           "pick_layout", "plan_runs", "plot_accuracy", "plot_cost", "plot_runtime", "queue_makespan", "reusable_config", "run_dirs", "run_sweep",
           "shapes_from_runs", "simulate_problem", "spec_from_dict", "stopper_for", "time_model_of", "write_outputs"]

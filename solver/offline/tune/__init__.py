"""``solver tune``: every setting searched on the simulator's common draws (``search``), the Pareto frontier and
the pick by a stated rule (``frontier``), the report as tables, plots and one HTML page (``output``, ``plots``,
``html_report``), and the pick written as a config ``solver solve --config`` takes.

Outsiders import from here; the modules behind it are this package's own.
"""

from solver.offline.tune.frontier import AXES, AXIS_LABELS, Axis, PickError, PickRule, best_at, cost, frontier, pareto
from solver.offline.tune.output import markdown, write_outputs, wrong_problems
from solver.offline.tune.search import TuneReport, chosen_config, config_text, stoppers_label, tune

__all__ = ["AXES", "AXIS_LABELS", "Axis", "PickError", "PickRule", "TuneReport", "best_at", "chosen_config",
           "config_text", "cost", "frontier", "markdown", "pareto", "stoppers_label", "tune", "wrong_problems",
           "write_outputs"]

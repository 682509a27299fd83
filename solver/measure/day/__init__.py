"""The Kaggle day rehearsed at full length on recorded attempts (``solver day``, ``benchmarks/day.py``): ``options``
(the command's flags as one typed, checked record, and the plan), ``model`` (the slice on the time model, the calls
it splits into), ``call`` (one device call of the day: the predictor, its engine, the state file), ``table`` (the
records and tables), ``processes`` (what is left running, the engine's log), ``kaggle_day`` (the command's run) and
``held_out`` (a day's file played again on the time model, each problem on the fit of the others).
"""

from solver.measure.day.held_out import add_answers as add_day_answers
from solver.measure.day.held_out import check_day
from solver.measure.day.kaggle_day import rehearse_day
from solver.measure.day.options import DayOptions, day_options

__all__ = ["DayOptions", "add_day_answers", "check_day", "day_options", "rehearse_day"]

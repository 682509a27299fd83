"""The Kaggle submission: the ``predict`` adapter and the competition gateway glue.

Rooms: ``competition`` (the competitions as data, the config overlay), ``rows`` (rows in, frames out),
``predictor`` (:class:`KagglePredictor`, its options, call records), ``supervisor`` (the engine's life and its
limits), ``thread`` (the one event loop the engine lives on, for a synchronous caller),
``serve`` (the ``predict`` function the relay accepts, ``kaggle_evaluation``), ``rehearsal`` (local runs),
``day`` (a Kaggle day rehearsed on recorded attempts: ``solver day``), ``day_check`` (a day's file played
again in the simulator).
Importing this package starts nothing; the names the notebook uses are re-exported here.
"""

from solver.kaggle.day import rehearse_day
from solver.kaggle.day_check import add_answers as add_day_answers
from solver.kaggle.day_check import check_day
from solver.kaggle.competition import COMPETITIONS, Competition, competition, competition_config
from solver.kaggle.predictor import CallRecord, KagglePredictor, PredictorOptions, process_start
from solver.kaggle.rehearsal import rehearse, report_markdown, run_gateway
from solver.kaggle.serve import endpoint, find_server, serve
from solver.kaggle.supervisor import EngineLimits

__all__ = ["COMPETITIONS", "CallRecord", "Competition", "EngineLimits", "KagglePredictor", "PredictorOptions",
           "add_day_answers", "check_day", "competition", "competition_config", "endpoint", "find_server",
           "process_start", "rehearse", "rehearse_day",
           "report_markdown", "run_gateway", "serve"]

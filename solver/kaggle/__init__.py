"""The Kaggle submission: the ``predict`` adapter and the competition gateway glue.

Rooms: ``competition`` (the competitions as data, the config overlay), ``rows`` (rows in, frames out),
``predictor`` (:class:`KagglePredictor`, its options, call records), ``supervisor`` (the engine's life and its
limits), ``thread`` (the one event loop the engine lives on, for a synchronous caller),
``serve`` (the ``predict`` function the relay accepts, ``kaggle_evaluation``), ``settings`` (the notebook's
settings cell as one config: preset, config file, model, compile cache, overrides). Rehearsing it (a local run behind the
gateway, a Kaggle day on recorded attempts) is the measurement wing's (``solver.measure``).
Importing this package starts nothing; the names the notebook uses are re-exported here.
"""

from solver.kaggle.competition import COMPETITIONS, Competition, competition, competition_config
from solver.kaggle.predictor import (CacheNotLoaded, CallRecord, KagglePredictor, PredictorOptions,
                                     process_start)
from solver.kaggle.rows import check_prediction
from solver.kaggle.serve import endpoint, find_server, serve
from solver.kaggle.settings import notebook_config
from solver.kaggle.supervisor import EngineLimits

__all__ = ["COMPETITIONS", "CacheNotLoaded", "CallRecord", "Competition", "EngineLimits", "KagglePredictor", "PredictorOptions",
           "check_prediction", "competition", "competition_config", "endpoint", "find_server", "notebook_config",
           "process_start", "serve"]

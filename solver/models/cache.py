"""Where the solver keeps the models it builds itself (``$SOLVER_CACHE``, default ``~/.cache/solver``), and the
error for a model that cannot be had."""

from __future__ import annotations

import os
from pathlib import Path

from solver.errors import BadInput


class ModelError(BadInput, RuntimeError):
    """The embedded model cannot be prepared; the message says what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("SOLVER_CACHE", Path.home() / ".cache" / "solver"))

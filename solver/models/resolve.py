"""Which model a run loads: the path or hub id the config names, or the embedded tiny model when it names none;
and where the solver keeps the models it builds itself (``$SOLVER_CACHE``, default ``~/.cache/solver``)."""

from __future__ import annotations

import os
from pathlib import Path

from solver.errors import BadInput


class ModelError(BadInput, RuntimeError):
    """The embedded model cannot be prepared; the message says what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("SOLVER_CACHE", Path.home() / ".cache" / "solver"))


def resolve_model(model: str | None) -> str:
    """The model to load: the given path or hub id, or the embedded tiny model when none is given."""
    if model is None:
        from solver.models.tiny import ensure_tiny_model

        return str(ensure_tiny_model())
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelError(f"model directory {path} has no config.json")
        return str(path)
    if model.startswith((".", "/", "~")) or os.sep in model.strip("/").split("/", 1)[-1]:
        raise ModelError(f"model path {model} does not exist")
    return model  # a hub id such as org/name; vLLM fetches it where the user has a network

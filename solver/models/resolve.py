"""Which model a run loads: the path or hub id the config names, or the embedded tiny model when it names none."""

from __future__ import annotations

import os
from pathlib import Path

from solver.models.cache import ModelError
from solver.models.tiny import ensure_tiny_model


def resolve_model(model: str | None) -> str:
    """The model to load: the given path or hub id, or the embedded tiny model when none is given."""
    if model is None:
        return str(ensure_tiny_model())
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelError(f"model directory {path} has no config.json")
        return str(path)
    if model.startswith((".", "/", "~")) or os.sep in model.strip("/").split("/", 1)[-1]:
        raise ModelError(f"model path {model} does not exist")
    return model  # a hub id such as org/name; vLLM fetches it where the user has a network

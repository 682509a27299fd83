"""Where a configuration comes from: a preset (data in ``solver/presets/*.yaml``), then a user's YAML file, then
dotted overrides (``--set KEY=VALUE`` and the flags), validated as one ``Config``; and where it goes (the resolved
config is saved beside every run, ``config.yaml``, so a run can be reproduced or replayed).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from solver.config.schema import Config, _merge, _undot, from_dict
from solver.errors import ConfigError, first_line

PRESET_DIR = Path(__file__).resolve().parents[1] / "presets"


def presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name: str) -> dict[str, Any]:
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown preset {name!r} (choose from {', '.join(presets())})")
    return yaml.safe_load(path.read_text()) or {}


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A user's YAML config file as data (sections of keys); a one-line ConfigError when it cannot be read."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config {path}: {first_line(exc)}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must hold sections of keys (a mapping), not a {type(data).__name__}")
    return data


def load_config(preset: str = "tiny", config_file: str | Path | Mapping[str, Any] | None = None,
                overrides: dict[str, Any] | None = None) -> Config:
    """Preset, then a user YAML file (a path, or its data as ``read_config_file`` read it), then dotted overrides
    (CLI flags), validated as one config.

    An override of None (``--set KEY=null``) clears a nullable key and is an error for any other key; callers
    leave out what the user did not set rather than passing None for it.

    >>> load_config("h100", overrides={"budget.total_s": None}).budget.total_s is None
    True
    >>> load_config(overrides={"solve.reps": None})
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: solve.reps cannot be null (only keys documented as 'or null' can)
    """
    data = _merge(Config().to_dict(), load_preset(preset))
    data["preset"] = preset
    if config_file is not None:
        user = config_file if isinstance(config_file, Mapping) else read_config_file(config_file)
        data = _merge(data, dict(user))
    data = _merge(data, _undot(dict(overrides or {})))
    return from_dict(data)


def save_config(config: Config, path: Path) -> None:
    """Write ``config`` as YAML (what ``load_config`` and ``from_dict`` read back), atomically."""
    from solver.files import atomic_write

    atomic_write(path, yaml.safe_dump(config.to_dict(), sort_keys=False))


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as dotted overrides, values parsed as YAML; ConfigError on a bad item.

    >>> parse_overrides(["solve.reps=8", "stop.stoppers=[agree:4]", "budget.total_s=null"])
    {'solve.reps': 8, 'stop.stoppers': ['agree:4'], 'budget.total_s': None}
    >>> parse_overrides(["solve.reps"])
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: --set expects KEY=VALUE, got 'solve.reps'
    """
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            overrides[key] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {key}: cannot parse {value!r}") from exc
    return overrides

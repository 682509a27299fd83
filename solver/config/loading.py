"""Where a configuration comes from: a preset (data in ``solver/presets/*.yaml``), then a user's YAML file, then
dotted overrides (``--set KEY=VALUE`` and the flags), validated as one ``Config``; and where it goes (the resolved
config is saved beside every run, ``config.yaml``, so a run can be reproduced or replayed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Choices:
    """What the user chose, layer by layer over a preset: a ``--config`` file's data (read once), ``--set``
    overrides and a command's flags (dotted keys each; a flag left out is not there). Later layers win.

    >>> choices = Choices(file={"solve": {"reps": 4}}, overrides={"sampling.seed": 3}, flags={"solve.reps": 6})
    >>> config = choices.config()
    >>> config.solve.reps, config.sampling.seed, choices.sets("solve.reps"), choices.sets("budget.problems")
    (6, 3, True, False)
    """

    preset: str = "tiny"
    file: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)  # --set KEY=VALUE, values parsed as YAML
    flags: dict[str, Any] = field(default_factory=dict)

    def config(self) -> Config:
        """The validated config (a one-line ConfigError otherwise)."""
        return load_config(self.preset, self.file, {**self.overrides, **self.flags})

    def sets(self, key: str) -> bool:
        """Whether the user chose dotted ``key`` (a flag, ``--set key=...``, or the ``--config`` file), not the
        preset.

        >>> Choices(overrides={"budget.problems": 30}).sets("budget.problems")
        True
        >>> Choices(overrides={"budget": {"problems": 30}}).sets("budget.problems")
        True
        >>> Choices(file={"budget": {"total_s": 60}}, overrides={"budget.total_s": 60}).sets("budget.problems")
        False
        """
        for dotted, value in {**self.overrides, **self.flags}.items():
            if dotted == key or (key.startswith(dotted + ".") and _holds(value, key[len(dotted) + 1 :])):
                return True
        return _holds(self.file, key)


def read_choices(preset: str | None = None, config_file: str | Path | None = None, sets: Sequence[str] = (),
                 flags: Mapping[str, Any] | None = None) -> Choices:
    """The user's choices from a command line: ``--preset`` (None: tiny), ``--config`` (read and checked here,
    once), ``--set`` items and the flags' dotted keys; a one-line ConfigError when the file or an item is bad."""
    return Choices(preset or "tiny", read_config_file(config_file) if config_file else {}, parse_overrides(list(sets)),
                   dict(flags or {}))


def _holds(node: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


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

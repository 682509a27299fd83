"""What a validation sweep varies: the spec (from YAML and flags), its checks, and the stopping rule each
stopper setting names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from solver.config import ConfigError, StopConfig
from solver.errors import BadInput, first_line
from solver.types import Ballot, Stopper, VoteState  # noqa: F401 - Ballot, VoteState: doctests

NO_STOPPER = "none"


class SweepError(BadInput, ValueError):
    """A sweep that cannot run; the message is one line meant for the user."""


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep. Empty tuples mean "the base config's value"."""

    data: str
    reps: tuple[int, ...]
    workers: tuple[int, ...]
    temperatures: tuple[float, ...] = ()
    prompts: tuple[str, ...] = ()
    voters: tuple[str, ...] = ()
    stoppers: tuple[str, ...] = (NO_STOPPER,)  # each "none" or registry names joined by "+", e.g. "agree:4+esc:5"
    limit: int | None = None
    draws: int = 100  # random orders per problem and setting
    seed: int = 0
    jobs: int = 1  # processes for the offline replay (analysis only; results do not depend on it)
    preset: str = "tiny"
    config_file: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)  # dotted config keys, e.g. {"sampling.max_tokens": 64}

    def __post_init__(self) -> None:
        _require(bool(self.reps) and all(n > 0 for n in self.reps), "reps must be positive integers")
        _require(bool(self.workers) and all(w > 0 for w in self.workers), "workers must be positive integers")
        _require(all(t >= 0 for t in self.temperatures), "temperatures must be >= 0")
        _require(bool(self.stoppers), "stoppers must not be empty (use 'none')")
        _require(self.draws > 0, "draws must be > 0")
        _require(self.jobs >= 1, "jobs must be >= 1")
        _require(self.limit is None or self.limit > 0, "limit must be > 0")

    @property
    def max_reps(self) -> int:
        return max(self.reps)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise SweepError(message)


_SPEC_KEYS = {"data": "data", "reps": "reps", "workers": "workers", "temperature": "temperatures",
              "prompt": "prompts", "voter": "voters", "stopper": "stoppers", "limit": "limit", "draws": "draws",
              "seed": "seed", "jobs": "jobs", "preset": "preset", "config": "config_file", "set": "overrides"}


def spec_from_dict(data: dict[str, Any], where: str = "sweep spec") -> SweepSpec:
    """A spec from YAML-shaped data (keys as in ``evaluation/sweeps/*.yaml``); lists may be "1,2,4" strings.

    >>> s = spec_from_dict({"data": "demo", "reps": "1,2", "workers": [1, 2], "stopper": ["none", "agree:2"]})
    >>> s.reps, s.workers, s.stoppers, s.temperatures
    ((1, 2), (1, 2), ('none', 'agree:2'), ())
    >>> spec_from_dict({"data": "demo", "reps": [1], "workers": [1], "colour": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.offline.sweep.spec.SweepError: sweep spec: unknown key 'colour' (known: config, data, draws, ...)
    """
    unknown = sorted(set(data) - set(_SPEC_KEYS))
    if unknown:
        raise SweepError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_SPEC_KEYS))})")
    for needed in ("data", "reps", "workers"):
        if data.get(needed) in (None, "", []):
            raise SweepError(f"{where}: {needed} is required")
    try:
        fields: dict[str, Any] = {
            "data": str(data["data"]),
            "reps": _numbers(data["reps"], int), "workers": _numbers(data["workers"], int),
            "temperatures": _numbers(data.get("temperature", ()), float),
            "prompts": _words(data.get("prompt", ())), "voters": _words(data.get("voter", ())),
            "stoppers": _words(data.get("stopper", ())) or (NO_STOPPER,),
        }
        for key in ("limit", "draws", "seed", "jobs"):
            if data.get(key) is not None:
                fields[key] = _numbers(data[key], int)[0]
    except SweepError as exc:
        raise SweepError(f"{where}: {exc}") from exc
    if data.get("preset") is not None:
        fields["preset"] = str(data["preset"])
    if data.get("config") is not None:
        fields["config_file"] = str(data["config"])
    overrides = data.get("set") or {}
    if not isinstance(overrides, dict):
        raise SweepError(f"{where}: set must be a mapping of dotted config keys")
    fields["overrides"] = dict(overrides)
    try:
        return SweepSpec(**fields)
    except SweepError as exc:
        raise SweepError(f"{where}: {exc}") from exc


def _numbers(value: Any, kind: type) -> tuple[Any, ...]:
    """Numbers from a list or a comma-separated string, de-duplicated and sorted.

    >>> _numbers("8,2,4,2", int), _numbers([0.6, 0.8], float), _numbers(3, int)
    ((2, 4, 8), (0.6, 0.8), (3,))
    """
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        try:
            number = kind(item)
        except (TypeError, ValueError):
            raise SweepError(f"not a number: {item!r}") from None
        if kind is int and isinstance(item, float) and item != number:
            raise SweepError(f"not a whole number: {item!r}")
        out.append(number)
    return tuple(sorted(set(out)))


def _words(value: Any) -> tuple[str, ...]:
    """Names from a list or a comma-separated string, order kept, de-duplicated.

    >>> _words("beta:0.95, none,beta:0.95"), _words(["tir"]), _words(None)
    (('beta:0.95', 'none'), ('tir',), ())
    """
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(dict.fromkeys(i.strip() for i in items if i.strip()))


def load_spec(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a sweep YAML file (CLI flags are layered on it before ``spec_from_dict``)."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SweepError(f"cannot read sweep spec {file}: {first_line(exc)}") from exc
    if not isinstance(data, dict):
        raise SweepError(f"sweep spec {file} must be a mapping")
    return data


def stopper_for(setting: str, reps: int) -> Stopper:
    """The stopping rule of a sweep setting ("none" or names joined by "+").

    >>> stopper_for("none", 4)(VoteState((Ballot("1"),) * 3, 4)), stopper_for("none", 4)(VoteState((None,) * 4, 4))
    (False, True)
    """
    from solver.core.stopping import make_stopper

    names = () if setting == NO_STOPPER else tuple(s for s in setting.split("+") if s)
    try:
        return make_stopper(StopConfig(stoppers=names), reps)
    except ConfigError as exc:
        raise SweepError(f"stopper {setting!r}: {exc}") from exc


def spec_to_dict(spec: SweepSpec) -> dict[str, Any]:
    """The spec in the YAML shape ``spec_from_dict`` reads (saved beside the results)."""
    return {"data": spec.data, "limit": spec.limit, "preset": spec.preset, "config": spec.config_file,
            "set": dict(spec.overrides), "reps": list(spec.reps), "workers": list(spec.workers),
            "temperature": list(spec.temperatures), "prompt": list(spec.prompts), "voter": list(spec.voters),
            "stopper": list(spec.stoppers), "draws": spec.draws, "seed": spec.seed, "jobs": spec.jobs}

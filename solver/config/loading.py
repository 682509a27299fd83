"""Where a configuration comes from: a preset (data in ``solver/presets/*.yaml``), then a user's YAML file, then
dotted overrides (``--set KEY=VALUE`` and the flags), validated as one ``Config``; and where it goes (the resolved
config is saved beside every run, ``config.yaml``, so a run can be reproduced or replayed). A measuring run's preset
and model come from its GPU flags, resolved at the end of this file (``gpu_preset``, ``add_gpu_arguments``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from solver.config.schema import Config, _merge, _undot, from_dict
from solver.errors import ConfigError, first_line

if TYPE_CHECKING:
    import argparse  # the GPU flags' parser and namespace: annotations only, so importing the config costs no argparse

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


# -- the GPU flags ---------------------------------------------------------------------------------------------------
# Which preset a measuring run uses, and the flags that choose it: the one resolver for ``--gpu`` and the one parser
# block for ``--gpu``, ``--preset``, ``--model`` and ``--set`` that the benchmark scripts and the measuring commands
# share.
#
# A CPU run (no ``--gpu``, no ``--preset``) uses the ``tiny`` preset, whose model is the embedded tiny one; ``--gpu``
# without ``--preset`` uses ``h100-gptoss`` (``benchmarks/engine.py``'s synthetic pipelines: ``h100``, a preset that
# speaks no harmony), whose model ``--model`` names. ``--preset`` wins over both; ``--model`` is ``engine.model`` and
# ``--set`` any other key. The time models are named after the presets they time, so a run's default time model is
# its default preset's (``gpu_time_model``).
#
# ``solver day`` and ``engine.py --workload real`` read ``--gpu`` another way, stated where they do it
# (``solver.measure.workload.preset_engine``): ``--preset`` defaults to ``h100-gptoss`` and a CPU run keeps its
# prompt, sampling and sandbox but runs the tiny preset's engine and the tiny harmony model. ``moe_numerics.py``'s
# ``--gpu`` picks no preset at all: it calls vLLM's CUDA kernels instead of their CPU reference.

GPU_PRESET = "h100-gptoss"  # --gpu's preset where --preset is left out (and the time model that times it)
CPU_PRESET = "tiny"  # a CPU run's: the tiny model on vLLM's CPU build

GPU_HELP = f"preset {GPU_PRESET} (unless --preset); default {CPU_PRESET}"
SET_HELP = "config override, e.g. --set engine.args.gpu_memory_utilization=0.95"


def gpu_preset(preset: str | None, gpu: bool, gpu_default: str = GPU_PRESET) -> str:
    """The preset a run uses: ``preset`` when given, else ``gpu_default`` on a GPU, else the tiny one.

    >>> gpu_preset(None, False), gpu_preset(None, True), gpu_preset("h200-gptoss", False)
    ('tiny', 'h100-gptoss', 'h200-gptoss')
    >>> gpu_preset(None, True, "h100")  # a script whose GPU run is another preset's
    'h100'
    """
    return preset or (gpu_default if gpu else CPU_PRESET)


def gpu_time_model(gpu: bool) -> str:
    """The time model a run is timed on where neither ``--time-model`` nor the config names one: the default
    preset's, by name.

    >>> gpu_time_model(False), gpu_time_model(True)
    ('tiny', 'h100-gptoss')
    """
    return gpu_preset(None, gpu)


def gpu_overrides(model: str | None, overrides: Sequence[str],
                  extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The dotted overrides of ``--set`` items, ``--model`` as ``engine.model`` over them, then ``extra`` (a
    script's own keys) over both; a one-line ``ConfigError`` for a bad item.

    >>> gpu_overrides("/m", ["engine.model=/x", "solve.reps=4"], {"solve.reps": 2})
    {'engine.model': '/m', 'solve.reps': 2}
    """
    given = parse_overrides(list(overrides))
    if model:
        given["engine.model"] = model
    return {**given, **(extra or {})}


def gpu_config(args: argparse.Namespace, extra: Mapping[str, Any] | None = None,
               gpu_default: str = GPU_PRESET) -> Config:
    """The config the flags of :func:`add_gpu_arguments` choose (``args.gpu``, ``args.preset``, ``args.model``,
    ``args.overrides``): :func:`gpu_preset`'s preset with :func:`gpu_overrides`. A ``ConfigError`` (one line) for
    a bad preset, item or value.

    >>> from argparse import Namespace
    >>> gpu_config(Namespace(gpu=False, preset=None, model=None, overrides=["solve.reps=3"])).solve.reps
    3
    """
    return load_config(gpu_preset(args.preset, args.gpu, gpu_default),
                       overrides=gpu_overrides(args.model, args.overrides, extra))


def add_gpu_arguments(parser: argparse.ArgumentParser, *, gpu_help: str = GPU_HELP, preset_default: str | None = None,
                      preset_help: str | None = None, model_help: str = "engine.model: a local path",
                      set_help: str = SET_HELP) -> None:
    """``--gpu``, ``--preset``, ``--model`` and ``--set`` (into ``overrides``), as every measuring script and command
    takes them; the help texts a script words its own way are its to give."""
    parser.add_argument("--gpu", action="store_true", help=gpu_help)
    parser.add_argument("--preset", default=preset_default, help=preset_help)
    parser.add_argument("--model", default=None, help=model_help)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=set_help)

"""How engines are laid over a machine's GPUs, as one value: a ``Layout`` (tensor, pipeline and data parallel sizes
of one engine, and how many such engines run side by side), from which the GPUs, the engine's batch and the layout's
name follow. Everything that places, counts, names or times engines reads it: the cluster's actor count, ``solver
serve``'s servers, the time model's per-layout figures (keyed by ``Layout.name``), the sweep's plan, the dry run's
GPU check and the layout benchmark (``solver.measure.scaling``).

It is parsed once, from one of two spellings:

- **the engine's arguments** (``engine.args``, passed to vLLM unchanged, plus a server's own flags such as
  ``-tp 2``, which win as they do on the server) and ``--cluster``'s engine count: ``Layout.of``;
- **a name** (``--layout``, the time model's ``layouts:`` keys, the layout benchmark's ``--layouts``):
  ``parse_layout``. ``tp2``, ``tp1-dp2``, ``tp4-pp2``: one engine; ``replicas:N`` (or ``tp2-replicas:N``...): N
  engines side by side; ``one`` is ``tp1`` and ``dpN`` is ``tp1-dpN``.

A new layout is a name: nothing here lists them.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from solver.errors import ConfigError

# vLLM's own default for ``max_num_seqs`` differs by version and device; 64 is the CPU build's and the smallest,
# so a count derived from it never overfills a batch.
DEFAULT_MAX_NUM_SEQS = 64

# vLLM's argument for each parallel size, the part of a layout's name that spells it, and its short server flag.
_SIZES = (("tensor", "tensor_parallel_size", "tp"), ("pipeline", "pipeline_parallel_size", "pp"),
          ("data", "data_parallel_size", "dp"))
_PART = re.compile(r"^(tp|pp|dp)(\d+)$|^replicas:(\d+)$")
NAMES = "tpN[-ppN][-dpN][-replicas:N] (or one, dpN, replicas:N)"


@dataclass(frozen=True)
class Layout:
    """One engine's parallel sizes, the sequences each of its data-parallel ranks batches, and the engines of it
    side by side.

    >>> two = Layout(data=2, seqs=128); two.name, two.engine_gpus, two.batch
    ('tp1-dp2', 2, 256)
    >>> four = Layout(tensor=2, replicas=2); four.name, four.label, four.engine_gpus, four.gpus
    ('tp2', 'tp2-replicas:2', 2, 4)
    """

    tensor: int = 1  # tensor_parallel_size: GPUs one copy of the model's layers is split over
    pipeline: int = 1  # pipeline_parallel_size: GPUs its layers are staged over
    data: int = 1  # data_parallel_size: engine cores inside the one engine, each with its own batch
    replicas: int = 1  # engines side by side (cluster actors, serve's servers), each on its own GPUs
    seqs: int = DEFAULT_MAX_NUM_SEQS  # max_num_seqs: sequences one data-parallel rank batches at once

    def __post_init__(self) -> None:
        for key in ("tensor", "pipeline", "data", "replicas", "seqs"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ConfigError(f"layout: {key} must be a whole number >= 1, got {getattr(self, key)!r}")

    @classmethod
    def of(cls, engine_args: Mapping[str, Any], extra_args: Sequence[str] = (), replicas: int = 1) -> Layout:
        """The layout vLLM is asked for by ``engine_args`` (``engine.args``) and a server's ``extra_args`` (its own
        flags, short or long spelling, read after the config's so theirs win), with ``replicas`` engines of it.

        >>> Layout.of({}), Layout.of({"tensor_parallel_size": 2}, ["-tp", "1"]).name
        (Layout(tensor=1, pipeline=1, data=1, replicas=1, seqs=64), 'tp1')
        >>> Layout.of({"data_parallel_size": 2, "max_num_seqs": 128}, ["-tp", "2"], replicas=2).label
        'tp2-dp2-replicas:2'
        >>> Layout.of({"tensor_parallel_size": "two"})
        Traceback (most recent call last):
        ...
        solver.errors.ConfigError: engine.args.tensor_parallel_size must be a whole number, got 'two'
        """
        merged = {**engine_args, **_flag_sizes(extra_args)}
        sizes = {field: _whole(merged, arg) for field, arg, _ in _SIZES}
        seqs = _whole(merged, "max_num_seqs") if merged.get("max_num_seqs") else DEFAULT_MAX_NUM_SEQS
        return cls(**sizes, replicas=replicas, seqs=seqs)

    @property
    def engine_gpus(self) -> int:
        """GPUs one engine (one cluster actor, one ``solver serve`` server) spans: tensor x pipeline x data."""
        return self.tensor * self.pipeline * self.data

    @property
    def gpus(self) -> int:
        """GPUs all the engines span."""
        return self.engine_gpus * self.replicas

    @property
    def batch(self) -> int:
        """Sequences one engine batches at once: ``seqs`` per data-parallel rank (each rank schedules its own
        batch; tensor and pipeline parallel ranks share one)."""
        return self.seqs * self.data

    @property
    def name(self) -> str:
        """One engine's layout, as the time model's ``layouts:`` keys and ``--layout`` spell it: ``tp1``, ``tp2``,
        ``tp1-dp2``, ``tp4-pp2``."""
        return (f"tp{self.tensor}" + (f"-pp{self.pipeline}" if self.pipeline > 1 else "")
                + (f"-dp{self.data}" if self.data > 1 else ""))

    @property
    def label(self) -> str:
        """The whole layout's name, the engines side by side included (``parse_layout`` reads it back):
        ``tp2``, ``replicas:2``, ``tp2-replicas:2``."""
        if self.replicas == 1:
            return self.name
        return ("" if self.engine_gpus == 1 else f"{self.name}-") + f"replicas:{self.replicas}"

    @property
    def engine(self) -> Layout:
        """One engine of this layout (no replicas)."""
        return dataclasses.replace(self, replicas=1)

    def with_replicas(self, replicas: int) -> Layout:
        return dataclasses.replace(self, replicas=replicas)

    def engine_args(self) -> dict[str, int]:
        """The engine arguments that ask vLLM for this layout's engine (sizes of 1 are vLLM's default, left out).

        >>> parse_layout("tp1").engine_args(), parse_layout("tp2-dp2").engine_args()
        ({}, {'tensor_parallel_size': 2, 'data_parallel_size': 2})
        """
        return {arg: getattr(self, field) for field, arg, _ in _SIZES if getattr(self, field) > 1}

    def overrides(self) -> dict[str, int]:
        """``engine_args`` as config keys (``--set`` / ``Config.replace``).

        >>> parse_layout("tp2").overrides()
        {'engine.args.tensor_parallel_size': 2}
        """
        return {f"engine.args.{k}": v for k, v in self.engine_args().items()}

    @property
    def parallel_problems(self) -> int:
        """Problems one engine of this layout solves at once: one per data-parallel rank (each rank batches its own
        sequences, so each needs a problem's repetitions to work on), else one, as on Kaggle.

        >>> parse_layout("dp2").parallel_problems, parse_layout("tp2").parallel_problems
        (2, 1)
        """
        return self.data

    def run_overrides(self) -> dict[str, int]:
        """Config keys that run a workload in this layout: ``overrides``, and with data-parallel ranks as many
        problems at once as ranks (``parallel_problems``).

        >>> parse_layout("dp2").run_overrides(), parse_layout("replicas:2").run_overrides()
        ({'engine.args.data_parallel_size': 2, 'solve.parallel_problems': 2}, {})
        """
        at_once = {"solve.parallel_problems": self.parallel_problems} if self.parallel_problems > 1 else {}
        return {**self.overrides(), **at_once}

    def engines_on(self, gpus: int) -> int:
        """Engines of this layout that ``gpus`` GPUs hold; a one-line ConfigError when they hold none.

        >>> parse_layout("tp2").engines_on(8), parse_layout("tp1").engines_on(2), parse_layout("tp2").engines_on(5)
        (4, 2, 2)
        >>> parse_layout("tp2").engines_on(1)
        Traceback (most recent call last):
        ...
        solver.errors.ConfigError: layout tp2 spans 2 GPUs per engine; 1 GPU holds none
        """
        if gpus < self.engine_gpus:
            raise ConfigError(f"layout {self.name} spans {self.engine_gpus} GPUs per engine; {gpus} GPU"
                              f"{'' if gpus == 1 else 's'} holds none")
        return gpus // self.engine_gpus


def parse_layout(text: str) -> Layout:
    """A layout from its name (see the module docstring); a one-line ConfigError for anything else.

    >>> [parse_layout(t).label for t in ("one", "tp2", "dp2", "replicas:2", "tp4-pp2", "tp2-replicas:3")]
    ['tp1', 'tp2', 'tp1-dp2', 'replicas:2', 'tp4-pp2', 'tp2-replicas:3']
    >>> all(parse_layout(parse_layout(t).label) == parse_layout(t) for t in ("tp2-dp4", "replicas:4", "pp2"))
    True
    >>> parse_layout("tp")
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: layout 'tp' is not tpN[-ppN][-dpN][-replicas:N] (or one, dpN, replicas:N)
    """
    text = text.strip()
    if text == "one":
        return Layout()
    sizes: dict[str, int] = {}
    for part in text.split("-"):
        match = _PART.match(part)
        key = (match.group(1) or "replicas") if match else None
        size = int(match.group(2) or match.group(3)) if match else 0
        if key is None or size < 1 or key in sizes:
            raise ConfigError(f"layout {text!r} is not {NAMES}")
        sizes[key] = size
    return Layout(tensor=sizes.get("tp", 1), pipeline=sizes.get("pp", 1), data=sizes.get("dp", 1),
                  replicas=sizes.get("replicas", 1))


def engine_batch(engine_args: Mapping[str, Any]) -> int:
    """Sequences one engine batches at once, from its arguments alone (``Layout.batch``): ``max_num_seqs`` x
    ``data_parallel_size``.

    >>> engine_batch({"max_num_seqs": 128, "data_parallel_size": 2}), engine_batch({"tensor_parallel_size": 4})
    (256, 64)
    """
    return Layout.of(engine_args).batch


def _whole(args: Mapping[str, Any], key: str) -> int:
    """A size from engine arguments: a missing, null or zero one is vLLM's default, 1."""
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, str, type(None))) or (
            isinstance(value, str) and not value.strip().isdigit()):
        raise ConfigError(f"engine.args.{key} must be a whole number, got {value!r}")
    return max(1, int(value or 1))


def _flag_sizes(extra_args: Sequence[str]) -> dict[str, int]:
    """The parallel sizes and ``max_num_seqs`` that a server's own flags set.

    >>> _flag_sizes(["-dp", "2", "--max-num-seqs=32", "--data-parallel-size-local", "4"])
    {'data_parallel_size': 2, 'max_num_seqs': 32}
    >>> _flag_sizes(["-tp", "x"])  # a bad value is left to the server to refuse
    {}
    """
    if not extra_args:
        return {}
    # exit_on_error=False and no abbreviations: only exact vLLM spellings count.
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for _, arg, short in _SIZES:
        parser.add_argument("--" + arg.replace("_", "-"), "-" + short, dest=arg, type=int, default=None)
    parser.add_argument("--max-num-seqs", dest="max_num_seqs", type=int, default=None)
    try:
        known, _ = parser.parse_known_args(list(extra_args))
    except argparse.ArgumentError:
        return {}
    return {k: v for k, v in vars(known).items() if v is not None}

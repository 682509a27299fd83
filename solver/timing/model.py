"""An engine's speed as data: seconds per decode step by sequences decoding and the context they hold, the cost of
a request (its latency and the prefill of what its prompt adds), the prefix cache's capacity, and the engine's
start. One YAML file per named setting in ``solver/timing/data`` (``h100-gptoss``: gpt-oss-120b on one H100 as the
preset runs it; ``tiny``: the tiny preset on this CPU), each number with its source; ``python -m solver.timing.fit``
refits one from a benchmark timeline.

The rules the numbers feed (``solver.timing.steps`` and ``solver.timing.timeline`` apply them):

- decoding: every sequence in the batch gains one token per step, and a step takes
  ``step_s(B) + context_s × S`` seconds for B sequences decoding that hold S context tokens in all (weights read
  once per step, the KV cache read per context token); ``step_s`` is interpolated between measured batch sizes;
- a request waits ``request_s`` (admission, scheduling, the first step) and then prefills its uncached prompt
  tokens at ``prefill_tokens_per_s``, during which no sequence decodes (one engine, one step at a time);
- uncached: the whole prompt for an attempt's first request; later, what was appended since the previous request
  plus the previous request's last partial block of ``block_tokens``; but once the cache would hold more than
  ``cache_tokens`` (``cache_per_context`` tokens per context token of the sequences decoding plus the new prompt),
  the whole prompt is prefilled again (the all-or-nothing loss of a hybrid model's cache, benchmarks/README.md);
- ``start_s``: the engine's start, counted once against a run's total time;
- ``fitted_on``: the result files the numbers were fitted on (``benchmarks/results``), each with the numbers it
  fed: a check on one of them is in-sample, the fit's residual (``benchmarks/day_check.py`` then reports
  leave-one-problem-out refits as the estimate of error);
- ``rebuild_s``: replacing an engine whose process died, as the Kaggle supervisor does (the dead one closed, a new
  one started), measured by killing the engine core mid-problem (``benchmarks/day.py --kill-engine-at``); null
  where not measured.

Layouts (``layouts:`` in the data, ``LayoutFigures``): the same model run on several GPUs of the machine, one entry
per engine layout, keyed by its name (``solver.config.Layout``: ``tp2`` is one engine over two GPUs by tensor
parallelism, ``tp1-dp2`` one engine of two data-parallel cores, ``tp1`` the model as it is, one GPU an engine; the
name says the GPUs), each with only the figures measured otherwise: its own cache size, its own speed as
``time_scale`` on every engine second, and for N engines side by side (replicas, one per GPU or GPU group)
``replica_time_scale``: how much slower each engine runs beside the others than alone (shared host, PCIe, CPU). A new
layout is one entry here; nothing in the code lists them. ``EngineTimeModel.for_layout`` gives one engine's model in
a layout; ``solver.offline.sweep`` plans a validation of P problems x N attempts on G GPUs with it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from solver.config import ConfigError, Layout, parse_layout

DATA_DIR = Path(__file__).parent / "data"


# The keys of the model a layout may measure otherwise (its own figures replace the base model's).
LAYOUT_FIGURES = ("step_s", "context_s", "prefill_tokens_per_s", "request_s", "block_tokens", "cache_tokens",
                  "cache_per_context", "start_s")
# ``gpus`` is read for files written before the layout's name said it, and must agree with the name.
LAYOUT_KEYS = ("gpus", "description", "time_scale", "replica_time_scale", *LAYOUT_FIGURES, "sources")


@dataclass(frozen=True)
class LayoutFigures:
    """What a time model measured for one engine layout (``solver.config.Layout``, keyed by its name: ``tp1``,
    ``tp2``, ``tp1-dp2``...), see the module docstring; its GPUs are the layout's own."""

    layout: Layout  # one engine's (replicas 1)
    time_scale: float = 1.0  # every engine second (step, context, request, prefill) times this; < 1 is faster
    replica_time_scale: float = 1.0  # the same, for each engine when several run side by side on one machine
    figures: tuple[tuple[str, Any], ...] = ()  # (key of LAYOUT_FIGURES, value): measured for this layout itself
    description: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(self.layout.replicas == 1, f"layout {self.layout.label}: a time model's layout is one engine's "
                                          "(engines side by side: replica_time_scale)")
        _check(self.time_scale > 0 and self.replica_time_scale > 0,
               f"layout {self.name}: time_scale and replica_time_scale must be > 0")
        unknown = sorted({k for k, _ in self.figures} - set(LAYOUT_FIGURES))
        _check(not unknown, f"layout {self.name}: unknown key {unknown[0]!r}" if unknown else "")

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def gpus(self) -> int:
        """GPUs one engine of the layout spans."""
        return self.layout.engine_gpus

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.description:
            data["description"] = self.description
        if self.time_scale != 1.0:
            data["time_scale"] = self.time_scale
        if self.replica_time_scale != 1.0:
            data["replica_time_scale"] = self.replica_time_scale
        for key, value in self.figures:
            data[key] = {b: s for b, s in value} if key == "step_s" else value
        if self.sources:
            data["sources"] = dict(self.sources)
        return data


@dataclass(frozen=True)
class FitInput:
    """A result file a model was fitted on (``benchmarks/results``) and the numbers it fed: a check on that file
    is in-sample for those numbers, the fit's residual and not an estimate of its error."""

    file: str
    numbers: tuple[str, ...]


@dataclass(frozen=True)
class EngineTimeModel:
    """One engine setting's speed (see the module docstring for how the numbers are used).

    >>> m = EngineTimeModel("m", ((1, 0.005), (8, 0.006)), context_s=1e-8)
    >>> round(m.step_seconds(1, 0), 6), round(m.step_seconds(8, 100_000), 6), round(m.step_seconds(4, 0), 6)
    (0.005, 0.007, 0.005429)
    >>> round(m.step_seconds(16, 0), 6)  # beyond the last point: its slope goes on
    0.007143
    """

    name: str
    step_s: tuple[tuple[int, float], ...]  # (sequences decoding, seconds per step with no context), rising
    context_s: float = 0.0  # seconds per step per context token held by the decoding sequences
    prefill_tokens_per_s: float = math.inf
    request_s: float = 0.0  # per request, before its prefill
    block_tokens: int = 16
    cache_tokens: int | None = None  # None: the prefix cache never loses a context
    cache_per_context: float = 1.0
    start_s: float = 0.0
    rebuild_s: float | None = None  # seconds; None: not measured
    description: str = ""
    sources: dict[str, str] = field(default_factory=dict)  # key -> where its number came from
    layouts: tuple[LayoutFigures, ...] = ()  # other ways to run it on a machine's GPUs (tp1: the model as it is)
    fitted_on: tuple[FitInput, ...] = ()  # the result files the numbers were fitted on, each with what it fed

    def __post_init__(self) -> None:
        points = self.step_s
        _check(bool(points), f"time model {self.name}: step_s needs at least one point")
        _check(all(b >= 1 and s > 0 for b, s in points), f"time model {self.name}: step_s needs sequences >= 1 "
                                                         "and seconds > 0")
        _check(all(b1 < b2 and s1 <= s2 for (b1, s1), (b2, s2) in zip(points, points[1:])),
               f"time model {self.name}: step_s must rise with the sequences (a larger batch never steps faster)")
        _check(self.context_s >= 0 and self.request_s >= 0 and self.start_s >= 0,
               f"time model {self.name}: context_s, request_s and start_s must be >= 0")
        _check(self.prefill_tokens_per_s > 0, f"time model {self.name}: prefill_tokens_per_s must be > 0")
        _check(self.block_tokens >= 1, f"time model {self.name}: block_tokens must be >= 1")
        _check(self.cache_tokens is None or self.cache_tokens > 0, f"time model {self.name}: cache_tokens must be "
                                                                   "> 0 or null")
        _check(self.cache_per_context > 0, f"time model {self.name}: cache_per_context must be > 0")
        _check(self.rebuild_s is None or self.rebuild_s >= 0, f"time model {self.name}: rebuild_s must be >= 0 "
                                                               "or null")

    def base_seconds(self, sequences: int) -> float:
        """Seconds per decode step for ``sequences`` holding no context (linear between measured points)."""
        points = self.step_s
        sizes = [b for b, _ in points]
        i = bisect.bisect_left(sizes, sequences)
        if i < len(points) and sizes[i] == sequences:
            return points[i][1]
        if i == 0:
            return points[0][1]
        if i == len(points):
            if len(points) == 1:
                return points[0][1]
            (b1, s1), (b2, s2) = points[-2], points[-1]
            return s2 + (s2 - s1) / (b2 - b1) * (sequences - b2)
        (b1, s1), (b2, s2) = points[i - 1], points[i]
        return s1 + (s2 - s1) * (sequences - b1) / (b2 - b1)

    def step_seconds(self, sequences: int, context: float) -> float:
        """Seconds per decode step for ``sequences`` holding ``context`` tokens in all."""
        return self.base_seconds(sequences) + self.context_s * context

    def tokens_per_s(self, sequences: int, context_each: float) -> float:
        """Decode throughput of ``sequences`` at ``context_each`` tokens each (the probes' measure).

        >>> EngineTimeModel("m", ((8, 0.008),)).tokens_per_s(8, 16_000)
        1000.0
        """
        return sequences / self.step_seconds(sequences, sequences * context_each)

    def uncached(self, prompt: int, previous_end: int | None, held: float) -> int:
        """Prompt tokens a request prefills: all of them for an attempt's first request (``previous_end`` None)
        or when the cache would hold more than it can (``held``: context tokens of the sequences decoding), else
        those past the last whole block of the previous request's context (``previous_end``).

        >>> m = EngineTimeModel("m", ((1, 0.01),), block_tokens=16, cache_tokens=1000, cache_per_context=2.0)
        >>> m.uncached(300, None, 0), m.uncached(300, 270, 0), m.uncached(300, 270, 250)
        (300, 44, 300)
        """
        if previous_end is None:
            return prompt
        if self.cache_tokens is not None and self.cache_per_context * (held + prompt) > self.cache_tokens:
            return prompt
        return max(0, prompt - (previous_end // self.block_tokens) * self.block_tokens)

    def fed(self, file: str) -> tuple[str, ...]:
        """The numbers result file ``file`` fed (by its name): none when a check on it is out of sample.

        >>> m = EngineTimeModel("m", ((7, 0.006),), fitted_on=(FitInput("day.json", ("step_s.7", "request_s")),))
        >>> m.fed("day.json"), m.fed("other.json")
        (('step_s.7', 'request_s'), ())
        """
        name = Path(file).name
        return next((f.numbers for f in self.fitted_on if f.file == name), ())

    def fed_by(self, number: str) -> tuple[str, ...]:
        """The result files that fed ``number`` (``step_s.7``, ``context_s``...).

        >>> m = EngineTimeModel("m", ((7, 0.006),), fitted_on=(FitInput("a.json", ("context_s",)),
        ...                                                    FitInput("b.json", ("context_s", "start_s"))))
        >>> m.fed_by("context_s"), m.fed_by("rebuild_s")
        (('a.json', 'b.json'), ())
        """
        return tuple(f.file for f in self.fitted_on if number in f.numbers)

    def figures(self, layout: Layout) -> LayoutFigures:
        """What the data says of ``layout``'s engine (looked up by its name); for ``tp1`` (one GPU an engine) the
        model as it is unless the data says more.

        >>> m = EngineTimeModel("m", ((1, 0.01),), layouts=(LayoutFigures(parse_layout("tp2"), time_scale=0.8),))
        >>> m.figures(parse_layout("tp2")).gpus, m.figures(Layout()).gpus
        (2, 1)
        >>> m.figures(parse_layout("tp4"))
        Traceback (most recent call last):
        ...
        solver.errors.ConfigError: time model m has no layout 'tp4' (it has tp1, tp2)
        """
        for known in self.layouts:
            if known.name == layout.name:
                return known
        if layout.name == Layout().name:
            return LayoutFigures(Layout())
        names = sorted({Layout().name, *(x.name for x in self.layouts)})
        raise ConfigError(f"time model {self.name} has no layout {layout.name!r} (it has {', '.join(names)})")

    def for_layout(self, layout: Layout) -> EngineTimeModel:
        """One engine's model in ``layout`` when ``layout.replicas`` engines of it run side by side: the layout's
        own figures in place of the base model's, then every engine second scaled (``time_scale``, and
        ``replica_time_scale`` for more than one replica).

        >>> m = EngineTimeModel("m", ((1, 0.01),), prefill_tokens_per_s=1000.0, start_s=10.0,
        ...                     layouts=(LayoutFigures(Layout(), replica_time_scale=1.25),
        ...                              LayoutFigures(parse_layout("tp2"), time_scale=0.5,
        ...                                            figures=(("start_s", 20.0),))))
        >>> two = m.for_layout(parse_layout("tp2")); two.name, two.step_s, two.prefill_tokens_per_s, two.start_s
        ('m/tp2', ((1, 0.005),), 2000.0, 20.0)
        >>> m.for_layout(parse_layout("replicas:2")).step_s, m.for_layout(Layout()).step_s
        (((1, 0.0125),), ((1, 0.01),))
        """
        known = self.figures(layout)
        model = replace(self, name=f"{self.name}/{layout.name}", layouts=(), **dict(known.figures))
        return scaled(model, self.scale(layout))

    def scale(self, layout: Layout) -> float:
        """Every engine second of this model times this in ``layout``: its ``time_scale``, and its
        ``replica_time_scale`` when more than one engine runs."""
        known = self.figures(layout)
        return known.time_scale * (known.replica_time_scale if layout.replicas > 1 else 1.0)

    def to_data(self) -> dict[str, Any]:
        """The model as the data file holds it."""
        data = {"name": self.name, "description": self.description,
                "step_s": {b: s for b, s in self.step_s}, "context_s": self.context_s,
                "prefill_tokens_per_s": self.prefill_tokens_per_s, "request_s": self.request_s,
                "block_tokens": self.block_tokens, "cache_tokens": self.cache_tokens,
                "cache_per_context": self.cache_per_context, "start_s": self.start_s, "rebuild_s": self.rebuild_s,
                "sources": dict(self.sources)}
        if self.fitted_on:
            data["fitted_on"] = {f.file: list(f.numbers) for f in self.fitted_on}
        if self.layouts:
            data["layouts"] = {layout.name: layout.to_data() for layout in self.layouts}
        return data


def scaled(model: EngineTimeModel, factor: float) -> EngineTimeModel:
    """``model`` with every engine second times ``factor`` (steps, context, requests, prefill); its start as it is.

    >>> m = scaled(EngineTimeModel("m", ((1, 0.01), (8, 0.02)), context_s=1e-8, prefill_tokens_per_s=100.0), 2.0)
    >>> m.step_s, m.context_s, m.prefill_tokens_per_s
    (((1, 0.02), (8, 0.04)), 2e-08, 50.0)
    """
    if factor == 1.0:
        return model
    return replace(model, step_s=tuple((b, s * factor) for b, s in model.step_s), context_s=model.context_s * factor,
                   request_s=model.request_s * factor, prefill_tokens_per_s=model.prefill_tokens_per_s / factor)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


KEYS = ("name", "description", "step_s", "context_s", "prefill_tokens_per_s", "request_s", "block_tokens",
        "cache_tokens", "cache_per_context", "start_s", "rebuild_s", "sources", "fitted_on", "layouts")


def _step_points(steps: Any, where: str) -> tuple[tuple[int, float], ...]:
    if not isinstance(steps, dict) or not steps:
        raise ConfigError(f"time model {where}: step_s must map sequences to seconds per step")
    return tuple(sorted((int(b), float(s)) for b, s in steps.items()))


def layout_from_data(name: str, data: Any, where: str) -> LayoutFigures:
    """A layout's figures from its entry under ``layouts:`` (keyed by the layout's name, ``solver.config.Layout``);
    a one-line ``ConfigError`` for a bad one."""
    if not isinstance(data, dict):
        raise ConfigError(f"time model {where}: layout {name} must be a mapping of keys")
    unknown = sorted(set(data) - set(LAYOUT_KEYS))
    if unknown:
        raise ConfigError(f"time model {where}: layout {name}: unknown key {unknown[0]!r} "
                          f"(known: {', '.join(LAYOUT_KEYS)})")
    try:
        layout = parse_layout(str(name))
    except ConfigError as exc:
        raise ConfigError(f"time model {where}: {exc}") from exc
    if data.get("gpus") is not None and data["gpus"] != layout.engine_gpus:
        raise ConfigError(f"time model {where}: layout {name} spans {layout.engine_gpus} GPU"
                          f"{'s' if layout.engine_gpus > 1 else ''}, not gpus {data['gpus']!r} (the name says it)")
    try:
        figures: list[tuple[str, Any]] = []
        for key in LAYOUT_FIGURES:
            if data.get(key) is None:
                continue
            value = data[key]
            figures.append((key, _step_points(value, where) if key == "step_s"
                            else int(value) if key in ("block_tokens", "cache_tokens") else float(value)))
        return LayoutFigures(layout, float(data.get("time_scale", 1.0)), float(data.get("replica_time_scale", 1.0)),
                             tuple(figures), str(data.get("description") or ""),
                             {str(k): str(v) for k, v in (data.get("sources") or {}).items()})
    except (TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"time model {where}: layout {name}: a value is not a number ({exc})") from exc


def from_data(data: Any, where: str) -> EngineTimeModel:
    """A model from its data (a mapping as ``to_data`` writes it); a one-line ``ConfigError`` for a bad one."""
    if not isinstance(data, dict):
        raise ConfigError(f"time model {where} must be a mapping of keys")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ConfigError(f"time model {where}: unknown key {unknown[0]!r}")
    try:
        points = _step_points(data.get("step_s"), where)
        numbers = {k: float(data[k]) for k in ("context_s", "prefill_tokens_per_s", "request_s", "cache_per_context",
                                               "start_s", "rebuild_s") if data.get(k) is not None}
        block = int(data.get("block_tokens", 16))
        cache = None if data.get("cache_tokens") is None else int(data["cache_tokens"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"time model {where}: a value is not a number ({exc})") from exc
    sources = data.get("sources") or {}
    if not isinstance(sources, dict):
        raise ConfigError(f"time model {where}: sources must map keys to text")
    layouts = data.get("layouts") or {}
    if not isinstance(layouts, dict):
        raise ConfigError(f"time model {where}: layouts must map layout names to their figures")
    fitted = data.get("fitted_on") or {}
    if not isinstance(fitted, dict) or not all(isinstance(v, list) for v in fitted.values()):
        raise ConfigError(f"time model {where}: fitted_on must map result files to the numbers they fed")
    figures = tuple(layout_from_data(n, v, where) for n, v in layouts.items())
    twice = sorted({x.name for x in figures if sum(y.name == x.name for y in figures) > 1})
    if twice:  # e.g. dp2 and tp1-dp2: one layout under two spellings
        raise ConfigError(f"time model {where}: layout {twice[0]} is given twice")
    return EngineTimeModel(str(data.get("name") or where), points, block_tokens=block, cache_tokens=cache,
                           description=str(data.get("description") or ""),
                           sources={str(k): str(v) for k, v in sources.items()},
                           fitted_on=tuple(FitInput(str(k), tuple(map(str, v))) for k, v in fitted.items()),
                           layouts=figures, **numbers)


def names() -> list[str]:
    """The time models shipped in ``solver/timing/data``."""
    return sorted(p.stem for p in DATA_DIR.glob("*.yaml"))


def load_time_model(name_or_path: str | Path) -> EngineTimeModel:
    """A shipped model by name (``h100-gptoss``) or a model file by path; a one-line ``ConfigError`` otherwise.

    >>> load_time_model("h100-gptoss").name
    'h100-gptoss'
    >>> load_time_model("h200")
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: unknown time model 'h200' (choose from h100-gptoss, h100-gptoss-marlin, h200-gptoss, h200-gptoss-marlin, tiny, or give a .yaml file)
    """
    text = str(name_or_path)
    path = Path(text) if text.endswith((".yaml", ".yml")) else DATA_DIR / f"{text}.yaml"
    if not path.is_file():
        if not text.endswith((".yaml", ".yml")):
            raise ConfigError(f"unknown time model {text!r} (choose from {', '.join(names())}, or give a .yaml file)")
        raise ConfigError(f"time model file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read time model {path}: {str(exc).splitlines()[0]}") from exc
    return from_data(data, str(path) if text.endswith((".yaml", ".yml")) else text)


def dump(model: EngineTimeModel) -> str:
    """The model as YAML text (sources included), for ``load_time_model`` to read back."""
    return yaml.safe_dump(model.to_data(), sort_keys=False, width=118)

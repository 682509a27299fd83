"""What a benchmark's results measure of an engine, read from the JSON the benchmarks write (``--json``): the decode
step and its context cost from a request timeline, the engine's holds and the turn latency of a day slice, the
rebuild a fault measured. ``solver.timing.fit`` writes them into a time model, naming their files.

- a real-shape timeline (``benchmarks/engine.py --workload real``): each request's seconds per token against the
  sequences decoding and the context they held meanwhile (averaged over its life) gives, by least squares weighted
  by tokens, the step time at the timeline's usual batch and the cost per context token (``decode_fit``); the
  median latency to the first token, less the prefill of the uncached prompt, is ``request_latency``;
- a day slice (``benchmarks/day.py --json``): a **hold** is a wait, from the send to the first token, of a request
  after an attempt's first whose first token came more than ``HOLD_S`` after it was sent (overlapping ones merged;
  ``holds``); decode is fitted on the requests no hold overlaps, over every problem of the slice, and the turn
  latency is the median over the requests after an attempt's first of the seconds from the previous request's end
  to this one's first token less its tool call and its uncached prefill (``day_fit``);
- a day slice with a fault (``benchmarks/day.py --kill-engine-at``): the rebuild's seconds (``rebuild_seconds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from solver.config import ConfigError

MIN_TOKENS = 200  # requests shorter than this are dominated by their admission, not their decode
GRID = 50  # points per request at which the batch it shared is read


HOLD_S = 1.0  # seconds to a first token past which a request waited on a hold: the day slice's first tokens come
# a median 0.1 s after the send, its holds 1.7-5.3 s after, and none between 0.9 and 1.6 s (h100_day-slice.json)


@dataclass(frozen=True)
class DecodeFit:
    sequences: int  # the batch the timeline mostly ran (rounded mean over the fitted requests)
    step_s: float  # seconds per step at that batch, no context
    context_s: float  # seconds per step per context token
    requests: int  # requests fitted
    largest: int = 0  # the largest batch a fitted request averaged, rounded up (0: not known)


def chosen_contender(data: dict[str, Any], key: str | None) -> dict[str, Any]:
    """The contender of a timeline file named ``key`` (None: the first with a timeline)."""
    contenders = [c for c in data.get("contenders", []) if c.get("timeline")]
    if key is not None:
        contenders = [c for c in contenders if c.get("key") == key]
    if not contenders:
        raise ConfigError("the timeline file holds no contender with a timeline" + (f" {key!r}" if key else ""))
    return contenders[0]


def holds(timeline: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """The windows in which the engine held (see the module docstring): from the send to the first token of each
    request after an attempt's first whose first token came more than ``HOLD_S`` after it was sent, overlapping
    windows merged. An attempt's first request is left out (after an engine's start the first of them wait for
    its warm-up, a start's cost).

    >>> rows = [{"attempt": 0, "turn": 1, "start": 10.0, "first_token": 12.5},
    ...         {"attempt": 1, "turn": 3, "start": 11.0, "first_token": 13.0},
    ...         {"attempt": 2, "turn": 0, "start": 0.0, "first_token": 4.0},
    ...         {"attempt": 3, "turn": 2, "start": 20.0, "first_token": 20.1}]
    >>> holds(rows)
    [(10.0, 13.0)]
    """
    waits = sorted((r["start"], r["first_token"]) for r in timeline
                   if r["turn"] > 0 and r.get("first_token") is not None and r["first_token"] - r["start"] > HOLD_S)
    merged: list[tuple[float, float]] = []
    for start, end in waits:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def decode_samples(timeline: list[dict[str, Any]], held: list[tuple[float, float]] = ()) -> np.ndarray:
    """Per request of ``MIN_TOKENS``+ tokens that no window of ``held`` overlaps: its seconds per token, and the
    sequences decoding and the context they held meanwhile (averaged over its life), and its tokens; one row each.

    >>> rows = [{"first_token": 0.0, "end": 4.0, "prompt_tokens": 1000, "generated_tokens": 400},
    ...         {"first_token": 1.0, "end": 3.0, "prompt_tokens": 500, "generated_tokens": 300}]
    >>> decode_samples(rows).round(3).tolist()  # the first shares half its life with the second
    [[0.01, 1.5, 1521.0, 400.0], [0.007, 2.0, 1845.0, 300.0]]
    >>> len(decode_samples(rows, [(3.5, 3.6)]))  # a hold inside the first one's decode: left out
    1
    """
    end = np.array([r["end"] for r in timeline], dtype=float)
    # a request cancelled before its first token decoded nothing: it starts at its end
    first = np.array([r["end"] if r["first_token"] is None else r["first_token"] for r in timeline], dtype=float)
    prompt = np.array([r["prompt_tokens"] for r in timeline], dtype=float)
    made = np.array([r["generated_tokens"] for r in timeline], dtype=float)
    fitted = [i for i in np.flatnonzero((made >= MIN_TOKENS) & (end > first))
              if not any(a < end[i] and b > first[i] for a, b in held)]
    span = np.where(end > first, end - first, np.inf)
    out = []
    for i in fitted:
        t = np.linspace(first[i], end[i], GRID, endpoint=False)[:, None]
        active = (first[None, :] <= t) & (t < end[None, :])
        done = np.clip((t - first[None, :]) / span[None, :], 0, 1)
        out.append(((end[i] - first[i]) / made[i], active.sum(axis=1).mean(),
                    np.where(active, prompt[None, :] + done * made[None, :], 0.0).sum(axis=1).mean(), made[i]))
    return np.array(out, dtype=float).reshape(-1, 4)


def decode_fit(timeline: list[dict[str, Any]], samples: np.ndarray | None = None) -> DecodeFit:
    """Step time and context cost from a timeline (see the module docstring), or from ``samples`` already taken
    (``decode_samples``, e.g. of several problems' timelines).

    >>> rows = [{"start": 0.0, "first_token": 0.0, "end": 0.01 * 400 + 1e-8 * 4 * 1000 * 400, "prompt_tokens": 1000,
    ...          "cached_tokens": 0, "generated_tokens": 400}]
    >>> fit = decode_fit(rows)  # one sequence: too little to part the two terms, the context term is 0
    >>> fit.sequences, fit.requests, fit.largest
    (1, 1, 1)
    """
    samples = decode_samples(timeline) if samples is None else samples
    if not len(samples):
        raise ConfigError(f"the timeline has no request of {MIN_TOKENS}+ tokens to fit decode on")
    per_token, batches, context, made = samples.T
    weight = np.sqrt(made)
    step, context_s = float(np.average(per_token, weights=made)), 0.0
    if np.ptp(context) > 0 and len(samples) > 2:
        design = np.c_[np.ones(len(samples)), context]
        (both, slope), *_ = np.linalg.lstsq(design * weight[:, None], per_token * weight, rcond=None)
        if slope > 0:  # a context that makes steps faster is noise: then the plain mean, no context term
            step, context_s = float(both), float(slope)
    return DecodeFit(max(1, int(round(float(np.mean(batches))))), step, context_s, len(samples),
                     int(np.ceil(float(batches.max()) - 1e-9)))


@dataclass(frozen=True)
class DayFit:
    """What a day slice measures of the engine (see the module docstring)."""

    decode: DecodeFit  # on the requests no hold overlapped
    holds: int  # hold windows over the slice
    hold_s: float  # their seconds
    seconds: float  # the problems' seconds
    request_s: float  # the median turn latency
    turns: int  # requests it was the median of
    longest: int = 0  # the longest context a request reached, tokens

    @property
    def hold_share(self) -> float:
        return self.hold_s / self.seconds if self.seconds > 0 else 0.0


def turn_latencies(timeline: list[dict[str, Any]], tools: dict[tuple[str, int, int], float],
                   prefill_tokens_per_s: float) -> list[float]:
    """Per request after an attempt's first: seconds from the previous request's end to its first token, less the
    previous request's tool call (``tools`` by problem, attempt, turn) and its own uncached prefill.

    >>> rows = [{"problem": "p", "attempt": 0, "turn": 0, "start": 0.0, "first_token": 0.1, "end": 2.0,
    ...          "prompt_tokens": 100, "cached_tokens": 0},
    ...         {"problem": "p", "attempt": 0, "turn": 1, "start": 2.52, "first_token": 2.7, "end": 3.0,
    ...          "prompt_tokens": 300, "cached_tokens": 200}]
    >>> [round(x, 6) for x in turn_latencies(rows, {("p", 0, 0): 0.5}, 1000.0)]
    [0.1]
    """
    by: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in timeline:
        by.setdefault((r.get("problem", ""), r["attempt"]), []).append(r)
    out = []
    for (problem, attempt), rows in by.items():
        rows.sort(key=lambda r: r["turn"])
        for before, r in zip(rows, rows[1:]):
            if r.get("first_token") is None:
                continue
            uncached = r["prompt_tokens"] - (r.get("cached_tokens") or 0)
            out.append(r["first_token"] - before["end"] - tools.get((problem, attempt, before["turn"]), 0.0)
                       - uncached / prefill_tokens_per_s)
    return out


def day_fit(day: dict[str, Any] | list[dict[str, Any]], prefill_tokens_per_s: float) -> DayFit:
    """Decode, holds and the turn latency of a day slice's problems (``benchmarks/day.py --json``), or of several
    slices' problems together (each request against the batch of its own problem, each turn with its own tools)."""
    days = [day] if isinstance(day, dict) else list(day)
    problems = [(d, p) for d in days for p in d.get("problems", []) if p.get("timeline")]
    if not problems:
        raise ConfigError("the day file holds no problem with a timeline")
    tools = [{(row["problem"], row["attempt"], k): float(step.get("tool_s") or 0.0) if step.get("call") else 0.0
              for row in d.get("plan", []) for k, step in enumerate(row["steps"])} for d in days]
    windows = [holds(p["timeline"]) for _, p in problems]
    samples = np.vstack([decode_samples(p["timeline"], w) for (_, p), w in zip(problems, windows)])
    latencies = [x for d, p in problems for x in turn_latencies(p["timeline"], tools[days.index(d)],
                                                                 prefill_tokens_per_s)]
    if not latencies:
        raise ConfigError("the day file holds no request after an attempt's first")
    return DayFit(decode_fit([], samples), sum(map(len, windows)), sum(b - a for w in windows for a, b in w),
                  sum(float(p["seconds"]) for _, p in problems), round(max(0.0, float(np.median(latencies))), 6),
                  len(latencies),
                  max(r["prompt_tokens"] + r["generated_tokens"] for _, p in problems for r in p["timeline"]))


def without_problem(day: dict[str, Any], problem: str) -> dict[str, Any] | None:
    """``day`` (a ``day.py`` JSON) with ``problem`` left out: its timeline and its plan's attempts; None when no
    problem is left.

    >>> day = {"_file": "d.json", "problems": [{"id": "p"}, {"id": "q"}],
    ...        "plan": [{"problem": "p", "attempt": 0}, {"problem": "q", "attempt": 0}]}
    >>> without_problem(day, "p")
    {'_file': 'd.json', 'problems': [{'id': 'q'}], 'plan': [{'problem': 'q', 'attempt': 0}]}
    >>> without_problem(without_problem(day, "p"), "q") is None
    True
    """
    problems = [p for p in day.get("problems", []) if p["id"] != problem]
    if not problems:
        return None
    return {**day, "problems": problems, "plan": [r for r in day.get("plan", []) if r["problem"] != problem]}

def request_latency(timeline: list[dict[str, Any]], prefill_tokens_per_s: float) -> float:
    """Median seconds from sending a request to its first token, less its uncached prompt's prefill.

    >>> request_latency([{"start": 0, "first_token": 0.06, "prompt_tokens": 100, "cached_tokens": 0}], 10_000)
    0.05
    """
    waits = [r["first_token"] - r["start"]
             - (r["prompt_tokens"] - (r.get("cached_tokens") or 0)) / prefill_tokens_per_s for r in timeline]
    return round(max(0.0, float(np.median(waits))), 6)


def rebuild_seconds(day: dict[str, Any]) -> float:
    """The rebuild a day slice's fault measured (``fault.rebuild.rebuild_s``); a one-line ``ConfigError`` when the
    file holds none.

    >>> rebuild_seconds({"fault": {"rebuild": {"rebuild_s": 131.5}}})
    131.5
    >>> rebuild_seconds({"fault": None})
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: the day file holds no measured rebuild (fault.rebuild: run day.py --kill-engine-at)
    """
    rebuild = (day.get("fault") or {}).get("rebuild") or {}
    if not isinstance(rebuild.get("rebuild_s"), (int, float)):
        raise ConfigError("the day file holds no measured rebuild (fault.rebuild: run day.py --kill-engine-at)")
    return float(rebuild["rebuild_s"])

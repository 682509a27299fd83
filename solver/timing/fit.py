"""Fit an engine time model from benchmark results, and check it against the run it came from.

Inputs (the JSON the benchmarks write with ``--json``):

- a real-shape timeline (``benchmarks/engine.py --workload real``): per request its start, first token, end,
  prompt, cached and generated tokens. Decode: each request's seconds per token against the sequences decoding
  and the context they held meanwhile (averaged over its life) gives, by least squares weighted by tokens, the step
  time at the timeline's usual batch and the cost per context token. Requests: the median latency to the first
  token, less the prefill of the uncached prompt, is ``request_s``;
- engine probes (``benchmarks/probes.py``): the prefill rate (median of the re-sent prompts' fills) and the
  prefix cache's size the engine reported.

- a day slice with a fault (``benchmarks/day.py --kill-engine-at``): the seconds the Kaggle supervisor took to
  replace the killed engine (the dead one closed, a new one started) are ``rebuild_s``.

What the inputs cannot tell (the step time at other batch sizes, the cache's tokens per context token, the engine
start) is kept from a base model, and every fitted number's source is rewritten. The check: the timeline's own
plan (per attempt its requests, tool times and prompts) played on the fitted model (``engine_timeline``) against
the seconds the run took.

    R=benchmarks/results; python -m solver.timing.fit --base h100-gptoss --timeline $R/h100_real-t-30k.json \\
        --probes $R/h100_probes.json --probes $R/h100_probes-ret0.json --probes $R/h100_probes-ret1024.json \\
        --out solver/timing/data/h100-gptoss.yaml

A rebuild measured by a day slice's fault (a ``benchmarks/day.py --kill-engine-at`` run's ``--json``):

    python -m solver.timing.fit --base h100-gptoss --fault benchmarks/results/h100_day-fault.json \
        --out solver/timing/data/h100-gptoss.yaml

The tiny CPU model, from three real-shape runs on this machine (1, 4 and 8 attempts of 3,000 tokens: ``python
benchmarks/engine.py --workload real --attempts N --attempt-tokens 3000 --set engine.args.max_model_len=4096
--contenders t --json ...``) and ``benchmarks/probes.py --quick --json ...``, fitted in that order (each run sets
its batch's step; the last sets the context and request terms):

    F="python -m solver.timing.fit"; R=benchmarks/results
    $F --base tiny --timeline $R/cpu_real-t-1x3000.json --probes $R/cpu_probes-quick.json --out /tmp/t1.yaml
    $F --base /tmp/t1.yaml --name tiny --timeline $R/cpu_real-t-4x3000.json --out /tmp/t4.yaml
    $F --base /tmp/t4.yaml --name tiny --timeline $R/cpu_real-t-8x3000.json --out solver/timing/data/tiny.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from solver.config import ConfigError
from solver.timing.model import EngineTimeModel, dump, load_time_model
from solver.timing.timeline import AttemptPlan, engine_timeline

MIN_TOKENS = 200  # requests shorter than this are dominated by their admission, not their decode
GRID = 50  # points per request at which the batch it shared is read


@dataclass(frozen=True)
class DecodeFit:
    sequences: int  # the batch the timeline mostly ran (rounded mean over the fitted requests)
    step_s: float  # seconds per step at that batch, no context
    context_s: float  # seconds per step per context token
    requests: int  # requests fitted


def _contender(data: dict[str, Any], key: str | None) -> dict[str, Any]:
    contenders = [c for c in data.get("contenders", []) if c.get("timeline")]
    if key is not None:
        contenders = [c for c in contenders if c.get("key") == key]
    if not contenders:
        raise ConfigError("the timeline file holds no contender with a timeline" + (f" {key!r}" if key else ""))
    return contenders[0]


def decode_fit(timeline: list[dict[str, Any]]) -> DecodeFit:
    """Step time and context cost from a timeline (see the module docstring).

    >>> rows = [{"start": 0.0, "first_token": 0.0, "end": 0.01 * 400 + 1e-8 * 4 * 1000 * 400, "prompt_tokens": 1000,
    ...          "cached_tokens": 0, "generated_tokens": 400}]
    >>> fit = decode_fit(rows)  # one sequence: too little to part the two terms, the context term is 0
    >>> fit.sequences, fit.requests
    (1, 1)
    """
    first = np.array([r["first_token"] for r in timeline], dtype=float)
    end = np.array([r["end"] for r in timeline], dtype=float)
    prompt = np.array([r["prompt_tokens"] for r in timeline], dtype=float)
    made = np.array([r["generated_tokens"] for r in timeline], dtype=float)
    fitted = np.flatnonzero((made >= MIN_TOKENS) & (end > first))
    if not len(fitted):
        raise ConfigError(f"the timeline has no request of {MIN_TOKENS}+ tokens to fit decode on")
    span = np.where(end > first, end - first, np.inf)
    batches, contexts = [], []
    for i in fitted:
        t = np.linspace(first[i], end[i], GRID, endpoint=False)[:, None]
        active = (first[None, :] <= t) & (t < end[None, :])
        done = np.clip((t - first[None, :]) / span[None, :], 0, 1)
        batches.append(active.sum(axis=1).mean())
        contexts.append((active * (prompt[None, :] + done * made[None, :])).sum(axis=1).mean())
    per_token = (end[fitted] - first[fitted]) / made[fitted]
    weight = np.sqrt(made[fitted])
    context = np.array(contexts)
    step, context_s = float(np.average(per_token, weights=made[fitted])), 0.0
    if np.ptp(context) > 0 and len(fitted) > 2:
        design = np.c_[np.ones(len(fitted)), context]
        (both, slope), *_ = np.linalg.lstsq(design * weight[:, None], per_token * weight, rcond=None)
        if slope > 0:  # a context that makes steps faster is noise: then the plain mean, no context term
            step, context_s = float(both), float(slope)
    return DecodeFit(max(1, int(round(float(np.mean(batches))))), step, context_s, len(fitted))


def request_latency(timeline: list[dict[str, Any]], prefill_tokens_per_s: float) -> float:
    """Median seconds from sending a request to its first token, less its uncached prompt's prefill.

    >>> request_latency([{"start": 0, "first_token": 0.06, "prompt_tokens": 100, "cached_tokens": 0}], 10_000)
    0.05
    """
    waits = [r["first_token"] - r["start"]
             - (r["prompt_tokens"] - (r.get("cached_tokens") or 0)) / prefill_tokens_per_s for r in timeline]
    return round(max(0.0, float(np.median(waits))), 6)


def plan_attempts(data: dict[str, Any]) -> list[list[AttemptPlan]]:
    """Per problem, its attempts as the timeline file's plan describes them (prompt, decoded tokens and tool
    seconds per request; the request after the last call answers)."""
    problems: dict[str, list[AttemptPlan]] = {}
    for replay in data.get("plan", []):
        steps = replay["steps"]
        tools = tuple(float(s.get("tool_s", 0.0)) if s.get("call") and i + 1 < len(steps) else 0.0
                      for i, s in enumerate(steps))
        problems.setdefault(replay["problem"], []).append(AttemptPlan(
            tuple(int(s["prompt_tokens"]) for s in steps), tuple(int(s["tokens"]) for s in steps), tools))
    if not problems:
        raise ConfigError("the timeline file holds no plan")
    return list(problems.values())


def predicted_seconds(data: dict[str, Any], model: EngineTimeModel) -> float:
    """The timeline file's plan played on ``model``: its problems one after another, each with every attempt at
    once, as the real workload runs them."""
    return sum(max(engine_timeline(attempts, len(attempts), model).ends) for attempts in plan_attempts(data))


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


def fit(base: EngineTimeModel, timeline_data: dict[str, Any] | None = None, probes: list[dict[str, Any]] = (),
        contender: str | None = None, name: str | None = None,
        fault: dict[str, Any] | None = None) -> EngineTimeModel:
    """``base`` with what the given files measure fitted again (see the module docstring); the cache size is the
    first probes file's, the rebuild the ``fault`` day file's."""
    model, sources = base, dict(base.sources)
    if fault is not None:
        rebuild = fault["fault"]["rebuild"] if isinstance(fault.get("fault"), dict) else {}
        model = replace(model, rebuild_s=round(rebuild_seconds(fault), 1))
        sources["rebuild_s"] = (f"the engine core killed {fault['fault'].get('at_s')} s into problem "
                                f"{fault['fault'].get('problem')}, the Kaggle supervisor's rebuild at the next problem: "
                                f"close {rebuild.get('close_s')} s + start {rebuild.get('open_s')} s, {fault['_file']}")
    rates = [float(r["prefill_tps"]) for p in probes for r in p.get("resent", []) if r.get("prefill_tps")]
    if rates:
        model = replace(model, prefill_tokens_per_s=float(round(float(np.median(rates)))))
        sources["prefill_tokens_per_s"] = (f"median prefill rate of {len(rates)} re-sent prompt fills "
                                           f"({min(rates):.0f}-{max(rates):.0f} tokens/s), "
                                           f"{', '.join(p['_file'] for p in probes)}")
    if probes and probes[0].get("kv_cache_tokens"):
        model = replace(model, cache_tokens=int(probes[0]["kv_cache_tokens"]))
        sources["cache_tokens"] = f"KV cache tokens the engine reported, {probes[0]['_file']}"
    if timeline_data is not None:
        chosen = _contender(timeline_data, contender)
        rows = chosen["timeline"]
        decode = decode_fit(rows)
        points = dict(model.step_s)
        points[decode.sequences] = round(decode.step_s, 7)
        # keep the points rising: a neighbour the fit contradicts is dropped, not bent
        kept = {b: s for b, s in points.items()
                if b == decode.sequences or (b < decode.sequences and s <= points[decode.sequences])
                or (b > decode.sequences and s >= points[decode.sequences])}
        model = replace(model, step_s=tuple(sorted(kept.items())), context_s=float(f"{decode.context_s:.4g}"),
                        request_s=request_latency(rows, model.prefill_tokens_per_s))
        where = f"{timeline_data['_file']} contender {chosen.get('key')}"
        sources[f"step_s.{decode.sequences}"] = (f"least squares over {decode.requests} requests of "
                                                 f"{MIN_TOKENS}+ tokens (mean batch {decode.sequences}), {where}")
        sources["context_s"] = f"the same fit's context term, {where}"
        sources["request_s"] = (f"median latency to the first token less the uncached prefill, {len(rows)} "
                                f"requests, {where}")
    return replace(model, name=name or model.name, sources=sources)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a benchmark result (a JSON object)")
    data["_file"] = path.name
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m solver.timing.fit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the model to start from: a name or a .yaml file")
    parser.add_argument("--timeline", type=Path, help="engine.py --workload real --json output")
    parser.add_argument("--contender", default=None, help="which contender's timeline (default: the first with one)")
    parser.add_argument("--probes", type=Path, action="append", default=[],
                        help="probes.py --json output (repeat for several)")
    parser.add_argument("--fault", type=Path, default=None, help="benchmarks/day.py --json output of a run with "
                        "--kill-engine-at: its rebuild's seconds become rebuild_s")
    parser.add_argument("--name", default=None, help="the fitted model's name (default: the base's)")
    parser.add_argument("--out", type=Path, help="write the model here (default: print it)")
    args = parser.parse_args(argv)
    try:
        base = load_time_model(args.base)
        timeline = _read(args.timeline) if args.timeline else None
        probes = [_read(p) for p in args.probes]
        fault = _read(args.fault) if args.fault else None
        if fault is not None:
            rebuild_seconds(fault)  # a file without a rebuild fails here, in one line
        model = fit(base, timeline, probes, args.contender, args.name, fault)
        text = dump(model)
        if timeline is not None and timeline.get("plan"):
            measured = float(_contender(timeline, args.contender)["seconds"])
            predicted = predicted_seconds(timeline, model)
            print(f"check: the plan of {args.timeline.name} on the fitted model: {predicted:.1f} s predicted, "
                  f"{measured:.1f} s measured ({predicted / measured - 1:+.1%})", file=sys.stderr)
    except ConfigError as exc:
        print(f"fit: error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Fit an engine time model from benchmark results, naming the runs each number came from (``fitted_on``).

Inputs (the JSON the benchmarks write with ``--json``; what each measures is read by ``solver.timing.measured``):

- a real-shape timeline (``benchmarks/engine.py --workload real``): per request its start, first token, end,
  prompt, cached and generated tokens. Decode: each request's seconds per token against the sequences decoding
  and the context they held meanwhile (averaged over its life) gives, by least squares weighted by tokens, the step
  time at the timeline's usual batch and the cost per context token. Requests: the median latency to the first
  token, less the prefill of the uncached prompt, is ``request_s``;
- engine probes (``benchmarks/probes.py``): the prefill rate (median of the re-sent prompts' fills) and the
  prefix cache's size the engine reported.

- a day slice (``benchmarks/day.py --json``: per problem the request timeline of the Kaggle path, times from the
  solve's start, and the plan). The engine now and then decodes nothing for ~2 s (its KV usage frozen, nothing
  waiting) while a request that was sent waits for its first token: a **hold** is such a wait, from the send to
  the first token, of a request after an attempt's first whose first token came more than ``HOLD_S`` after it was
  sent (overlapping ones merged). Decode is fitted as for a timeline, on the requests no hold overlaps, over every
  problem of the slice (each request against the batch of its own problem); then step and context are divided by
  1 − the holds' share of the slice's seconds, so the holds are paid as the run paid them, on average. Requests:
  the median, over the requests after an attempt's first, of the seconds from the previous request's end to this
  one's first token less its tool call and its uncached prefill (the loop's turn and the engine's admission) is
  ``request_s``;
- a day slice with a fault (``benchmarks/day.py --kill-engine-at``): the seconds the Kaggle supervisor took to
  replace the killed engine (the dead one closed, a new one started) are ``rebuild_s``.

What the inputs cannot tell (the step time at other batch sizes, the cache's tokens per context token, the engine
start) is kept from a base model, and every fitted number's source is rewritten. The checks: a real-shape
timeline's own plan (per attempt its requests, tool times and prompts; ``--timeline`` and each ``--check`` file)
played on the fitted model (``engine_timeline``) against the seconds the run took.

The H100 model: prefill and cache from the probes, decode and requests from the day slice at full length (6
problems x 8 real attempts through the Kaggle path, contexts to 47k), the rebuild from the fault; the real-shape
timelines (``h100_real-t-30k.json``, ``-36k``) are its checks (``--check``):

    R=benchmarks/results; python -m solver.timing.fit --base h100-gptoss --probes $R/h100_probes.json \\
        --probes $R/h100_probes-ret0.json --probes $R/h100_probes-ret1024.json --day $R/h100_day-slice.json \\
        --fault $R/h100_day-fault.json --check $R/h100_real-t-30k.json --check $R/h100_real-t-36k.json \\
        --out solver/timing/data/h100-gptoss.yaml

(``benchmarks/day_check.py`` plays the day slice itself through the simulator's day. Both call a figure on a run
the model was fitted on the fit's residual, not a check; day_check.py checks each fitted problem on the model
refitted without it.)

The H200 model: decode and requests from the two H200 slices with the warm-up, fitted together; the batch sizes
they cannot tell from the H100's, scaled by the hold-free step both machines measured (``--like``):

    R=benchmarks/results; python -m solver.timing.fit --base h100-gptoss --name h200-gptoss \\
        --day $R/h200_day-b-warmup.json --day $R/h200_day-c-cache.json --like $R/h100_day-slice.json --out F.yaml

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
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from solver.config import ConfigError
from solver.timing.measured import (HOLD_S, MIN_TOKENS, DecodeFit, chosen_contender, day_fit, decode_fit,
                                    rebuild_seconds, request_latency, without_problem)
from solver.timing.model import EngineTimeModel, FitInput, dump, load_time_model
from solver.timing.timeline import AttemptPlan, engine_timeline


def held_out(model: EngineTimeModel, days: list[dict[str, Any]], problem: str) -> EngineTimeModel:
    """``model`` refitted on its day slices (``days``, the files ``model.fed_by("context_s")``) with ``problem``
    left out of every one (the same problem in another run plays the same attempts): the model that never saw
    it, whose figure on the problem estimates the fit's error (leave one problem out). Its numbers are those of the
    fit from the base on the other problems alone, the step points the slices fed by a ratio (``like``) included:
    they move by the kept problems' hold-free step over all of theirs (``fit``'s ``fitted``)."""
    kept = [d for d in (without_problem(day, problem) for day in days) if d is not None]
    if not kept:
        raise ConfigError(f"the fit of {model.name} has no problem but {problem}: nothing to refit without it")
    return fit(model, days=kept, fitted=days)


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


def with_step(model: EngineTimeModel, decode: DecodeFit, step_s: float,
              sources: dict[str, str]) -> EngineTimeModel:
    """``model`` with ``step_s`` at the fitted batch: a point between it and the largest batch the fit saw is the
    fit's own and goes, and so does a neighbour the fit contradicts (the points keep rising: dropped, not bent);
    the sources of points gone go with them.

    >>> m = EngineTimeModel("m", ((1, 0.005), (4, 0.006), (8, 0.0062), (64, 0.0085)))
    >>> sources = {"step_s.8": "old"}
    >>> with_step(m, DecodeFit(7, 0.0056, 0.0, 10, 8), 0.0056, sources).step_s, sources
    (((1, 0.005), (7, 0.0056), (64, 0.0085)), {})
    """
    seq = decode.sequences
    points = dict(model.step_s)
    points[seq] = round(step_s, 7)
    kept = {b: s for b, s in points.items()
            if b == seq or (b < seq and s <= points[seq]) or (seq < b and b > decode.largest and s >= points[seq])}
    for b in set(points) - set(kept):
        sources.pop(f"step_s.{b}", None)
    return replace(model, step_s=tuple(sorted(kept.items())))


def _numbers_order(number: str) -> tuple[int, float]:
    """Where a number stands in a model's file: the step points by batch, then the keys in the file's order."""
    from solver.timing.model import KEYS

    if number.startswith("step_s."):
        return (KEYS.index("step_s"), float(number.split(".", 1)[1]))
    return (KEYS.index(number) if number in KEYS else len(KEYS), 0.0)


def _fitted_on(model: EngineTimeModel, inputs: dict[str, list[str]]) -> tuple[FitInput, ...]:
    """``inputs`` (number -> the files that fed it) as the model's ``fitted_on``: by file, its numbers in the
    file's order; step points the model no longer has left out."""
    points = {f"step_s.{b}" for b, _ in model.step_s}
    by: dict[str, list[str]] = {}
    for number in sorted(inputs, key=_numbers_order):
        if number.startswith("step_s.") and number not in points:
            continue
        for file in inputs[number]:
            by.setdefault(file, []).append(number)
    return tuple(FitInput(file, tuple(numbers)) for file, numbers in sorted(by.items()))


def _scaled_like(model: EngineTimeModel, like: dict[str, Any], decode: DecodeFit, files: list[str],
                 sources: dict[str, str], inputs: dict[str, list[str]]) -> EngineTimeModel:
    """``model`` (another machine's) with its step points but the fitted batch's times the days' hold-free step
    over ``like``'s (a day slice of that machine) at the same batch; sources and inputs say so."""
    theirs = day_fit(like, model.prefill_tokens_per_s).decode
    if theirs.sequences != decode.sequences:
        raise ConfigError(f"{like['_file']} was fitted at batch {theirs.sequences}, the days at {decode.sequences}: "
                          "no common batch to scale the other step points by")
    ratio = decode.step_s / theirs.step_s  # hold-free over hold-free: the machines, not their stalls
    points = []
    for b, s in model.step_s:
        if b == decode.sequences:
            points.append((b, s))
            continue
        points.append((b, round(s * ratio, 7)))
        key = f"step_s.{b}"
        sources[key] = (f"{model.name}'s {1000 * s:.3f} ms ({sources.get(key, 'its source')}) times {ratio:.4f}: the "
                        f"hold-free step at batch {decode.sequences} here, {1000 * decode.step_s:.3f} ms "
                        f"({' + '.join(files)}), over {model.name}'s, {1000 * theirs.step_s:.3f} ms "
                        f"({like['_file']}); inferred, not measured here")
        inputs[key] = list(dict.fromkeys([*inputs.get(key, ()), like["_file"], *files]))
    return replace(model, step_s=tuple(points))


def fit(base: EngineTimeModel, timeline_data: dict[str, Any] | None = None, probes: list[dict[str, Any]] = (),
        contender: str | None = None, name: str | None = None, fault: dict[str, Any] | None = None,
        days: list[dict[str, Any]] = (), like: dict[str, Any] | None = None,
        fitted: list[dict[str, Any]] = ()) -> EngineTimeModel:
    """``base`` with what the given files measure fitted again (see the module docstring); the cache size is the
    first probes file's, the rebuild the ``fault`` day file's; the ``days`` slices' decode and requests last,
    fitted together. Every number fitted names its files in ``fitted_on``.

    ``like``: a day slice of the base's own machine; the base's step points at the batches the days do not
    measure are then scaled, once, by the days' hold-free step over ``like``'s at the same batch (another
    machine's model carried over by what both measured). ``fitted``: the day slices ``base`` was fitted on, when
    ``days`` are those slices with problems left out (``held_out``); the step points they fed by that ratio move
    by the hold-free step of ``days`` over theirs, so a refit on fewer problems keeps none of the left-out
    problem's say in them. Without ``fitted`` those points stay."""
    model, sources = base, dict(base.sources)
    inputs = {n: list(f.file for f in base.fitted_on if n in f.numbers)
              for n in {n for f in base.fitted_on for n in f.numbers}}
    if fault is not None:
        rebuild = fault["fault"]["rebuild"] if isinstance(fault.get("fault"), dict) else {}
        model = replace(model, rebuild_s=round(rebuild_seconds(fault), 1))
        call = next((c for c in fault.get("calls", []) if c.get("call") == fault["fault"].get("call")), {})
        opens = [e["seconds"] for e in call.get("engine", []) if e.get("what") == "open"]
        warm = f" (the compile cache warm from the call's first start, {opens[0]:.1f} s)" if len(opens) > 1 else ""
        sources["rebuild_s"] = (f"the engine core killed {fault['fault'].get('at_s')} s into problem "
                                f"{fault['fault'].get('problem')}, the Kaggle supervisor's rebuild at the next "
                                f"problem: close {rebuild.get('close_s')} s + start {rebuild.get('open_s')} s{warm}, "
                                f"{fault['_file']}")
        inputs["rebuild_s"] = [fault["_file"]]
    rates = [float(r["prefill_tps"]) for p in probes for r in p.get("resent", []) if r.get("prefill_tps")]
    if rates:
        model = replace(model, prefill_tokens_per_s=float(round(float(np.median(rates)))))
        sources["prefill_tokens_per_s"] = (f"median prefill rate of {len(rates)} re-sent prompt fills "
                                           f"({min(rates):.0f}-{max(rates):.0f} tokens/s), "
                                           f"{', '.join(p['_file'] for p in probes)}")
        inputs["prefill_tokens_per_s"] = [p["_file"] for p in probes if p.get("resent")]
    if probes and probes[0].get("kv_cache_tokens"):
        model = replace(model, cache_tokens=int(probes[0]["kv_cache_tokens"]))
        sources["cache_tokens"] = f"KV cache tokens the engine reported, {probes[0]['_file']}"
        inputs["cache_tokens"] = [probes[0]["_file"]]
    if timeline_data is not None:
        chosen = chosen_contender(timeline_data, contender)
        rows = chosen["timeline"]
        decode = decode_fit(rows)
        model = replace(with_step(model, decode, decode.step_s, sources), context_s=float(f"{decode.context_s:.4g}"),
                        request_s=request_latency(rows, model.prefill_tokens_per_s))
        where = f"{timeline_data['_file']} contender {chosen.get('key')}"
        sources[f"step_s.{decode.sequences}"] = (f"least squares over {decode.requests} requests of "
                                                 f"{MIN_TOKENS}+ tokens (mean batch {decode.sequences}), {where}")
        sources["context_s"] = f"the same fit's context term, {where}"
        sources["request_s"] = (f"median latency to the first token less the uncached prefill, {len(rows)} "
                                f"requests, {where}")
        for number in (f"step_s.{decode.sequences}", "context_s", "request_s"):
            inputs[number] = [timeline_data["_file"]]
    if days:
        files = [d["_file"] for d in days]
        named = " + ".join(files)
        found = day_fit(list(days), model.prefill_tokens_per_s)
        decode, scale = found.decode, 1.0 / (1.0 - found.hold_share)
        # The points these days fed by a ratio (an earlier ``like``) were scaled by the hold-free step of the slices
        # that fit saw: they move by this fit's hold-free step over that one (hold-free over hold-free, as the ratio
        # was), before ``like`` scales the base's points by this fit's, so no point is scaled twice.
        if fitted:
            moved = decode.step_s / day_fit(list(fitted), model.prefill_tokens_per_s).decode.step_s
            model = replace(model, step_s=tuple(
                (b, round(s * moved, 7)) if b != decode.sequences and set(inputs.get(f"step_s.{b}", ())) & set(files)
                else (b, s) for b, s in model.step_s))
        if like is not None:
            model = _scaled_like(model, like, found.decode, files, sources, inputs)
        step = round(decode.step_s * scale, 7)
        model = replace(with_step(model, decode, step, sources),
                        context_s=float(f"{decode.context_s * scale:.4g}"), request_s=found.request_s)
        held = (f"times {scale:.4f} for the engine's holds ({found.holds} waits of over {HOLD_S:g} s for a first "
                f"token, the engine decoding nothing: {found.hold_s:.1f} s of the problems' {found.seconds:.1f} s, "
                f"{found.hold_share:.1%})")
        sources[f"step_s.{decode.sequences}"] = (
            f"least squares over {decode.requests} requests of {MIN_TOKENS}+ tokens that no hold overlapped (mean "
            f"batch {decode.sequences}, contexts to {found.longest:,} tokens), {1000 * decode.step_s:.3f} ms, {held}, "
            f"{named}")
        sources["context_s"] = f"the same fit's context term, {decode.context_s:.4g} s, {held}, {named}"
        sources["request_s"] = (f"median over {found.turns} requests after an attempt's first of the seconds from "
                                f"the previous request's end to the first token, less the tool call and the uncached "
                                f"prefill (the loop's turn and the engine's admission), {named}")
        for number in (f"step_s.{decode.sequences}", "context_s", "request_s"):
            inputs[number] = list(files)
    return replace(model, name=name or model.name, sources=sources, fitted_on=_fitted_on(model, inputs))


def check_lines(model: EngineTimeModel, checks: list[tuple[Path, dict[str, Any], str | None]]) -> list[str]:
    """A line per real-shape timeline (path, data, contender) played on ``model`` against its measured seconds:
    a check where the model was not fitted on it, else the fit's residual, called so (``model.fed``)."""
    lines = []
    for path, data, key in checks:
        measured = float(chosen_contender(data, key)["seconds"])
        predicted = predicted_seconds(data, model)
        figure = f"{predicted:.1f} s predicted, {measured:.1f} s measured ({predicted / measured - 1:+.1%})"
        fed = model.fed(path.name)
        if fed:
            lines.append(f"residual (in-sample, not a check: {path.name} fed {', '.join(fed)}): the plan of "
                         f"{path.name} on the fitted model: {figure}")
        else:
            lines.append(f"check (out of sample): the plan of {path.name} on the fitted model: {figure}")
    return lines


def comment_lines(path: Path) -> str:
    """The comment lines a model file opens with (what a refit keeps of a file it rewrites: notes for readers,
    not numbers); empty when the file does not exist."""
    if not path.is_file():
        return ""
    lines = path.read_text().splitlines(keepends=True)
    return "".join(line for line in lines[:next((i for i, x in enumerate(lines) if not x.startswith("#")),
                                               len(lines))])


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
    parser.add_argument("--day", type=Path, action="append", default=[], help="benchmarks/day.py --json output (a "
                        "day slice; repeat for several, fitted together): its decode, holds and turn latency become "
                        "step_s at its batch, context_s and request_s")
    parser.add_argument("--like", type=Path, default=None, help="a day slice of the base's own machine: the base's "
                        "step points at other batches are scaled by the --day slices' hold-free step over this one's")
    parser.add_argument("--check", type=Path, action="append", default=[], help="a real-shape timeline whose plan "
                        "the fitted model plays, against its measured seconds (repeat for several)")
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
        days = [_read(path) for path in args.day]
        for path, data in zip(args.day, days):
            if not data.get("problems"):
                raise ConfigError(f"{path} is not a day slice (benchmarks/day.py --json): it holds no problems")
        if args.like is not None and not days:
            raise ConfigError("--like scales by what --day measures: give --day too")
        like = _read(args.like) if args.like else None
        model = fit(base, timeline, probes, args.contender, args.name, fault, days, like)
        text = dump(model)
        checks = ([(args.timeline, timeline, args.contender)] if timeline is not None and timeline.get("plan") else [])
        for path in args.check:
            data = _read(path)
            if data.get("problems") and not data.get("contenders"):
                raise ConfigError(f"{path.name} is a day slice: benchmarks/day_check.py plays it (--check takes a "
                                  "real-shape timeline)")
            checks.append((path, data, None))
        for line in check_lines(model, checks):
            print(line, file=sys.stderr)
        if days:
            found = day_fit(days, model.prefill_tokens_per_s)
            print(f"day: {found.decode.requests} requests fitted at batch {found.decode.sequences}, "
                  f"{1000 * found.decode.step_s:.3f} ms + {found.decode.context_s:.3g} s per context token; "
                  f"{found.holds} holds, {found.hold_s:.1f} s of {found.seconds:.1f} s ({found.hold_share:.1%}); "
                  f"turn latency {found.request_s:.3f} s (median of {found.turns}); in-sample, not a check: "
                  f"benchmarks/day_check.py plays each of {', '.join(p.name for p in args.day)} through the "
                  "simulator with every fitted problem held out (leave one problem out)", file=sys.stderr)
    except ConfigError as exc:
        print(f"fit: error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(comment_lines(args.out) + text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

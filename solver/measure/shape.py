"""The real shape on the engine (``benchmarks/engine.py --workload real``, ``benchmarks/real_shape.py``): its flags
(``add_shape_arguments``, on the script's own parser) checked once into ``ShapeOptions`` (``shape_options``: the
layout benchmark's scaling takes the same), the plan of recorded attempts (``ShapeWorkload``) with its tool times,
the dry run, and the run of the contenders (``contenders``) with its table and JSON record.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any
from dataclasses import asdict, dataclass
from pathlib import Path

from solver.config import GPU_PRESET, Config, ConfigError, add_gpu_arguments, parse_overrides
from solver.errors import BadInput
from solver.files import atomic_write
from solver.measure.contenders import SHAPE_CONTENDERS, build_config, identical_work, run_contenders, shape_report
from solver.dryrun import DryRun
from solver.measure.selection import AttemptSelection, attempt_selection, plan_selection
from solver.measure.workload import Caps, HarmonyEndings, Replay, key_of, plan_summary
from solver.measure.tool_seconds import (carried_tool_times, fixed_tool_times, measure_tool_times_alone,
                                         with_tool_times)

SHAPE_PROG = "engine.py --workload real"  # its name in the usage and the errors, whichever script runs it
SHAPE_DESCRIPTION = "The real shape on the engine: recorded gpt-oss-120b attempts replayed through four contenders."


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """The real shape's flags on a script's own parser (``engine.py --workload real``, ``real_shape.py``, and the
    flags ``layouts.py scaling`` passes on); ``shape_options`` checks what they parse to."""
    parser.add_argument("--workload", choices=("real",), default="real")
    parser.add_argument("--attempts-file", type=Path, default=None,
                        help="recorded attempts (token traces; the dev file, or an extract written by "
                             "benchmarks/extract_attempts.py; default: $SOLVER_ATTEMPTS, else the dev file)")
    parser.add_argument("--problems", type=int, default=1, help="problems, one after another (default 1)")
    parser.add_argument("--attempts", type=int, default=8, help="attempts per problem, all at once (default 8)")
    parser.add_argument("--problem-ids", default="", help="these problems, comma-separated, in this order (instead "
                        "of the first --problems with at least --attempts attempts)")
    parser.add_argument("--attempt-tokens", type=int, default=None, help="cap: decoded tokens per attempt")
    parser.add_argument("--attempt-requests", type=int, default=None, help="cap: requests per attempt")
    parser.add_argument("--tool-time", default="auto",
                        help="seconds a call runs: 'carried' (measured once for the extract: extract_attempts.py "
                             "--measure-tools), 'measure' (re-execute the recorded code in our sandbox first), a "
                             "fixed number of seconds, or 'auto' (default: carried when the file has them, else "
                             "measure)")
    parser.add_argument("--sandbox-workers", type=int, default=None,
                        help="snippets at once in the pipelines' sandbox (default: --attempts: calls only sleep)")
    parser.add_argument("--contenders", default=",".join(SHAPE_CONTENDERS),
                        help="among a, t, b1, s (default all); each engine start costs minutes on a GPU")
    add_gpu_arguments(parser, gpu_help="the preset's own engine (default: the tiny preset's CPU engine and the tiny "
                                       "harmony model, with the preset's prompt, sampling and sandbox settings)",
                      preset_default=GPU_PRESET)
    parser.add_argument("--json", type=Path, default=None, help="also write the result and timelines here")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check, start nothing (solver/dryrun/plan.py)")


@dataclass(frozen=True)
class ShapeOptions:
    """The real shape's flags checked and completed (``shape_options``): everything its runs read. Tokens are
    decoded tokens."""

    selection: AttemptSelection  # the recorded attempts it plays
    attempt_requests: int | None  # cap: requests per attempt (None: uncapped)
    sandbox_workers: int | None  # snippets at once in the pipelines' sandbox (None: ``attempts``)
    keys: tuple[str, ...]  # the contenders, in the order they run (SHAPE_CONTENDERS')
    gpu: bool  # the preset's own engine (else the tiny preset's CPU engine and the tiny harmony model)
    preset: str
    model: str | None  # engine.model: a local path (None: the preset's)
    json: Path | None  # the result and timelines (None: printed only)
    config: Config  # the preset's engine, the rules off, ``attempts`` at once, the overrides and ``model``

    @property
    def caps(self) -> Caps:
        """The plan's caps: the selection's, with the requests cap."""
        return self.selection.caps(self.attempt_requests)

    @property
    def workers(self) -> int:
        """Snippets at once in the pipelines' sandbox: one per attempt unless given (the calls only sleep)."""
        return self.sandbox_workers or self.selection.attempts


# The flags ``add_shape_arguments`` adds, by the names ``shape_options`` takes them.
SHAPE_FLAGS = ("attempts_file", "problems", "attempts", "problem_ids", "attempt_tokens", "attempt_requests",
               "tool_time", "sandbox_workers", "contenders", "gpu", "preset", "model", "json", "overrides")


def shape_options_of(flags: Mapping[str, Any], dry: DryRun | None) -> ShapeOptions:
    """``shape_options`` over the parsed flags of a parser ``add_shape_arguments`` filled (``vars(args)``); the
    other keys (the script's own flags) are left alone."""
    return shape_options(**{name: flags[name] for name in SHAPE_FLAGS}, dry=dry)


def shape_options(*, attempts_file: Path | None, problems: int, attempts: int, problem_ids: str,
                  attempt_tokens: int | None, attempt_requests: int | None, tool_time: str,
                  sandbox_workers: int | None, contenders: str, gpu: bool, preset: str, model: str | None,
                  json: Path | None, overrides: Sequence[str], dry: DryRun | None) -> ShapeOptions:
    """The flags (as ``add_shape_arguments`` names them) checked and completed: the contenders in their order, the
    default attempts file, the config; ``BadInput`` (one line) for one that cannot run, before anything heavy
    starts. ``dry``: the command's ``DryRun`` (an attempts file only on the GPU machine: ``attempts_here`` False),
    or None."""
    keys = [k.strip() for k in contenders.split(",") if k.strip()]
    if not keys or not set(keys) <= set(SHAPE_CONTENDERS):
        raise BadInput(f"--contenders: choose among {', '.join(SHAPE_CONTENDERS)}, not {contenders!r}")
    for name, value in (("attempt_requests", attempt_requests), ("sandbox_workers", sandbox_workers)):
        if value is not None and value < 1:
            raise BadInput(f"--{name.replace('_', '-')} must be >= 1")
    selection = attempt_selection(attempts_file=attempts_file, problems=problems, problem_ids=problem_ids,
                                  attempts=attempts, attempt_tokens=attempt_tokens, tool_time=tool_time, dry=dry)
    if json is not None and not json.parent.is_dir():
        raise BadInput(f"--json: no folder {json.parent}")
    try:
        config = build_config(preset, gpu, attempts, model, parse_overrides(overrides))
    except (ConfigError, ValueError) as exc:
        raise BadInput(str(exc).splitlines()[0]) from exc
    return ShapeOptions(selection, attempt_requests, sandbox_workers,
                        tuple(k for k in SHAPE_CONTENDERS if k in keys),  # (a), (t), (b1) share an engine; (s) its own
                        gpu, preset, model, json, config)


def tool_source(mode: str, tool_s: float | None) -> str:
    """Where the tool times come from, as the report says it: ``mode`` as ``tool_time_mode`` resolved it.

    >>> tool_source("carried", None)
    'carried with the extract'
    >>> tool_source("0.5", 0.5)
    '0.5 s per call'
    """
    return {"measure": "measured", "carried": "carried with the extract"}.get(mode, f"{tool_s} s per call")


@dataclass(frozen=True)
class ShapeWorkload:
    """The real shape's planned work (``shape_workload``): its options, caps, the tool time's source and the
    problems' replays."""

    options: ShapeOptions
    caps: Caps
    tool_time: str  # "carried", "measure" or seconds as given: ``auto`` resolved; as given where not planned
    plan: list[list[Replay]] | None  # per problem its attempts' replays; None: the attempts file is not here

    @property
    def config(self) -> Config:
        return self.options.config

    @property
    def tool_source(self) -> str:
        return tool_source(self.tool_time, self.options.selection.tool_s)


def shape_workload(options: ShapeOptions) -> ShapeWorkload:
    """The options' plan: ``tool_time`` resolved as ``workload.tool_time_mode`` resolves it (``auto`` is the
    extract's carried seconds when it has them, else measure), and the plan made with the carried seconds when
    those are the ones used. An attempts file not here (a dry run) leaves ``plan`` None. ``BadInput`` (one line)."""
    from solver.replay import TraceError

    caps, selection = options.caps, options.selection
    if not selection.attempts_here:
        return ShapeWorkload(options, caps, selection.tool_time, None)
    try:
        problems, mode = plan_selection(selection, caps, options.config)
    except (BadInput, TraceError) as exc:  # PlanError and ConfigError are BadInputs
        raise BadInput(str(exc).splitlines()[0]) from exc
    return ShapeWorkload(options, caps, mode, problems)


def shape_dry_run(work: ShapeWorkload, dry: DryRun) -> int:
    """``--dry-run``: the plan as the run makes it (where the attempts file is here), the tool time's source, the
    model and the contenders; nothing measured, no engine."""
    caps, config = work.caps, work.config
    if work.plan is not None:
        summary = plan_summary(work.plan)
        dry.add(f"workload: {caps.line()}: {summary['requests']} requests ({summary['calls']} calls), "
                f"{summary['tokens']} decoded tokens; tool time {work.tool_source}")
    else:
        dry.add(f"workload: {caps.line()} (the attempts file is not here: not planned)")
    dry.add(f"contenders {', '.join(work.options.keys)} on {config.engine.name}, engine args "
            f"{json.dumps(config.engine.args, sort_keys=True)}")
    return dry.print()


def real_shape(options: ShapeOptions, dry: DryRun | None, argv: list[str]) -> int:
    """``benchmarks/engine.py --workload real`` (and ``benchmarks/real_shape.py``) on its checked ``options``
    (``argv``: the command's arguments, for the JSON record): plan, run the contenders, print their table; 0, or 2
    on bad input before anything starts. ``dry``: the ``--dry-run``'s ``DryRun``."""
    try:
        if dry is not None:
            dry.engine(options.config, BadInput)
        work = shape_workload(options)
        if dry is not None:
            return shape_dry_run(work, dry)
    except BadInput as exc:  # TraceError, PlanError and ConfigError arrive as BadInputs
        print(f"{SHAPE_PROG}: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    assert work.plan is not None  # no dry run: the attempts file is here
    config, caps, problems = work.config, work.caps, work.plan
    if not options.gpu:
        for key, value in config.engine.env.items():
            os.environ.setdefault(key, str(value))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    script = HarmonyEndings()
    if work.tool_time == "measure":
        t0 = time.perf_counter()
        times = measure_tool_times_alone(problems, config.sandbox)
        print(f"tool times: re-executed {len(times)} recorded calls in our sandbox in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    elif work.tool_time == "carried":
        times = {}
        print(f"tool times: carried with {options.selection.attempts_file} (measured once, not again)",
              file=sys.stderr)
    else:
        times = fixed_tool_times(problems, options.selection.tool_s)
    problems = with_tool_times(problems, times)
    summary = plan_summary(problems)
    limits = {"max_tokens": config.sampling.max_tokens, "max_total_tokens": config.sampling.max_total_tokens,
              "max_turns": config.sampling.max_turns, "max_model_len": config.engine.args.get("max_model_len")}
    print(f"workload: real attempts from {options.selection.attempts_file}: {caps.line()}; the config's limits: "
          f"{limits['max_tokens']} tokens per request, {limits['max_total_tokens']} per attempt, "
          f"{limits['max_turns']} requests, context {limits['max_model_len']}")
    print(f"replayed: {summary['requests']} requests ({summary['calls']} calls), {summary['tokens']} decoded tokens "
          f"of the recorded {summary['recorded_tokens']}, contexts up to {summary['context_max']} (median "
          f"{summary['context_median']}); tool time {summary['tool_s']:.1f} s ({work.tool_source}), the slowest "
          f"attempt's per problem {summary['tool_floor_s']:.1f} s in all; engine {config.engine.model}, "
          f"{json.dumps(config.engine.args, sort_keys=True)}")
    results = run_contenders(config, problems, list(options.keys), script, options.workers)
    lines, found = shape_report(results, problems)
    for line in lines:
        print(line)
    if options.json is not None:
        record = {
            "argv": argv, "attempts_file": str(options.selection.attempts_file),
            "preset": options.preset, "model": config.engine.model, "engine_args": config.engine.args,
            "caps": asdict(caps), "limits": limits, "tool_time": work.tool_time, "workload": summary,
            "plan": [{"problem": r.problem.id, "attempt": r.index,
                      "steps": [{"tokens": s.tokens, "call": s.call, "tool_s": round(s.tool_s, 4),
                                 "prompt_tokens": s.prompt_tokens, "ending": len(s.ending),
                                 "appended": len(s.appended), "recorded_tokens": s.recorded_tokens,
                                 "recorded_appended": s.recorded_appended} for s in r.steps]}
                     for rs in problems for r in rs],
            "contenders": [{"key": r.key, "name": r.name, "seconds": r.seconds, "per_problem_s": r.per_problem_s,
                            "tokens": r.tokens, "requests": len(r.timeline.records), "tokens_per_s": r.tps,
                            "prefix_hit_rate": r.prefix_hit_rate, "cached_share": r.timeline.cached_share(),
                            "usage": asdict(r.usage) if r.usage else None, "executions": r.executions,
                            "cpu_s": r.cpu_s,
                            "statuses": r.statuses, "timeline": r.timeline.rows(),
                            "series": {"columns": ["t", "running", "waiting", "kv_usage"], "rows": r.series}}
                           for r in results],
            "ratios": found, "identical_work": not identical_work(results, problems)}
        atomic_write(options.json, json.dumps(record, indent=1))
    return 0


# -- the same workload on the layout benchmark's layouts (``scaling``) --


def read_tool_times(path: Path) -> dict[str, float]:
    """Seconds per call from a scaling --json file (its ``tool_times``) or a plain mapping; BadInput otherwise."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"--tool-times-from: cannot read {path}: {str(exc).splitlines()[0]}") from exc
    times = data.get("tool_times", data) if isinstance(data, dict) else None
    if not isinstance(times, dict) or not all(isinstance(v, (int, float)) for v in times.values()):
        raise BadInput(f"--tool-times-from: {path} holds no seconds per call")
    return {str(k): float(v) for k, v in times.items()}


def shape_tool_times(work: ShapeWorkload, given: Path | None) -> dict[str, float]:
    """Seconds per replayed call of ``work``'s plan: from ``given`` (an earlier call's), carried with the extract,
    measured once here (re-executed in our sandbox) or fixed (``work.tool_time`` as ``shape_workload`` resolved it);
    every layout's process then waits the same."""
    problems = work.plan
    if problems is None:
        raise BadInput(f"--attempts-file: {work.options.selection.attempts_file} is not here: no plan to time")
    if given is not None:
        times = read_tool_times(given)
        calls = [key_of(r.problem.id, r.index, t) for rs in problems for r in rs for t, step in enumerate(r.steps)
                 if step.call]
        missing = [k for k in calls if k not in times]
        if missing:
            raise BadInput(f"--tool-times-from: {given} has no time for {len(missing)} of the {len(calls)} calls "
                           f"(e.g. {missing[0]}): another workload")
        return times
    if work.tool_time == "carried":
        return carried_tool_times(problems)
    if work.tool_time != "measure":
        return fixed_tool_times(problems, work.options.selection.tool_s)
    t0 = time.perf_counter()
    times = measure_tool_times_alone(problems, work.config.sandbox)
    print(f"tool times: re-executed {len(times)} recorded calls in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return times

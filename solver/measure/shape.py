"""The real shape on the engine (``benchmarks/engine.py --workload real``, ``benchmarks/real_shape.py``): its
options, checked (``parse_shape``: the layout benchmark's scaling takes the same), the plan of recorded attempts
with its tool times, the dry run, and the run of the contenders (``contenders``) with its table and JSON record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from solver.config import ConfigError, parse_overrides
from solver.errors import BadInput
from solver.files import atomic_write
from solver.measure.contenders import SHAPE_CONTENDERS, build_config, identical_work, run_contenders, shape_report
from solver.measure.dryrun import DryRun
from solver.replay import attempts_path
from solver.measure.workload import (TOOL_TIME_MODES, Caps, HarmonyEndings, PlanError,
                                     carried_tool_times, fixed_tool_times, key_of, measure_tool_times, plan,
                                     plan_summary, read_tool_seconds, tool_time_mode, tool_time_seconds,
                                     with_tool_times)

DESCRIPTION = "The real shape on the engine: recorded gpt-oss-120b attempts replayed through four contenders."


def parse_shape(argv: list[str] | None, dry: DryRun | None = None) -> argparse.Namespace:
    """The options, checked, with ``config`` built; ``dry`` (or ``--dry-run``): the dry run that records what it
    skipped (an attempts file only on the GPU machine: ``attempts_here`` False)."""
    parser = argparse.ArgumentParser(prog="engine.py --workload real", description=DESCRIPTION)
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
    parser.add_argument("--gpu", action="store_true",
                        help="the preset's own engine (default: the tiny preset's CPU engine and the tiny harmony "
                             "model, with the preset's prompt, sampling and sandbox settings)")
    parser.add_argument("--preset", default="h100-gptoss")
    parser.add_argument("--model", default=None, help="engine.model: a local path")
    parser.add_argument("--json", type=Path, default=None, help="also write the result and timelines here")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override, e.g. --set engine.args.gpu_memory_utilization=0.95")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check, start nothing (solver/measure/dryrun.py)")
    args = parser.parse_args(argv)
    args.dry = dry if dry is not None else DryRun("engine.py --workload real") if args.dry_run else None
    args.keys = [k.strip() for k in args.contenders.split(",") if k.strip()]
    if not args.keys or not set(args.keys) <= set(SHAPE_CONTENDERS):
        raise BadInput(f"--contenders: choose among {', '.join(SHAPE_CONTENDERS)}, not {args.contenders!r}")
    args.keys = [k for k in SHAPE_CONTENDERS if k in args.keys]  # (a), (t), (b1) share an engine; (s) starts its own
    for name in ("problems", "attempts", "attempt_tokens", "attempt_requests", "sandbox_workers"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise BadInput(f"--{name.replace('_', '-')} must be >= 1")
    if args.tool_time not in TOOL_TIME_MODES:
        args.tool_s = tool_time_seconds(args.tool_time, BadInput)
    if args.attempts_file is None:  # the setting as the command runs (solver.replay.attempts_path)
        args.attempts_file = attempts_path()
    args.attempts_here = args.dry.present(args.attempts_file, "--attempts-file", BadInput) if args.dry else True
    if args.attempts_here and not args.attempts_file.is_file():
        raise BadInput(f"--attempts-file: no file {args.attempts_file}")
    if args.json is not None and not args.json.parent.is_dir():
        raise BadInput(f"--json: no folder {args.json.parent}")
    try:
        args.config = build_config(args, parse_overrides(args.overrides))
    except (ConfigError, ValueError) as exc:
        raise BadInput(str(exc).splitlines()[0]) from exc
    return args


def tool_source(args: argparse.Namespace) -> str:
    """Where the tool times come from, as the report says it.

    >>> tool_source(argparse.Namespace(tool_time="carried"))
    'carried with the extract'
    >>> tool_source(argparse.Namespace(tool_time="0.5", tool_s=0.5))
    '0.5 s per call'
    """
    return {"measure": "measured", "carried": "carried with the extract"}.get(args.tool_time,
                                                                            f"{getattr(args, 'tool_s', 0)} s per call")


def shape_dry_run(args: argparse.Namespace, caps: Caps) -> int:
    """``--dry-run``: the plan as the run makes it (where the attempts file is here), the tool time's source, the
    model and the contenders; nothing measured, no engine."""
    from solver.replay import read_attempts

    dry = args.dry
    dry.engine(args.config, BadInput)
    if args.attempts_here:
        carried = read_tool_seconds(args.attempts_file)
        args.tool_time = tool_time_mode(args.tool_time, carried, args.attempts_file, BadInput)
        problems = plan(read_attempts(args.attempts_file), caps, args.config,
                        carried if args.tool_time == "carried" else None)
        work = plan_summary(problems)
        dry.add(f"workload: {caps.line()}: {work['requests']} requests ({work['calls']} calls), {work['tokens']} "
                f"decoded tokens; tool time {tool_source(args)}")
    else:
        dry.add(f"workload: {caps.line()} (the attempts file is not here: not planned)")
    dry.add(f"contenders {', '.join(args.keys)} on {args.config.engine.name}, engine args "
            f"{json.dumps(args.config.engine.args, sort_keys=True)}")
    return dry.print()


def real_shape(argv: list[str] | None = None) -> int:
    """``benchmarks/engine.py --workload real`` (and ``benchmarks/real_shape.py``): parse, plan, run the contenders,
    print their table; 0, or 2 on bad input before anything starts."""
    from solver.replay import TraceError, read_attempts

    try:
        args = parse_shape(argv)
        only = tuple(p.strip() for p in args.problem_ids.split(",") if p.strip())
        config, caps = args.config, Caps(len(only) or args.problems, args.attempts, args.attempt_tokens,
                                         args.attempt_requests, only)
        if args.dry is not None:
            return shape_dry_run(args, caps)
        carried = read_tool_seconds(args.attempts_file)
        args.tool_time = tool_time_mode(args.tool_time, carried, args.attempts_file, BadInput)
        problems = plan(read_attempts(args.attempts_file), caps, config,
                        carried if args.tool_time == "carried" else None)
    except (BadInput, TraceError, PlanError, ConfigError) as exc:
        print(f"engine.py --workload real: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    if not args.gpu:
        for key, value in config.engine.env.items():
            os.environ.setdefault(key, str(value))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    script = HarmonyEndings()
    if args.tool_time == "measure":
        from solver.sandbox.pool import create_sandbox

        async def measure() -> dict[str, float]:
            sandbox = create_sandbox(config.sandbox)
            await sandbox.start()
            try:
                return await measure_tool_times(problems, sandbox, config.sandbox.timeout_s)
            finally:
                await sandbox.close()

        t0 = time.perf_counter()
        times = asyncio.run(measure())
        print(f"tool times: re-executed {len(times)} recorded calls in our sandbox in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    elif args.tool_time == "carried":
        times = {}
        print(f"tool times: carried with {args.attempts_file} (measured once, not again)", file=sys.stderr)
    else:
        times = fixed_tool_times(problems, args.tool_s)
    problems = with_tool_times(problems, times)
    work = plan_summary(problems)
    limits = {"max_tokens": config.sampling.max_tokens, "max_total_tokens": config.sampling.max_total_tokens,
              "max_turns": config.sampling.max_turns, "max_model_len": config.engine.args.get("max_model_len")}
    print(f"workload: real attempts from {args.attempts_file}: {caps.line()}; the config's limits: "
          f"{limits['max_tokens']} tokens per request, {limits['max_total_tokens']} per attempt, "
          f"{limits['max_turns']} requests, context {limits['max_model_len']}")
    print(f"replayed: {work['requests']} requests ({work['calls']} calls), {work['tokens']} decoded tokens of the "
          f"recorded {work['recorded_tokens']}, contexts up to {work['context_max']} (median "
          f"{work['context_median']}); tool time {work['tool_s']:.1f} s "
          f"({tool_source(args)}), the slowest attempt's "
          f"per problem {work['tool_floor_s']:.1f} s in all; engine {config.engine.model}, "
          f"{json.dumps(config.engine.args, sort_keys=True)}")
    workers = args.sandbox_workers or args.attempts
    results = run_contenders(config, problems, args.keys, script, workers)
    lines, found = shape_report(results, problems)
    for line in lines:
        print(line)
    if args.json is not None:
        record = {
            "argv": sys.argv[1:] if argv is None else argv, "attempts_file": str(args.attempts_file),
            "preset": args.preset, "model": config.engine.model, "engine_args": config.engine.args,
            "caps": asdict(caps), "limits": limits, "tool_time": args.tool_time, "workload": work,
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
        atomic_write(args.json, json.dumps(record, indent=1))
    return 0


# -- the same workload on the layout benchmark's layouts (``scaling``) --


def shape_workload(rest: list[str], dry: DryRun | None = None) -> argparse.Namespace:
    """engine.py --workload real's own options (``parse_shape``), its config and its plan; ``tool_time`` resolved
    as engine.py resolves it (``workload.tool_time_mode``: ``auto`` is the extract's carried seconds when it has
    them, else measure), and the plan made with the carried seconds when those are the ones used. ``dry``: a dry
    run; an attempts file only on the GPU machine leaves ``plan`` None."""
    from solver.replay import TraceError, read_attempts

    try:
        args = parse_shape([*rest, "--contenders", "b1"], dry)
        only = tuple(p.strip() for p in args.problem_ids.split(",") if p.strip())
        args.caps = Caps(len(only) or args.problems, args.attempts, args.attempt_tokens, args.attempt_requests, only)
        args.plan = None
        if not args.attempts_here:
            return args
        carried = read_tool_seconds(args.attempts_file)
        args.tool_time = tool_time_mode(args.tool_time, carried, args.attempts_file, BadInput)
        args.plan = plan(read_attempts(args.attempts_file), args.caps, args.config,
                         carried if args.tool_time == "carried" else None)
    except (BadInput, TraceError) as exc:  # PlanError and ConfigError are BadInputs
        raise BadInput(str(exc).splitlines()[0]) from exc
    return args


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


def shape_tool_times(args: argparse.Namespace, given: Path | None) -> dict[str, float]:
    """Seconds per replayed call: from ``given`` (an earlier call's), carried with the extract, measured once here
    (re-executed in our sandbox) or fixed (``args.tool_time`` as ``shape_workload`` resolved it); every layout's
    process then waits the same."""
    if given is not None:
        times = read_tool_times(given)
        calls = [key_of(r.problem.id, r.index, t) for rs in args.plan for r in rs for t, step in enumerate(r.steps)
                 if step.call]
        missing = [k for k in calls if k not in times]
        if missing:
            raise BadInput(f"--tool-times-from: {given} has no time for {len(missing)} of the {len(calls)} calls "
                           f"(e.g. {missing[0]}): another workload")
        return times
    if args.tool_time == "carried":
        return carried_tool_times(args.plan)
    if args.tool_time != "measure":
        return fixed_tool_times(args.plan, args.tool_s)
    from solver.sandbox.pool import create_sandbox

    async def measure() -> dict[str, float]:
        sandbox = create_sandbox(args.config.sandbox)
        await sandbox.start()
        try:
            return await measure_tool_times(args.plan, sandbox, args.config.sandbox.timeout_s)
        finally:
            await sandbox.close()

    t0 = time.perf_counter()
    times = asyncio.run(measure())
    print(f"tool times: re-executed {len(times)} recorded calls in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return times

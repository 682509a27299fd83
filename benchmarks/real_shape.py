"""The real shape on the engine: recorded gpt-oss-120b attempts replayed through four contenders.

One problem at a time, K attempts at once (``engine.py --workload real``):

  (a)  one request per attempt with the attempt's total decoded tokens: no turns, no tools (the ceiling);
  (t)  the attempt's turns through the engine with no solver code: a request per turn on vLLM's ``AsyncLLM``,
       each prompt the grown context (what the engine generated, the scripted ending, the appended ids the plan
       holds), the tool's seconds waited between turns;
  (b1) the pipeline as on Kaggle: ``ProblemSolver`` with the harmony dialect and the preset's settings (stateful
       sandbox sessions, the recorded tool messages through ``solver.recordings.RecordedCalls``), the in-process engine;
  (s)  the same pipeline through ``--engine openai`` against a vLLM OpenAI server started as ``solver serve`` does
       (token-id prompts, streaming, a request per turn).

Every contender decodes exactly the plan's tokens (``solver.measure.workload``: each request the recorded count,
drawn among plain words), so the work is identical; (t), (b1) and (s) also send identical prompts. Printed per
contender: tokens/s, seconds per problem, the prefix-cache hit rate (the engine's counters, and per request),
preemptions, the KV cache peak and requests running (``Sampler``); then the ratios (b1)/(t) (the solver's cost on
top of the engine's turns), (b1)/(s) (in-process vs server) and (t)/(a) (the engine's own cost of turns). ``--json``
writes each contender's per-request timeline and metrics series (``solver.measure.timeline``).

    python benchmarks/engine.py --workload real --attempts 2 --attempt-tokens 300     # CPU, tiny harmony model
    python benchmarks/engine.py --workload real --gpu --model PATH --attempt-tokens 6000 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from solver.measure import DryRun
from solver.config import Config, ConfigError
from solver.errors import BadInput
from solver.measure import (DEFAULT_ATTEMPTS_FILE, TOOL_TIME_MODES, Caps, HarmonyEndings, PlanError, RecordedCalls,
                            Replay, RequestRecord, RequestTimeline, Sampler, ServerMetrics, TimedEngine,
                            fixed_tool_times, in_process_reader, measure_tool_times, plan, plan_summary, preset_engine,
                            read_tool_seconds, replay_on_engine, tool_time_mode, tool_time_seconds, warm_up,
                            with_tool_times)
from solver.engines.openai import free_ports
from solver.engines.vllm_metrics import Usage
from solver.files import atomic_write
from solver.types import GenerationRequest

CONTENDERS = ("a", "t", "b1", "s")
NAMES = {"a": "(a) one request", "t": "(t) turns, engine", "b1": "(b1) pipeline", "s": "(s) server"}


@dataclass
class Result:
    key: str
    seconds: float
    per_problem_s: list[float]
    timeline: RequestTimeline
    usage: Usage | None = None
    prefix_hit_rate: float | None = None
    series: list[list[float]] = field(default_factory=list)
    cpu_s: float = 0.0  # this process's CPU seconds during the run (all threads: the client, vLLM's front end)
    executions: int | None = None  # tool calls the pipeline ran
    statuses: dict[str, int] | None = None  # repetitions by status (the pipelines)

    @property
    def name(self) -> str:
        return NAMES[self.key]

    @property
    def tokens(self) -> int:
        return sum(r.generated_tokens for r in self.timeline.records)

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def build_config(args: argparse.Namespace, overrides: dict[str, Any]) -> Config:
    """The preset (``h100-gptoss``) as ``preset_engine`` gives it, with the rules off and K attempts at once.
    Overrides last. ConfigError on a bad value."""
    config = preset_engine(args.preset, args.gpu)
    fixed = {"stop.stoppers": [], "stop.first_answer": False, "solve.workers": args.attempts,
             "solve.reps": args.attempts, "sandbox.code_mode": "stateful"}
    if args.model:
        fixed["engine.model"] = args.model
    return config.replace({**overrides, **fixed})


def first_prompts(problems: list[list[Replay]], config: Config) -> dict[str, list[int]]:
    from solver.dialects import make_dialect

    dialect = make_dialect(config, None)
    return {rs[0].problem.id: list(dialect.start(rs[0].problem).prompt().token_ids or ()) for rs in problems}


def forced_request(config: Config, replay: Replay, turn: int, tokens: int, script: HarmonyEndings) -> GenerationRequest:
    """The request the pipeline's traced engine sends for this turn (same seed and sampling parameters), so the
    engine-only contenders decode the same tokens."""
    from solver.loop.repetition import repetition_seed

    s = config.sampling
    extra = {**s.extra, "ignore_eos": True, "min_tokens": tokens, "allowed_token_ids": list(script.words)}
    return GenerationRequest(f"{replay.problem.id}-r{replay.index}-t{turn}", "", None, tokens, s.temperature,
                             s.top_p, repetition_seed(s.seed, replay.problem.id, replay.index) + turn, (),
                             logprobs=s.logprobs, extra=extra, problem_id=replay.problem.id,
                             repetition=replay.index, turn=turn)


async def engine_request(llm: Any, ids: list[int], request: GenerationRequest, timeline: RequestTimeline) -> list[int]:
    """One request straight to vLLM's ``AsyncLLM``; its generated ids, its record in ``timeline``."""
    from vllm.inputs import TokensPrompt

    from solver.engines.vllm_async import sampling_params
    from solver.engines.vllm_compat import num_unfinished_requests

    start, held = timeline.now(), num_unfinished_requests(llm)
    first, cached, out, finish = None, None, [], None
    async for output in llm.generate(TokensPrompt(prompt_token_ids=ids), sampling_params(request),
                                     request_id=f"{request.request_id}-{uuid.uuid4().hex[:8]}"):
        if cached is None:
            cached = output.num_cached_tokens
        completion = output.outputs[0]
        if first is None and completion.token_ids:
            first = timeline.now()
        out.extend(completion.token_ids)
        finish = completion.finish_reason or finish
    timeline.records.append(RequestRecord(request.problem_id, request.repetition, request.turn, start, first,
                                          timeline.now(), len(ids), cached, len(out), held, finish))
    return out


async def one_request(llm: Any, config: Config, replay: Replay, prompt: list[int], script: HarmonyEndings,
                      timeline: RequestTimeline) -> None:
    """(a): the attempt's decoded tokens in one request."""
    await engine_request(llm, prompt, forced_request(config, replay, 0, replay.tokens, script), timeline)


async def turns(llm: Any, config: Config, replay: Replay, prompt: list[int], script: HarmonyEndings,
                timeline: RequestTimeline) -> None:
    """(t): the attempt's turns, each a new request on the grown context; the tool's seconds between them."""
    ids = list(prompt)
    for turn, step in enumerate(replay.steps):
        real = await engine_request(llm, ids, forced_request(config, replay, turn, step.tokens, script), timeline)
        ids += real + list(step.ending) + list(step.appended)
        if step.call:
            await asyncio.sleep(step.tool_s)


async def by_problem(problems: list[list[Replay]], one: Any) -> tuple[float, list[float], float]:
    """Run ``one(replays)`` per problem, one problem after another; total and per-problem seconds, and this
    process's CPU seconds over them."""
    per, cpu0 = [], time.process_time()
    for replays in problems:
        t0 = time.perf_counter()
        await one(replays)
        per.append(time.perf_counter() - t0)
    return sum(per), per, time.process_time() - cpu0


async def engine_only(key: str, llm: Any, config: Config, problems: list[list[Replay]], prompts: dict[str, list[int]],
                      script: HarmonyEndings) -> Result:
    """(a) or (t) on the in-process engine."""
    work = one_request if key == "a" else turns
    timeline = RequestTimeline()
    async with Sampler(in_process_reader) as sampler:
        timeline.t0 = time.perf_counter()
        seconds, per, cpu = await by_problem(problems, lambda rs: asyncio.gather(
            *(work(llm, config, r, prompts[r.problem.id], script, timeline) for r in rs)))
    return Result(key, seconds, per, timeline, sampler.usage, sampler.prefix_hit_rate, sampler.series(), cpu)


async def pipeline(key: str, engine: Any, sandbox: Any, config: Config, problems: list[list[Replay]],
                   script: HarmonyEndings,
                   read: Any) -> Result:
    """(b1) or (s): ``ProblemSolver`` over the replays, one problem after another."""
    from solver.dialects import OutputStyle
    from solver.loop.problem import ProblemSolver

    timeline = RequestTimeline()
    traced = replay_on_engine(TimedEngine(engine, timeline), problems, script)
    outputs = RecordedCalls(sandbox, problems, OutputStyle.from_config(config.prompt), config.sandbox.timeout_s)
    reps: list[Any] = []
    solver = ProblemSolver(config, traced, outputs, on_repetition=reps.append)
    async with Sampler(read) as sampler:
        timeline.t0 = time.perf_counter()
        seconds, per, cpu = await by_problem(problems, lambda rs: solver.solve(rs[0].problem))
    statuses: dict[str, int] = {}
    for rep in reps:
        statuses[rep.status] = statuses.get(rep.status, 0) + 1
    return Result(key, seconds, per, timeline, sampler.usage, sampler.prefix_hit_rate, sampler.series(), cpu,
                  sum(len(r.executions) for r in reps), statuses)


async def reset_prefix_cache(llm: Any) -> None:
    """Empty the prefix cache between contenders: (t) and (b1) decode the same tokens, and the second must not
    find the first's blocks."""
    if not await llm.reset_prefix_cache():
        print("warning: the prefix cache could not be reset (requests still running)", file=sys.stderr)


async def in_process(config: Config, problems: list[list[Replay]], keys: list[str], script: HarmonyEndings,
                     workers: int) -> list[Result]:
    """(a), (t), (b1) on one in-process engine, in that order, the prefix cache emptied before each."""
    from solver.engines import open_engine
    from solver.sandbox.pool import create_sandbox

    prompts = first_prompts(problems, config)
    sandbox = create_sandbox(replace(config.sandbox, workers=workers))
    await sandbox.start()
    engine = await open_engine(config)
    try:
        await warm_up(engine, script)
        out = []
        for key in keys:
            await reset_prefix_cache(engine._llm)
            if key == "b1":
                out.append(await pipeline(key, engine, sandbox, config, problems, script, in_process_reader))
            else:
                out.append(await engine_only(key, engine._llm, config, problems, prompts, script))
            print(f"  {NAMES[key]}: {out[-1].seconds:.1f} s", file=sys.stderr)
        return out
    finally:
        await engine.close()
        await sandbox.close()


def through_server(config: Config, problems: list[list[Replay]], script: HarmonyEndings, workers: int) -> Result:
    """(s): a vLLM OpenAI server as ``solver serve`` starts it (``launch_servers``; per-request cached tokens on),
    the pipeline on ``--engine openai``."""
    from solver.engines.launch import launch_servers

    async def run(urls: list[str]) -> Result:
        from solver.engines import open_engine
        from solver.sandbox.pool import create_sandbox

        remote = config.replace({"engine.name": "openai", "engine.endpoints": urls})
        sandbox = create_sandbox(replace(config.sandbox, workers=workers))
        await sandbox.start()
        engine = await open_engine(remote)
        metrics = ServerMetrics(urls[0])
        try:
            await warm_up(engine, script)
            return await pipeline("s", engine, sandbox, remote, problems, script, metrics)
        finally:
            await metrics.aclose()
            await engine.close()
            await sandbox.close()

    with launch_servers(config, 1, free_ports(1), extra_args=["--enable-prompt-tokens-details"]) as urls:
        return asyncio.run(run(urls))


def work_of(result: Result) -> dict[tuple[str, int, int], tuple[int, int]]:
    """(decoded tokens, prompt tokens) per (problem, attempt, turn)."""
    return {(r.problem, r.attempt, r.turn): (r.generated_tokens, r.prompt_tokens) for r in result.timeline.records}


def identical_work(results: list[Result], problems: list[list[Replay]]) -> list[str]:
    """What differs from the plan: every contender must decode the plan's tokens; the turn-by-turn contenders must
    also send the plan's prompts, request by request. Empty when all did identical work."""
    planned = {(r.problem.id, r.index, t): (s.tokens, s.prompt_tokens) for rs in problems for r in rs
               for t, s in enumerate(r.steps)}
    total = sum(v[0] for v in planned.values())
    faults = []
    for result in results:
        if result.tokens != total:
            faults.append(f"{result.name} decoded {result.tokens} tokens, the plan {total}")
        if result.key != "a" and work_of(result) != planned:
            differ = sum(work_of(result).get(k) != v for k, v in planned.items())
            faults.append(f"{result.name}: {differ} of {len(planned)} requests differ from the plan "
                          f"(decoded or prompt tokens)")
    return faults


def ratios(results: list[Result]) -> dict[str, float]:
    by = {r.key: r for r in results}
    pairs = (("b1", "t"), ("b1", "s"), ("t", "a"))
    return {f"({x})/({y})": by[x].tps / by[y].tps for x, y in pairs if x in by and y in by and by[y].tps}


def print_report(results: list[Result], problems: list[list[Replay]]) -> dict[str, float]:
    print(f"{'contender':<20}{'requests':>9}{'tokens':>9}{'seconds':>9}{'s/problem':>10}{'tok/s':>9}{'prefix hit':>11}"
          f"{'cached':>8}{'preempt':>8}{'KV peak':>8}{'running':>8}{'calls':>7}{'cpu ms/1k':>10}")
    for r in results:
        hit = "-" if r.prefix_hit_rate is None else f"{100 * r.prefix_hit_rate:.0f} %"
        cached = r.timeline.cached_share()
        usage = r.usage
        print(f"{r.name:<20}{len(r.timeline.records):>9}{r.tokens:>9}{r.seconds:>9.2f}"
              f"{r.seconds / max(1, len(r.per_problem_s)):>10.2f}{r.tps:>9.1f}{hit:>11}"
              f"{'-' if cached is None else f'{100 * cached:.0f} %':>8}"
              f"{'-' if usage is None else usage.preemptions:>8}"
              f"{'-' if usage is None else f'{100 * usage.kv_peak:.0f} %':>8}"
              f"{'-' if usage is None else usage.running_peak:>8}{'-' if r.executions is None else r.executions:>7}"
              f"{1e6 * r.cpu_s / max(1, r.tokens):>10.1f}")
    found = ratios(results)
    notes = {"(b1)/(t)": "the solver's cost over the engine's own turns", "(b1)/(s)": "in-process vs server",
             "(t)/(a)": "the engine's own cost of turns"}
    for key, value in found.items():
        print(f"ratio {key} = {value:.3f}   ({notes[key]})")
    faults = identical_work(results, problems)
    print("identical work: " + ("yes (every contender decoded the plan's tokens; the turn-by-turn ones sent its "
                                "prompts)" if not faults else "NO: " + "; ".join(faults)))
    return found


def parse(argv: list[str] | None, dry: DryRun | None = None) -> argparse.Namespace:
    """The options, checked, with ``config`` built; ``dry`` (or ``--dry-run``): the dry run that records what it
    skipped (an attempts file only on the GPU machine: ``attempts_here`` False)."""
    parser = argparse.ArgumentParser(prog="engine.py --workload real", description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("real",), default="real")
    parser.add_argument("--attempts-file", type=Path, default=DEFAULT_ATTEMPTS_FILE,
                        help="recorded attempts (token traces; the dev file, or an extract written by "
                             "benchmarks/extract_attempts.py)")
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
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
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
    if not args.keys or not set(args.keys) <= set(CONTENDERS):
        raise BadInput(f"--contenders: choose among {', '.join(CONTENDERS)}, not {args.contenders!r}")
    args.keys = [k for k in CONTENDERS if k in args.keys]  # (a), (t), (b1) share an engine; (s) starts its own
    for name in ("problems", "attempts", "attempt_tokens", "attempt_requests", "sandbox_workers"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise BadInput(f"--{name.replace('_', '-')} must be >= 1")
    if args.tool_time not in TOOL_TIME_MODES:
        args.tool_s = tool_time_seconds(args.tool_time, BadInput)
    args.attempts_here = args.dry.present(args.attempts_file, "--attempts-file", BadInput) if args.dry else True
    if args.attempts_here and not args.attempts_file.is_file():
        raise BadInput(f"--attempts-file: no file {args.attempts_file}")
    if args.json is not None and not args.json.parent.is_dir():
        raise BadInput(f"--json: no folder {args.json.parent}")
    try:
        from solver.config import parse_overrides

        args.config = build_config(args, parse_overrides(args.overrides))
    except (ConfigError, ValueError) as exc:
        raise BadInput(str(exc).splitlines()[0]) from exc
    return args


def tool_source(args: argparse.Namespace) -> str:
    """
    >>> tool_source(argparse.Namespace(tool_time="carried")), tool_source(argparse.Namespace(tool_time="0.5", tool_s=0.5))
    ('carried with the extract', '0.5 s per call')
    """
    return {"measure": "measured", "carried": "carried with the extract"}.get(args.tool_time,
                                                                            f"{getattr(args, 'tool_s', 0)} s per call")


def dry_run(args: argparse.Namespace, caps: Caps) -> int:
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


def main(argv: list[str] | None = None) -> int:
    from solver.replay import TraceError, read_attempts

    try:
        args = parse(argv)
        only = tuple(p.strip() for p in args.problem_ids.split(",") if p.strip())
        config, caps = args.config, Caps(len(only) or args.problems, args.attempts, args.attempt_tokens,
                                         args.attempt_requests, only)
        if args.dry is not None:
            return dry_run(args, caps)
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
    results: list[Result] = []
    local = [k for k in args.keys if k != "s"]
    if local:
        results += asyncio.run(in_process(config, problems, local, script, workers))
    if "s" in args.keys:
        results.append(through_server(config, problems, script, workers))
        print(f"  {NAMES['s']}: {results[-1].seconds:.1f} s", file=sys.stderr)
    found = print_report(results, problems)
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


if __name__ == "__main__":
    sys.exit(main())

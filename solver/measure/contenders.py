"""The real shape's contenders: recorded attempts (``workload``'s replay plans) on one engine four ways, one
problem at a time, K attempts at once (``benchmarks/engine.py --workload real``, ``shape``):

  (a)  one request per attempt with the attempt's total decoded tokens: no turns, no tools (the ceiling);
  (t)  the attempt's turns through the engine with no solver code: a request per turn on vLLM's ``AsyncLLM``,
       each prompt the grown context, the tool's seconds waited between turns;
  (b1) the pipeline as on Kaggle: ``ProblemSolver`` over the replay, the in-process engine;
  (s)  the same pipeline through ``--engine openai`` against a vLLM OpenAI server started as ``solver serve`` does.

Each contender's per-request timeline and engine metrics (``timeline``), and whether all did the plan's work.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from solver.config import Config
from solver.engines.openai import free_ports
from solver.engines.vllm_metrics import Usage
from solver.measure.request_timeline import (RequestRecord, RequestTimeline, Sampler, ServerMetrics, TimedEngine,
                                     in_process_reader)
from solver.measure.workload import HarmonyEndings, recorded_calls, Replay, preset_engine, replay_on_engine, warm_up
from solver.types import GenerationRequest

SHAPE_CONTENDERS = ("a", "t", "b1", "s")
NAMES = {"a": "(a) one request", "t": "(t) turns, engine", "b1": "(b1) pipeline", "s": "(s) server"}


@dataclass
class ShapeResult:
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


def build_config(preset: str, gpu: bool, attempts: int, model: str | None, overrides: dict[str, Any]) -> Config:
    """The preset (``h100-gptoss``) as ``preset_engine`` gives it (``gpu``: its own engine), with the rules off and
    ``attempts`` at once; ``model``: engine.model. Overrides last. ConfigError on a bad value."""
    config = preset_engine(preset, gpu)
    fixed = {"stop.stoppers": [], "stop.first_answer": False, "solve.workers": attempts,
             "solve.reps": attempts, "sandbox.code_mode": "stateful"}
    if model:
        fixed["engine.model"] = model
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


async def turn_by_turn(llm: Any, config: Config, replay: Replay, prompt: list[int], script: HarmonyEndings,
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
                      script: HarmonyEndings) -> ShapeResult:
    """(a) or (t) on the in-process engine."""
    work = one_request if key == "a" else turn_by_turn
    timeline = RequestTimeline()
    async with Sampler(in_process_reader) as sampler:
        timeline.t0 = time.perf_counter()
        seconds, per, cpu = await by_problem(problems, lambda rs: asyncio.gather(
            *(work(llm, config, r, prompts[r.problem.id], script, timeline) for r in rs)))
    return ShapeResult(key, seconds, per, timeline, sampler.usage, sampler.prefix_hit_rate, sampler.series(), cpu)


async def pipeline(key: str, engine: Any, sandbox: Any, config: Config, problems: list[list[Replay]],
                   script: HarmonyEndings,
                   read: Any) -> ShapeResult:
    """(b1) or (s): ``ProblemSolver`` over the replays, one problem after another."""
    from solver.dialects import OutputStyle
    from solver.loop.problem import ProblemSolver

    timeline = RequestTimeline()
    traced = replay_on_engine(TimedEngine(engine, timeline), problems, script)
    outputs = recorded_calls(sandbox, problems, OutputStyle.from_config(config.prompt), config.sandbox.timeout_s)
    reps: list[Any] = []
    solver = ProblemSolver(config, traced, outputs, on_repetition=reps.append)
    async with Sampler(read) as sampler:
        timeline.t0 = time.perf_counter()
        seconds, per, cpu = await by_problem(problems, lambda rs: solver.solve(rs[0].problem))
    statuses: dict[str, int] = {}
    for rep in reps:
        statuses[rep.status] = statuses.get(rep.status, 0) + 1
    return ShapeResult(key, seconds, per, timeline, sampler.usage, sampler.prefix_hit_rate, sampler.series(), cpu,
                  sum(len(r.executions) for r in reps), statuses)


async def reset_prefix_cache(llm: Any) -> None:
    """Empty the prefix cache between contenders: (t) and (b1) decode the same tokens, and the second must not
    find the first's blocks."""
    if not await llm.reset_prefix_cache():
        print("warning: the prefix cache could not be reset (requests still running)", file=sys.stderr)


async def shape_in_process(config: Config, problems: list[list[Replay]], keys: list[str], script: HarmonyEndings,
                     workers: int) -> list[ShapeResult]:
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


def through_server(config: Config, problems: list[list[Replay]], script: HarmonyEndings, workers: int) -> ShapeResult:
    """(s): a vLLM OpenAI server as ``solver serve`` starts it (``launch_servers``; per-request cached tokens on),
    the pipeline on ``--engine openai``."""
    from solver.engines.launch import launch_servers

    async def run(urls: list[str]) -> ShapeResult:
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


def work_of(result: ShapeResult) -> dict[tuple[str, int, int], tuple[int, int]]:
    """(decoded tokens, prompt tokens) per (problem, attempt, turn)."""
    return {(r.problem, r.attempt, r.turn): (r.generated_tokens, r.prompt_tokens) for r in result.timeline.records}


def identical_work(results: list[ShapeResult], problems: list[list[Replay]]) -> list[str]:
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


def ratios(results: list[ShapeResult]) -> dict[str, float]:
    by = {r.key: r for r in results}
    pairs = (("b1", "t"), ("b1", "s"), ("t", "a"))
    return {f"({x})/({y})": by[x].tps / by[y].tps for x, y in pairs if x in by and y in by and by[y].tps}


def shape_report(results: list[ShapeResult], problems: list[list[Replay]]) -> tuple[list[str], dict[str, float]]:
    """The contenders' table, their ratios and whether the work was identical, as printed lines; the ratios."""
    lines = [f"{'contender':<20}{'requests':>9}{'tokens':>9}{'seconds':>9}{'s/problem':>10}{'tok/s':>9}"
             f"{'prefix hit':>11}{'cached':>8}{'preempt':>8}{'KV peak':>8}{'running':>8}{'calls':>7}{'cpu ms/1k':>10}"]
    for r in results:
        hit = "-" if r.prefix_hit_rate is None else f"{100 * r.prefix_hit_rate:.0f} %"
        cached = r.timeline.cached_share()
        usage = r.usage
        lines.append(f"{r.name:<20}{len(r.timeline.records):>9}{r.tokens:>9}{r.seconds:>9.2f}"
                     f"{r.seconds / max(1, len(r.per_problem_s)):>10.2f}{r.tps:>9.1f}{hit:>11}"
                     f"{'-' if cached is None else f'{100 * cached:.0f} %':>8}"
                     f"{'-' if usage is None else usage.preemptions:>8}"
                     f"{'-' if usage is None else f'{100 * usage.kv_peak:.0f} %':>8}"
                     f"{'-' if usage is None else usage.running_peak:>8}"
                     f"{'-' if r.executions is None else r.executions:>7}"
                     f"{1e6 * r.cpu_s / max(1, r.tokens):>10.1f}")
    found = ratios(results)
    notes = {"(b1)/(t)": "the solver's cost over the engine's own turns", "(b1)/(s)": "in-process vs server",
             "(t)/(a)": "the engine's own cost of turns"}
    lines += [f"ratio {key} = {value:.3f}   ({notes[key]})" for key, value in found.items()]
    faults = identical_work(results, problems)
    lines.append("identical work: " + ("yes (every contender decoded the plan's tokens; the turn-by-turn ones sent "
                                       "its prompts)" if not faults else "NO: " + "; ".join(faults)))
    return lines, found


def run_contenders(config: Config, problems: list[list[Replay]], keys: list[str], script: HarmonyEndings,
                   workers: int) -> list[ShapeResult]:
    """``keys`` in order: (a), (t), (b1) on one in-process engine, then (s) on a server of its own."""
    results: list[ShapeResult] = []
    local = [k for k in keys if k != "s"]
    if local:
        results += asyncio.run(shape_in_process(config, problems, local, script, workers))
    if "s" in keys:
        results.append(through_server(config, problems, script, workers))
        print(f"  {NAMES['s']}: {results[-1].seconds:.1f} s", file=sys.stderr)
    return results

"""Does the pipeline keep the engine saturated? Three ways to generate the same repetitions, in one run:

  (a) raw      vLLM's offline ``LLM.generate`` over the same sequences and token volume (each sequence made to
               generate as many tokens as its repetition did in (b)), with no turns and no code;
  (b) pipeline ``ProblemSolver``: W repetitions in flight per problem, code runs while others generate,
               the problems solved together (b) or one after another as on Kaggle (b1);
  (c) rounds   synchronous rounds: generate every repetition's turn, then run all code, then continue all.

Prints generated tokens/s for each, the ratios (b)/(a) and (b)/(c), the main process's CPU milliseconds per
repetition (orchestration plus vLLM's own front end, which lives in this process), and the share of the
pipeline's wall time during which the engine had no request running, the requests it held on average (running
or waiting) and the share of continued turns' prompts served from the prefix cache. Ratios, not absolute speeds, are the
result: the machine is shared and noisy, which is why all three run side by side here.

Two workloads. ``trace`` (default): every repetition follows a plan (``workload.py``) of 1-4 turns of uneven
length, each but the last ending in a program that runs for a log-normal time, as a maths model's repetitions
do; the real engine decodes exactly the planned tokens, so all contenders do identical work. ``model``: the tiny
model writes what it writes (rarely code, and code that runs in a millisecond).

    python benchmarks/engine.py                    # trace: 2 problems x 16 repetitions
    python benchmarks/engine.py --code-median 0    # programs that take no time: only uneven turns remain
    python benchmarks/engine.py --workload model   # the model's own text: 2 turns of at most 96 tokens
    python benchmarks/engine.py --quick            # a smaller run for CI
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from dataclasses import dataclass, replace

from solver.commands.common import parse_overrides
from solver.config import Config, load_config
from solver.datasets import load_problems
from solver.dialects import TurnOutput, make_dialect
from solver.loop.repetition import repetition_seed
from solver.types import GenerationRequest, Problem
from workload import Profile, TracedEngine, make_plans

# A nudge so the tiny model writes code often enough to exercise the sandbox path.
CODE_HINT = " Write a short Python program that prints the answer."


@dataclass
class Measure:
    name: str
    seconds: float
    tokens: int
    sequences: int
    executions: int = 0
    cpu_ms_per_rep: float | None = None
    idle_share: float | None = None
    mean_held: float | None = None  # requests the engine held (running or waiting), time-averaged
    cached_share: float | None = None  # of continued turns' prompt tokens, the share the prefix cache served
    lengths: dict[tuple[str, int], int] | None = None  # generated tokens per (problem, repetition)

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


class IdleSampler:
    """Samples ``engine.running_requests()`` every ``period_s`` seconds; idle share = samples with none running."""

    def __init__(self, engine, period_s: float = 0.01) -> None:
        self.engine, self.period_s = engine, period_s
        self.samples = self.idle = self.held = 0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            held = self.engine.running_requests()
            self.samples += 1
            self.idle += held == 0
            self.held += held
            await asyncio.sleep(self.period_s)

    def __enter__(self) -> IdleSampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()

    @property
    def share(self) -> float:
        return self.idle / self.samples if self.samples else 0.0

    @property
    def mean_held(self) -> float:
        return self.held / self.samples if self.samples else 0.0


def cached_share(reps) -> float | None:
    """Prefix-cache hits over the prompts of every turn after the first (the turns that continue a context)."""
    later = [t for r in reps for t in r.turns[1:] if t.cached_tokens is not None]
    prompt = sum(t.prompt_tokens for t in later)
    return sum(t.cached_tokens for t in later) / prompt if prompt else None


async def pipeline(config: Config, problems: list[Problem], engine, sandbox, *, together: bool = True) -> Measure:
    """The solver's own loop; ``together`` solves the problems at once (``solve.parallel_problems``), else one
    after another as the Kaggle gateway serves them."""
    from solver.loop.problem import ProblemSolver

    reps = []
    solver = ProblemSolver(config, engine, sandbox, on_repetition=reps.append)
    cpu0, t0 = time.process_time(), time.perf_counter()
    with IdleSampler(engine) as sampler:
        if together:
            await asyncio.gather(*(solver.solve(p) for p in problems))
        else:
            for problem in problems:
                await solver.solve(problem)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    name = "(b) pipeline" if together else "(b1) one by one"
    return Measure(name, seconds, sum(r.generated_tokens for r in reps), len(reps),
                   sum(len(r.executions) for r in reps), 1000 * cpu / max(1, len(reps)), sampler.share,
                   sampler.mean_held, cached_share(reps),
                   lengths={(r.problem_id, r.index): r.generated_tokens for r in reps})


async def rounds(config: Config, problems: list[Problem], engine, sandbox) -> Measure:
    """The synchronous-rounds baseline over every repetition of every problem at once: each round waits for
    the slowest generation, then all code runs while the engine idles, then every repetition continues."""
    s = config.sampling
    dialect = make_dialect(config, engine.tokenizer)
    live = []
    for problem in problems:
        live += [{"problem": problem, "index": i, "dialogue": dialect.start(problem), "used": 0}
                 for i in range(config.solve.reps)]
    tokens = executions = 0
    sequences = len(live)

    async def one(state: dict, turn: int) -> TurnOutput:
        problem = state["problem"]
        prompt = state["dialogue"].prompt()
        req = GenerationRequest(
            f"rounds-{problem.id}-{state['index']}-{turn}", prompt.text, prompt.token_ids,
            max_tokens=min(s.max_tokens, s.max_total_tokens - state["used"]), temperature=s.temperature,
            top_p=s.top_p, seed=repetition_seed(s.seed, problem.id, state["index"]) + turn,
            stop=dialect.stops.strings, stop_token_ids=dialect.stops.token_ids,
            extra=s.extra, problem_id=problem.id, repetition=state["index"], turn=turn)
        parts, ids, last = [], [], None
        async with contextlib.aclosing(engine.stream(req)) as deltas:
            async for d in deltas:
                parts.append(d.text)
                ids.extend(d.token_ids)
                if d.finish_reason:
                    last = d
        return TurnOutput("".join(parts), tuple(ids), last.finish_reason if last else "error",
                          last.stop_reason if last else None, last.stop_token if last else None)

    t0 = time.perf_counter()
    with IdleSampler(engine) as sampler:
        for turn in range(s.max_turns):
            outs = await asyncio.gather(*(one(st, turn) for st in live))  # generate all ...
            readings = []
            for st, out in zip(live, outs):
                st["used"] += len(out.token_ids)
                tokens += len(out.token_ids)
                readings.append(st["dialogue"].read(out))
            runs = iter(await asyncio.gather(*(sandbox.run(r.call) for r in readings if r.call)))  # ... execute all ...
            nxt = []
            for st, out, reading in zip(live, outs, readings):
                if reading.call is None:
                    continue
                executions += 1
                execution = next(runs)
                if st["used"] >= s.max_total_tokens:
                    continue
                st["dialogue"].reply(out, reading, execution)
                nxt.append(st)
            live = nxt  # ... then continue all
            if not live:
                break
    return Measure("(c) rounds", time.perf_counter() - t0, tokens, sequences, executions,
                   idle_share=sampler.share, mean_held=sampler.mean_held)


def raw(config: Config, problems: list[Problem], model: str, lengths: dict[tuple[str, int], int]) -> Measure:
    """Offline ``LLM.generate`` over the same first prompts and seeds, one request per repetition, each made to
    generate exactly as many tokens as that repetition generated in the pipeline (same sequences, same token
    volume: what the engine alone needs for the work the pipeline did)."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=model, **{"seed": config.sampling.seed, **config.engine.args})
    try:
        tokenizer = llm.get_tokenizer()
        dialect = make_dialect(config, tokenizer)
        prompts, params = [], []
        s = config.sampling
        for problem in problems:
            ids = list(dialect.start(problem).prompt().token_ids or ())
            for index in range(config.solve.reps):
                n = lengths.get((problem.id, index), 0)
                if n <= 0:
                    continue
                prompts.append(TokensPrompt(prompt_token_ids=ids))
                params.append(SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True,
                                             temperature=s.temperature, top_p=s.top_p,
                                             seed=repetition_seed(s.seed, problem.id, index)))
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - t0
        return Measure("(a) raw", seconds, sum(len(o.outputs[0].token_ids) for o in outs), len(outs))
    finally:
        with contextlib.suppress(Exception):
            llm.llm_engine.engine_core.shutdown()
        del llm


async def in_process(config: Config, problems: list[Problem], profile: Profile | None) -> list[Measure]:
    from solver.engines import open_engine
    from solver.sandbox.pool import create_sandbox

    sandbox = create_sandbox(config.sandbox)
    await sandbox.start()
    engine = await open_engine(config)
    if profile is not None:
        plans = make_plans([p.id for p in problems], config.solve.reps, profile, seed=config.sampling.seed)
        engine = TracedEngine(engine, plans, profile.kind)
    try:
        # Warm-up: the first requests pay one-off costs that neither contender should carry.
        await pipeline(replace(config, solve=replace(config.solve, reps=2, workers=2)), problems[:1], engine, sandbox)
        b = await pipeline(config, problems, engine, sandbox)
        b1 = await pipeline(config, problems, engine, sandbox, together=False)
        c = await rounds(config, problems, engine, sandbox)
        return [b, b1, c]
    finally:
        await engine.close()
        await sandbox.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("trace", "model"), default="trace")
    parser.add_argument("--problems", type=int, default=2)
    parser.add_argument("--reps", type=int, default=16)
    parser.add_argument("--workers", type=int, default=None, help="default: --reps")
    parser.add_argument("--max-tokens", type=int, default=96, help="per request")
    parser.add_argument("--total-tokens", type=int, default=None, help="per repetition (default: turns x 96)")
    parser.add_argument("--turns", type=int, default=None, help="at most (default: trace 4, model 2)")
    parser.add_argument("--code-median", type=float, default=0.5, help="trace: median program seconds")
    parser.add_argument("--code-sigma", type=float, default=1.0, help="trace: log-normal spread of program time")
    parser.add_argument("--code-kind", choices=("sleep", "spin"), default="sleep",
                        help="trace: programs wait (code on other cores, as beside a GPU) or compute here")
    parser.add_argument("--sandbox-workers", type=int, default=3,
                        help="trace: snippets at once; 3 = the pool a 4-core Kaggle GPU machine gets (cores - 1)")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--quick", action="store_true", help="1 problem x 8 repetitions, 48 tokens per turn")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every contender, e.g. --set engine.args.stream_interval=8")
    args = parser.parse_args(argv)
    if args.quick:
        args.problems, args.reps, args.max_tokens = 1, 8, 48
    turns = args.turns or (4 if args.workload == "trace" else 2)
    total = args.total_tokens or turns * args.max_tokens
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    overrides = {"solve.reps": args.reps, "solve.workers": args.workers or args.reps,
                 "sampling.max_tokens": args.max_tokens, "sampling.max_total_tokens": total,
                 "sampling.max_turns": turns}
    if args.workload == "trace":  # each program runs alone: accumulated programs would repeat earlier waits
        overrides.update({"sandbox.code_mode": "newest", "stop.stoppers": [], "stop.first_answer": False})
        if args.code_kind == "sleep":  # waiting programs use no core: size the pool as beside a GPU
            overrides["sandbox.workers"] = args.sandbox_workers
    config = load_config(args.preset, overrides={**parse_overrides(args.overrides), **overrides})
    profile = None
    if args.workload == "trace":
        profile = Profile(max_turns=turns, max_tokens=args.max_tokens, total_tokens=total,
                          code_median_s=args.code_median, code_sigma=args.code_sigma, kind=args.code_kind)
        print(f"workload: trace, up to {turns} turns of at most {args.max_tokens} tokens ({total} per repetition), "
              f"programs {args.code_kind} a median {args.code_median} s (sigma {args.code_sigma}, "
              f"killed at {config.sandbox.timeout_s} s, {config.sandbox.workers or 'auto'} at once)")
    else:
        print(f"workload: model, up to {turns} turns of at most {args.max_tokens} tokens ({total} per repetition)")
    problems = [replace(p, text=p.text + CODE_HINT) for p in load_problems("demo", limit=args.problems)]
    from solver.tiny_model import resolve_model

    model = resolve_model(config.engine.model)
    b, b1, c = asyncio.run(in_process(config, problems, profile))
    a = raw(config, problems, model, b.lengths or {})
    print(f"{'contender':<16}{'seqs':>6}{'tokens':>8}{'seconds':>9}{'tok/s':>8}{'execs':>7}{'cpu ms/rep':>11}"
          f"{'engine idle':>12}{'held':>6}{'cached':>8}")
    for m in (a, b, b1, c):
        cpu = f"{m.cpu_ms_per_rep:.1f}" if m.cpu_ms_per_rep is not None else "-"
        idle = f"{100 * m.idle_share:.1f} %" if m.idle_share is not None else "-"
        held = f"{m.mean_held:.1f}" if m.mean_held is not None else "-"
        cached = f"{100 * m.cached_share:.0f} %" if m.cached_share is not None else "-"
        print(f"{m.name:<16}{m.sequences:>6}{m.tokens:>8}{m.seconds:>9.2f}{m.tps:>8.1f}{m.executions:>7}{cpu:>11}"
              f"{idle:>12}{held:>6}{cached:>8}")
    print(f"ratio (b)/(a) = {b.tps / a.tps:.3f}   (target >= 0.95)")
    print(f"ratio (b)/(c) = {b.tps / c.tps:.3f}   (target >= 1.5)")
    print(f"ratio (b1)/(c) = {b1.tps / c.tps:.3f}  (one problem at a time, as on Kaggle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

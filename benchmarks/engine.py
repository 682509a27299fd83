"""Does the pipeline keep the engine saturated? Three ways to generate the same repetitions, in one run:

  (a) raw      vLLM's offline ``LLM.generate`` over the same sequences and token volume (each sequence made to
               generate as many tokens as its repetition did in (b)), with no turns and no code;
  (b) pipeline ``ProblemSolver``: W repetitions in flight per problem, code runs while others generate,
               the problems solved together (b) or one after another as on Kaggle (b1);
  (c) rounds   synchronous rounds: generate every repetition's turn, then run all code, then continue all.

Prints generated tokens/s for each, the ratios (b)/(a) and (b)/(c), the main process's CPU milliseconds per
repetition (orchestration plus vLLM's own front end, which lives in this process), and the share of the
pipeline's wall time during which the engine had no request running. Ratios, not absolute speeds, are the
result: the machine is shared and noisy, which is why all three run side by side here.

    python benchmarks/engine.py            # default: 2 problems x 16 repetitions, 2 turns
    python benchmarks/engine.py --quick    # a smaller run for CI
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
from solver.prompts import CODE_STOP, STOP_STRINGS, PromptBuilder, Template, open_python_block
from solver.repetition import repetition_seed
from solver.types import GenerationRequest, Problem

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
    lengths: dict[tuple[str, int], int] | None = None  # generated tokens per (problem, repetition)

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


class IdleSampler:
    """Samples ``engine.running_requests()`` every ``period_s`` seconds; idle share = samples with none running."""

    def __init__(self, engine, period_s: float = 0.01) -> None:
        self.engine, self.period_s = engine, period_s
        self.samples = self.idle = 0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            self.samples += 1
            self.idle += self.engine.running_requests() == 0
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


async def pipeline(config: Config, problems: list[Problem], engine, sandbox, *, together: bool = True) -> Measure:
    """The solver's own loop; ``together`` solves the problems at once (``solve.parallel_problems``), else one
    after another as the Kaggle gateway serves them."""
    from solver.solve import ProblemSolver

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
                   lengths={(r.problem_id, r.index): r.generated_tokens for r in reps})


async def rounds(config: Config, problems: list[Problem], engine, sandbox) -> Measure:
    """The synchronous-rounds baseline over every repetition of every problem at once: each round waits for
    the slowest generation, then all code runs while the engine idles, then every repetition continues."""
    s = config.sampling
    prompt = PromptBuilder(Template.load(config.prompt.template), engine.tokenizer, config.prompt.output_chars)
    live = []
    for problem in problems:
        text, ids = prompt.first(problem)
        live += [{"problem": problem, "index": i, "text": text, "ids": ids, "used": 0} for i in range(config.solve.reps)]
    tokens = executions = 0
    sequences = len(live)

    async def one(state: dict, turn: int) -> tuple[str, list[int], str | None]:
        problem = state["problem"]
        req = GenerationRequest(
            f"rounds-{problem.id}-{state['index']}-{turn}", state["text"], tuple(state["ids"]),
            max_tokens=min(s.max_tokens, s.max_total_tokens - state["used"]), temperature=s.temperature,
            top_p=s.top_p, seed=repetition_seed(s.seed, problem.id, state["index"]) + turn, stop=STOP_STRINGS)
        parts, ids, reason = [], [], None
        async with contextlib.aclosing(engine.stream(req)) as deltas:
            async for d in deltas:
                parts.append(d.text)
                ids.extend(d.token_ids)
                if d.finish_reason:
                    reason = d.stop_reason if d.finish_reason == "stop" else None
        return "".join(parts), ids, reason

    t0 = time.perf_counter()
    with IdleSampler(engine) as sampler:
        for turn in range(s.max_turns):
            outs = await asyncio.gather(*(one(st, turn) for st in live))  # generate all ...
            codes = []
            for st, (text, ids, reason) in zip(live, outs):
                st["used"] += len(ids)
                tokens += len(ids)
                codes.append(open_python_block(text) if reason == CODE_STOP else None)
                st["gen"] = (text, ids)
            runs = iter(await asyncio.gather(*(sandbox.run(c) for c in codes if c)))  # ... execute all ...
            nxt = []
            for st, code in zip(live, codes):
                if code is None:
                    continue
                executions += 1
                execution = next(runs)
                if st["used"] >= s.max_total_tokens:
                    continue
                appended = CODE_STOP + prompt.tool_output(execution)
                text, ids = st["gen"]
                st["text"] += text + appended
                st["ids"] = st["ids"] + ids + prompt.encode(appended)
                nxt.append(st)
            live = nxt  # ... then continue all
            if not live:
                break
    return Measure("(c) rounds", time.perf_counter() - t0, tokens, sequences, executions,
                   idle_share=sampler.share)


def raw(config: Config, problems: list[Problem], model: str, lengths: dict[tuple[str, int], int]) -> Measure:
    """Offline ``LLM.generate`` over the same first prompts and seeds, one request per repetition, each made to
    generate exactly as many tokens as that repetition generated in the pipeline (same sequences, same token
    volume: what the engine alone needs for the work the pipeline did)."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=model, **{"seed": config.sampling.seed, **config.engine.args})
    try:
        tokenizer = llm.get_tokenizer()
        prompt = PromptBuilder(Template.load(config.prompt.template), tokenizer, config.prompt.output_chars)
        prompts, params = [], []
        s = config.sampling
        for problem in problems:
            _, ids = prompt.first(problem)
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


async def in_process(config: Config, problems: list[Problem]) -> list[Measure]:
    from solver.engines import open_engine
    from solver.sandbox import create_sandbox

    sandbox = create_sandbox(config.sandbox)
    await sandbox.start()
    engine = await open_engine(config)
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
    parser.add_argument("--problems", type=int, default=2)
    parser.add_argument("--reps", type=int, default=16)
    parser.add_argument("--workers", type=int, default=None, help="default: --reps")
    parser.add_argument("--max-tokens", type=int, default=96, help="per request")
    parser.add_argument("--total-tokens", type=int, default=192, help="per repetition")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--quick", action="store_true", help="1 problem x 8 repetitions, 48 tokens")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every contender, e.g. --set engine.args.stream_interval=8")
    args = parser.parse_args(argv)
    if args.quick:
        args.problems, args.reps, args.max_tokens, args.total_tokens = 1, 8, 48, 96
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    config = load_config(args.preset, overrides={
        **parse_overrides(args.overrides),
        "solve.reps": args.reps, "solve.workers": args.workers or args.reps, "sampling.max_tokens": args.max_tokens,
        "sampling.max_total_tokens": args.total_tokens, "sampling.max_turns": args.turns})
    problems = [replace(p, text=p.text + CODE_HINT) for p in load_problems("demo", limit=args.problems)]
    from solver.tiny_model import resolve_model

    model = resolve_model(config.engine.model)
    b, b1, c = asyncio.run(in_process(config, problems))
    a = raw(config, problems, model, b.lengths or {})
    print(f"{'contender':<14}{'seqs':>6}{'tokens':>8}{'seconds':>9}{'tok/s':>8}{'execs':>7}{'cpu ms/rep':>11}"
          f"{'engine idle':>12}")
    for m in (a, b, b1, c):
        cpu = f"{m.cpu_ms_per_rep:.1f}" if m.cpu_ms_per_rep is not None else "-"
        idle = f"{100 * m.idle_share:.1f} %" if m.idle_share is not None else "-"
        print(f"{m.name:<14}{m.sequences:>6}{m.tokens:>8}{m.seconds:>9.2f}{m.tps:>8.1f}{m.executions:>7}{cpu:>11}"
              f"{idle:>12}")
    print(f"ratio (b)/(a) = {b.tps / a.tps:.3f}   (target >= 0.95)")
    print(f"ratio (b)/(c) = {b.tps / c.tps:.3f}   (target >= 1.5)")
    print(f"ratio (b1)/(c) = {b1.tps / c.tps:.3f}  (one problem at a time, as on Kaggle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

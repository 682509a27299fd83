"""Memory pressure: more sequences than the KV cache holds, and nothing lost.

Starts the preset's engine (``solver.engines.vllm_async``), sends ``--requests`` streams of ``--prompt-tokens``
fixed token ids, each generating exactly ``--max-tokens`` tokens (``ignore_eos``), all at once, while
``solver.engines.vllm_metrics.UsageSampler`` polls vLLM's KV cache usage and preemption counter. The cache is made
too small cheaply with an engine argument (``num_gpu_blocks_override``: blocks of ``block_size`` tokens), so the
engine must preempt and recompute. Prints the utilisation report and checks that every request finished with
all its tokens and that the engine holds no request afterwards (with ``--expect-preemption``, also that the
engine did preempt); exit 1 otherwise.

    python benchmarks/pressure.py --preset tiny --requests 16 --max-tokens 256 \\
        --set engine.args.num_gpu_blocks_override=65 --expect-preemption  # 16 x 320 tokens into 64 x 32
    python benchmarks/pressure.py --preset h100-gptoss --model $GPU_MODELS/dummy-gptoss-120b \\
        --set engine.args.load_format=dummy --set engine.args.max_model_len=16384 \\
        --set engine.args.num_gpu_blocks_override=1536 --requests 8 --prompt-tokens 2000 --max-tokens 6000 \\
        --expect-preemption
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass

from solver.config import parse_overrides
from solver.config import Config, ConfigError, load_config
from solver.types import GenerationRequest


@dataclass(frozen=True)
class PressureOutcome:
    request: int
    tokens: int
    finish_reason: str | None
    error: str | None


async def one(engine, i: int, prompt_tokens: int, max_tokens: int) -> PressureOutcome:
    # Distinct prompts (first id differs) so the prefix cache cannot share their blocks.
    ids = (1000 + i,) + tuple(100 + (k % 500) for k in range(prompt_tokens - 1))
    request = GenerationRequest(request_id=f"pressure-{i}", prompt="", prompt_token_ids=ids, max_tokens=max_tokens,
                                temperature=1.0, top_p=1.0, seed=i, stop=(), extra={"ignore_eos": True})
    tokens, finish, error = 0, None, None
    async for delta in engine.stream(request):
        tokens += len(delta.token_ids)
        if delta.finish_reason is not None:
            finish, error = delta.finish_reason, delta.error
    return PressureOutcome(i, tokens, finish, error)


def pressure_config(args: argparse.Namespace) -> Config:
    """The preset with ``--set`` and ``--model``; ConfigError (one line) on a bad one."""
    overrides = parse_overrides(args.set)
    if args.model:
        overrides["engine.model"] = args.model
    return load_config(args.preset, overrides=overrides)


def dry_run(args: argparse.Namespace) -> int:
    """``--dry-run``: the config and the model checked, the pressure planned; no engine."""
    from solver.dryrun import DryRun

    config = pressure_config(args)
    dry = DryRun("pressure.py")
    dry.engine(config, ConfigError)
    blocks = config.engine.args.get("num_gpu_blocks_override")
    dry.add(f"{args.requests} requests x ({args.prompt_tokens} prompt + {args.max_tokens} generated) = "
            f"{args.requests * (args.prompt_tokens + args.max_tokens)} tokens of KV cache wanted at once, into "
            + (f"{blocks} blocks" if blocks else "the engine's own cache"))
    return dry.print()


async def run(args: argparse.Namespace) -> int:
    from solver.engines.vllm_async import open_vllm_engine
    from solver.engines.vllm_metrics import UsageSampler

    config = pressure_config(args)
    started = time.perf_counter()
    engine = await open_vllm_engine(config)
    try:
        ready = time.perf_counter()
        async with UsageSampler(interval_s=args.interval) as sampler:
            outcomes = await asyncio.gather(*(one(engine, i, args.prompt_tokens, args.max_tokens)
                                              for i in range(args.requests)))
        done = time.perf_counter()
        left = engine.running_requests()
    finally:
        await engine.close()
    usage = sampler.usage
    lost = [o for o in outcomes if o.finish_reason != "length" or o.tokens != args.max_tokens]
    wanted = args.requests * (args.prompt_tokens + args.max_tokens)
    print(f"engine ready in {ready - started:.1f} s; {args.requests} requests x ({args.prompt_tokens} prompt + "
          f"{args.max_tokens} generated) = {wanted} tokens of KV cache wanted at once; run {done - ready:.1f} s")
    print(f"utilisation: {usage.line()}")
    print(f"finished: {args.requests - len(lost)}/{args.requests} with all {args.max_tokens} tokens; "
          f"requests left in the engine: {left}")
    for o in lost:
        print(f"  LOST request {o.request}: {o.tokens} tokens, finish {o.finish_reason}, {o.error}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"usage": asdict(usage), "requests": args.requests, "lost": len(lost), "left": left,
                       "wanted_tokens": wanted, "run_s": done - ready}, f, indent=1)
    if args.expect_preemption and usage.preemptions == 0:
        print("no preemption: the KV cache held every request (lower num_gpu_blocks_override or add requests)")
        return 1
    return 0 if not lost and left == 0 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--model", default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--interval", type=float, default=0.1, help="seconds between metric polls")
    p.add_argument("--json", default=None, help="write the report here too")
    p.add_argument("--expect-preemption", action="store_true", help="exit 1 if the engine preempted nothing")
    p.add_argument("--dry-run", action="store_true", help="parse, plan and check (solver/dryrun/plan.py); "
                   "start nothing")
    args = p.parse_args(argv)
    if min(args.requests, args.prompt_tokens, args.max_tokens) < 1 or args.interval <= 0:
        print("error: --requests, --prompt-tokens, --max-tokens and --interval must be positive", file=sys.stderr)
        return 2
    try:
        if args.dry_run:
            return dry_run(args)
        return asyncio.run(run(args))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

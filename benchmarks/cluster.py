"""Does the Ray path cost throughput? The same problems, seeds and settings solved (a) in process (``solve_run``
on one engine) and (b) by one engine actor on a local Ray, the driver writing the log. Both start their engine
first and warm it up; only the solve is timed. Prints generated tokens/s of each and the ratio (b)/(a); the
tokens each generated are printed too (same seeds: the same work, when the counts agree).

    python benchmarks/cluster.py                   # 2 problems x 16 repetitions, the tiny preset (CPU)
    python benchmarks/cluster.py --quick           # 1 problem x 8 repetitions, 48 tokens per turn
    python benchmarks/cluster.py --preset h100 --model /models/m --problems 4 --reps 32 --max-tokens 1024

Ratios, not absolute speeds, are the result: the contenders run one after the other on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from solver.core.budget import without_budget
from solver.config import parse_overrides
from solver.config import Config, load_config
from solver.datasets import load_problems
from solver.types import Problem, ProblemResult


@dataclass
class ClusterMeasure:
    name: str
    seconds: float
    tokens: int
    repetitions: int

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def measure(name: str, seconds: float, results: list[ProblemResult]) -> ClusterMeasure:
    return ClusterMeasure(name, seconds, sum(r.generated_tokens for r in results), sum(r.repetitions for r in results))


async def in_process(config: Config, problems: list[Problem], warm: Config, out: Path) -> ClusterMeasure:
    from solver.engines import open_engine
    from solver.loop.run import solve_run
    from solver.sandbox.pool import create_sandbox

    sandbox = create_sandbox(config.sandbox)
    await sandbox.start()
    engine = await open_engine(config)
    try:
        await solve_run(warm, problems[:1], out / "a-warm", engine=engine, sandbox=sandbox)
        started = time.perf_counter()
        results = await solve_run(config, problems, out / "a", engine=engine, sandbox=sandbox)
        return measure("(a) in process", time.perf_counter() - started, results)
    finally:
        await engine.close()
        await sandbox.close()


async def on_ray(config: Config, problems: list[Problem], warm: Config, out: Path) -> ClusterMeasure:
    from solver.cluster.connect import RayConnection
    from solver.cluster.driver import Cluster
    from solver.cluster.spec import ClusterSpec

    with RayConnection(ClusterSpec("local", 1)) as connection:
        cluster = Cluster(connection)
        try:
            await cluster.start(config)
            await cluster.run(warm, problems[:1], out / "b-warm")
            started = time.perf_counter()
            outcome = await cluster.run(config, problems, out / "b")
            return measure("(b) Ray actor", time.perf_counter() - started, outcome.results)
        finally:
            await cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=2)
    parser.add_argument("--reps", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=96, help="per request")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--model", default=None)
    parser.add_argument("--quick", action="store_true", help="1 problem x 8 repetitions, 48 tokens per turn")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check (solver/dryrun/plan.py); start nothing")
    args = parser.parse_args(argv)
    if args.quick:
        args.problems, args.reps, args.max_tokens = 1, 8, 48
    overrides = {"solve.reps": args.reps, "solve.workers": args.reps, "sampling.max_tokens": args.max_tokens,
                 "solve.parallel_problems": args.problems, "stop.stoppers": [], "stop.first_answer": False,
                 **({"engine.model": args.model} if args.model else {})}
    # No time budget for either contender (a cluster run has none; the Kaggle presets set one).
    try:
        config = without_budget(load_config(args.preset, overrides={**parse_overrides(args.overrides), **overrides}))
    except ValueError as exc:  # ConfigError included: one line, exit 2, before any engine starts
        parser.error(str(exc).splitlines()[0])
    # Both contenders warm up on one problem with few repetitions: first requests pay one-off costs.
    warm = config.replace({"solve.reps": 2, "solve.workers": 2, "solve.parallel_problems": 1})
    problems = load_problems("demo", limit=args.problems)
    print(f"workload: {args.problems} problems x {args.reps} repetitions together, {args.max_tokens} tokens per "
          f"turn, preset {args.preset}")
    if args.dry_run:
        from solver.dryrun import engine_dry_run

        plan = (f"{len(problems)} problems in process, then on one engine actor on a local Ray; engine args "
                f"{json.dumps(config.engine.args, sort_keys=True)}")
        return engine_dry_run("cluster.py", config, plan, parser.error)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        a = asyncio.run(in_process(config, problems, warm, Path(tmp)))
        b = asyncio.run(on_ray(config, problems, warm, Path(tmp)))
    print(f"{'contender':<16}{'reps':>6}{'tokens':>8}{'seconds':>9}{'tok/s':>8}")
    for m in (a, b):
        print(f"{m.name:<16}{m.repetitions:>6}{m.tokens:>8}{m.seconds:>9.2f}{m.tps:>8.1f}")
    print(f"ratio (b)/(a) = {b.tps / a.tps:.3f}   (target >= 0.97)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What does going through vLLM's OpenAI server cost, next to the in-process engine? Same model, same requests.

Runs ONE engine at a time: first the in-process engine (``solver.engines.vllm_async``), then one OpenAI server
started with ``solver.engines.launch.launch_servers`` and driven by ``solver.engines.openai``. For each it measures

  latency     sequential 1-token requests: the fixed cost of one request (ms), server minus in-process = overhead
  streams     N identical requests (same prompts, seeds, token limit) all in flight: generated tokens/s
  pipeline    one problem's repetitions through ``ProblemSolver`` (code runs included): tokens/s

and prints the server/in-process ratios. Numbers, not assertions: the machine may be shared, so compare the ratios
of one run rather than absolute speeds across runs.

    python benchmarks/server_vs_inprocess.py                 # 16 streams x 64 tokens, 8 repetitions
    python benchmarks/server_vs_inprocess.py --quick         # a smaller run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from solver.config import Config, load_config
from solver.datasets import load_problems
from solver.engines.openai import free_ports
from solver.types import Engine, GenerationRequest, Problem


@dataclass
class PathMeasure:
    latency_ms: float  # median wall time of a 1-token request, alone
    first_token_ms: float  # median time to the first delta with all N streams in flight
    stream_tokens: int
    stream_s: float
    pipeline_tokens: int
    pipeline_s: float
    pipeline_reps: int

    @property
    def stream_tps(self) -> float:
        return self.stream_tokens / self.stream_s if self.stream_s else 0.0

    @property
    def pipeline_tps(self) -> float:
        return self.pipeline_tokens / self.pipeline_s if self.pipeline_s else 0.0


def build_requests(config: Config, problems: Sequence[Problem], n: int, max_tokens: int) -> list[GenerationRequest]:
    """The same chat prompts (as token ids) and seeds for both engines."""
    from solver.dialects import make_dialect
    from solver.models import resolve_model
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(config.engine.model))
    dialect = make_dialect(config, tokenizer)
    out = []
    for i in range(n):
        prompt = dialect.start(problems[i % len(problems)]).prompt()
        out.append(GenerationRequest(f"bench-{i}", prompt.text, prompt.token_ids or (), max_tokens=max_tokens,
                                     temperature=config.sampling.temperature, top_p=1.0, seed=1000 + i,
                                     stop=dialect.stops.strings, stop_token_ids=dialect.stops.token_ids))
    return out


async def run_one(engine: Engine, request: GenerationRequest) -> tuple[int, float | None]:
    """Generated tokens and the time to the first delta (seconds)."""
    t0, first, tokens = time.perf_counter(), None, 0
    async for delta in engine.stream(request):
        if first is None:
            first = time.perf_counter() - t0
        tokens += len(delta.token_ids) or delta.token_count
        if delta.finish_reason == "error":
            raise RuntimeError(f"request {request.request_id} failed: {delta.error}")
    return tokens, first


async def measure(config: Config, requests: list[GenerationRequest], problem: Problem,
                  latency_runs: int) -> PathMeasure:
    """Open the engine the config names (sandbox first, as in a run), then time the three phases on it."""
    from dataclasses import replace

    from solver.loop.problem import SolverSession

    async with SolverSession(config) as session:
        engine = session.engine
        assert engine is not None
        await run_one(engine, replace(requests[0], max_tokens=4))  # warm-up: first-request costs stay out
        latencies = []
        for i in range(latency_runs):
            t0 = time.perf_counter()
            await run_one(engine, replace(requests[i % len(requests)], max_tokens=1, request_id=f"lat-{i}"))
            latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        results = await asyncio.gather(*(run_one(engine, r) for r in requests))
        stream_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        result = await session.solver.solve(problem)
        pipeline_s = time.perf_counter() - t0
    return PathMeasure(latency_ms=1000 * statistics.median(latencies),
                       first_token_ms=1000 * statistics.median(f for _, f in results if f is not None),
                       stream_tokens=sum(t for t, _ in results), stream_s=stream_s,
                       pipeline_tokens=result.generated_tokens, pipeline_s=pipeline_s, pipeline_reps=result.launched)


def through_server(config: Config, requests: list[GenerationRequest], problem: Problem, runs: int,
                   port: int, extra_args: Sequence[str] = ()) -> PathMeasure:
    from solver.engines.launch import launch_servers

    with launch_servers(config, 1, port, extra_args=extra_args) as urls:
        remote = config.replace({"engine.name": "openai", "engine.endpoints": urls})
        return asyncio.run(measure(remote, requests, problem, runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=16, help="requests in flight together")
    parser.add_argument("--max-tokens", type=int, default=64, help="token limit of each stream")
    parser.add_argument("--reps", type=int, default=8, help="repetitions of the pipeline problem")
    parser.add_argument("--latency-runs", type=int, default=8)
    parser.add_argument("--server-arg", action="append", default=[], metavar="FLAG",
                        help="extra vLLM server flag, e.g. --server-arg=--stream-interval --server-arg=8")
    parser.add_argument("--skip-in-process", action="store_true", help="only the server (no ratios)")
    parser.add_argument("--quick", action="store_true", help="8 streams x 32 tokens, 4 repetitions")
    args = parser.parse_args()
    if args.quick:
        args.streams, args.max_tokens, args.reps, args.latency_runs = 8, 32, 4, 4
    config = load_config("tiny", overrides={"solve.reps": args.reps, "solve.workers": args.reps,
                                            "engine.args": {"max_num_seqs": max(16, args.streams)}})
    for key, value in config.engine.env.items():
        os.environ.setdefault(key, value)
    problems = load_problems("demo")
    requests = build_requests(config, problems, args.streams, args.max_tokens)
    print(f"cores {len(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f}; "
          f"{args.streams} streams x {args.max_tokens} tokens, {args.reps} repetitions of {problems[0].id}")

    t0 = time.perf_counter()
    local = None
    if not args.skip_in_process:
        local = asyncio.run(measure(config, requests, problems[0], args.latency_runs))
        print(f"in-process done in {time.perf_counter() - t0:.0f} s")
    t0 = time.perf_counter()
    remote = through_server(config, requests, problems[0], args.latency_runs, free_ports(1), args.server_arg)
    print(f"server done in {time.perf_counter() - t0:.0f} s (includes server start)")

    if local is None:
        local = PathMeasure(float("nan"), float("nan"), 0, 0.0, 0, 0.0, 0)
    rows = [
        ("1-token request, ms (median)", local.latency_ms, remote.latency_ms),
        (f"first delta with {args.streams} in flight, ms", local.first_token_ms, remote.first_token_ms),
        ("streams: generated tokens", local.stream_tokens, remote.stream_tokens),
        ("streams: tokens/s", local.stream_tps, remote.stream_tps),
        ("pipeline: repetitions launched", local.pipeline_reps, remote.pipeline_reps),
        ("pipeline: generated tokens", local.pipeline_tokens, remote.pipeline_tokens),
        ("pipeline: tokens/s", local.pipeline_tps, remote.pipeline_tps),
    ]
    print(f"\n{'':40} {'in-process':>12} {'server':>12} {'server/in':>10}")
    for name, a, b in rows:
        ratio = b / a if a else float("nan")
        print(f"{name:40} {a:12.1f} {b:12.1f} {ratio:10.2f}")
    print(f"\nper-request overhead of the server path: {remote.latency_ms - local.latency_ms:+.1f} ms")


if __name__ == "__main__":
    main()

"""Sandbox benchmark: the warm pool against a fresh interpreter per snippet.

    python benchmarks/sandbox.py [--quick] [--runs N] [--workers W]

Measures, for one typical sympy snippet: sequential latency (median, p95) through the pool, throughput with
W snippets in flight, and the same two numbers for the baseline peers use (``python -c`` with the same
imports, one process per snippet). Prints the numbers and their ratios; asserts nothing (timings depend on the
machine and its load).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.config import SandboxConfig  # noqa: E402 - after the path set-up above
from solver.sandbox.pool import ProcessPoolSandbox, default_workers  # noqa: E402

SNIPPET = """\
x = sp.symbols('x')
expr = sp.expand((x + 1)**6)
print(expr.coeff(x, 3), sp.factorint(2024), sum(k * k for k in range(100)) % 1000)
"""
EXPECTED = "20 {2: 3, 11: 1, 23: 1} 350\n"


@dataclass(frozen=True)
class Numbers:
    median_ms: float
    p95_ms: float
    per_s: float
    cpu_ms: float = float("nan")  # CPU time per snippet, this process and every process it started


def tree_cpu_s(pids: set[int]) -> float:
    """CPU seconds spent so far by these processes and the children they reaped."""
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def cpu_s() -> float:
    """CPU seconds of this process plus its reaped descendants (a pool's snippets count once it is closed)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def percentile(values: list[float], q: float) -> float:
    """
    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5)
    2.5
    """
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if len(values) > 1 \
        else values[0]


async def pool_numbers(runs: int, workers: int, config: SandboxConfig) -> tuple[Numbers, Numbers]:
    pool = ProcessPoolSandbox(config)
    try:
        await pool.start()
        latencies = []
        began = time.perf_counter()
        for _ in range(runs):
            result = await pool.run(SNIPPET)
            if result.stdout != EXPECTED:
                raise SystemExit(f"unexpected output from the pool: {result.status} {result.stdout!r}")
            latencies.append(result.duration_s)
        sequential = Numbers(1e3 * statistics.median(latencies), 1e3 * percentile(latencies, 0.95),
                             runs / (time.perf_counter() - began))
    finally:
        await pool.close()
    pool = ProcessPoolSandbox(SandboxConfig(**{**config.__dict__, "workers": workers}))
    try:
        await pool.start()
        cpu_before = cpu_s() + tree_cpu_s(pool.pids())  # the start-up (imports, warm-up) is not per snippet
        began = time.perf_counter()
        results = await asyncio.gather(*(pool.run(SNIPPET) for _ in range(runs)))
        elapsed = time.perf_counter() - began
        assert all(r.stdout == EXPECTED for r in results)
        durations = [r.duration_s for r in results]
    finally:
        await pool.close()  # reaps the template, so its snippets' CPU time reaches RUSAGE_CHILDREN
    cpu_ms = 1e3 * (cpu_s() - cpu_before) / runs
    concurrent = Numbers(1e3 * statistics.median(durations), 1e3 * percentile(durations, 0.95), runs / elapsed,
                         cpu_ms)
    return sequential, concurrent


def baseline_once(preamble: str) -> float:
    began = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", preamble + SNIPPET], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL).stdout
    if out != EXPECTED:
        raise SystemExit(f"unexpected output from the baseline: {out!r}")
    return time.perf_counter() - began


async def baseline_numbers(runs: int, workers: int, preamble: str) -> tuple[Numbers, Numbers]:
    began = time.perf_counter()
    latencies = [baseline_once(preamble) for _ in range(runs)]
    sequential = Numbers(1e3 * statistics.median(latencies), 1e3 * percentile(latencies, 0.95),
                         runs / (time.perf_counter() - began))
    slots = asyncio.Semaphore(workers)
    cpu_before = cpu_s()

    async def one() -> float:
        async with slots:
            return await asyncio.to_thread(baseline_once, preamble)

    began = time.perf_counter()
    durations = await asyncio.gather(*(one() for _ in range(runs)))
    elapsed = time.perf_counter() - began
    concurrent = Numbers(1e3 * statistics.median(durations), 1e3 * percentile(durations, 0.95), runs / elapsed,
                         1e3 * (cpu_s() - cpu_before) / runs)
    return sequential, concurrent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--runs", type=int, default=None, help="snippets per measurement (pool)")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                        help="snippets in flight for the throughput numbers (default: all cores)")
    args = parser.parse_args()
    if args.workers < 1 or (args.runs is not None and args.runs < 2):
        parser.error("--workers must be >= 1 and --runs >= 2")
    runs = args.runs or (40 if args.quick else 400)
    base_runs = 2 if args.quick else max(10, runs // 10)  # the baseline costs ~0.5-1 s per snippet
    config = SandboxConfig(workers=1, timeout_s=10.0)
    pool_seq, pool_par = asyncio.run(pool_numbers(runs, args.workers, config))
    base_seq, base_par = asyncio.run(baseline_numbers(base_runs, args.workers, config.preamble))
    print(f"cores: {len(os.sched_getaffinity(0))}  default workers: {default_workers()}  "
          f"pool runs: {runs}  baseline runs: {base_runs}")
    print(f"load average: {os.getloadavg()[0]:.1f} (other work on the machine slows every number)")
    print(f"{'':28}{'median ms':>10}{'p95 ms':>10}{'per s':>10}{'CPU ms':>10}")
    for label, numbers in (("pool, one at a time", pool_seq), (f"pool, {args.workers} in flight", pool_par),
                           ("python -c, one at a time", base_seq), (f"python -c, {args.workers} in flight", base_par)):
        print(f"{label:28}{numbers.median_ms:10.1f}{numbers.p95_ms:10.1f}{numbers.per_s:10.1f}{numbers.cpu_ms:10.1f}")
    cores = len(os.sched_getaffinity(0))
    print(f"latency ratio (median, baseline / pool): {base_seq.median_ms / pool_seq.median_ms:.0f}x")
    print(f"throughput ratio ({args.workers} in flight, pool / baseline): {pool_par.per_s / base_par.per_s:.0f}x")
    print(f"CPU ratio (baseline / pool): {base_par.cpu_ms / pool_par.cpu_ms:.0f}x; "
          f"capacity of {cores} idle cores: {1e3 * cores / pool_par.cpu_ms:.0f} snippets/s")


if __name__ == "__main__":
    main()

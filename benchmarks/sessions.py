"""Session benchmark: a stateful session against "accumulate" re-execution, call by call through one repetition.

    python benchmarks/sessions.py [--quick] [--reps N] [--calls C]

A repetition makes C tool calls (default 32); call k computes something with sympy and defines a value and a
function from those of call k-1, so every call needs every earlier one. Two ways to run it through the same
warm pool:

* ``stateful``: one session per repetition (``pool.session()``); each call sends only its own block.
* ``accumulate``: each call is a fresh snippet that first re-runs every earlier block, output hidden
  (``compose_program(..., "accumulate")``), as the solver does without sessions.

Prints the median per-call latency at the 1st, 8th and 32nd call (and the whole repetition) for both, and their
ratios. Checks that both ways print the same thing at every call; asserts nothing about speed (timings depend on
the machine and its load).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.config import SandboxConfig  # noqa: E402 - after the path set-up above
from solver.loop.repetition import compose_program  # noqa: E402
from solver.sandbox.pool import ProcessPoolSandbox  # noqa: E402

MARKS = (1, 8, 32)
SETTLE_S = 0.2  # before each repetition: the pool re-forks its spare and reaps what the last one left


def block(k: int) -> str:
    """Call ``k`` (1-based): about 1 ms of arithmetic and sympy (on an idle core) on what call k-1 defined; it
    defines a value and a function for call k+1.

    >>> print(block(2))
    v2 = (v1 * 31 + sum(pow(i, 3, 1009) for i in range(2002))) % 100003
    c2 = sp.expand((x + 2)**10).coeff(x, 5)
    def f2(n):
        return f1(n) + 2 * n
    print(2, v2, c2 % 1000, f2(v2) % 1000)
    """
    if k == 1:
        return "x = sp.symbols('x')\nv1 = 7\ndef f1(n):\n    return n\nprint(1, v1, f1(v1))"
    return (f"v{k} = (v{k - 1} * 31 + sum(pow(i, 3, 1009) for i in range({2000 + k}))) % 100003\n"
            f"c{k} = sp.expand((x + {k})**10).coeff(x, 5)\n"
            f"def f{k}(n):\n    return f{k - 1}(n) + {k} * n\n"
            f"print({k}, v{k}, c{k} % 1000, f{k}(v{k}) % 1000)")


async def stateful(pool: ProcessPoolSandbox, calls: int) -> tuple[list[float], list[str]]:
    session = await pool.session()
    latencies, outputs = [], []
    try:
        for k in range(1, calls + 1):
            began = time.perf_counter()
            result = await session.run(block(k))
            latencies.append(time.perf_counter() - began)
            outputs.append(_checked(result.status, result.stdout, "stateful", k))
    finally:
        await session.close()
    return latencies, outputs


async def accumulate(pool: ProcessPoolSandbox, calls: int) -> tuple[list[float], list[str]]:
    latencies, outputs = [], []
    earlier: list[str] = []
    for k in range(1, calls + 1):
        began = time.perf_counter()
        result = await pool.run(compose_program(earlier, block(k), "accumulate"))
        latencies.append(time.perf_counter() - began)
        outputs.append(_checked(result.status, result.stdout, "accumulate", k))
        earlier.append(block(k))
    return latencies, outputs


def _checked(status: str, stdout: str, mode: str, k: int) -> str:
    if status != "ok" or not stdout.startswith(f"{k} "):
        raise SystemExit(f"{mode}: call {k} went wrong: {status} {stdout!r}")
    return stdout


async def measure(reps: int, calls: int) -> dict[str, list[list[float]]]:
    """Per mode, one list of per-call latencies (seconds) per repetition; the modes alternate repetition by
    repetition so that load from other work hits both alike, each starting from a settled pool."""
    pool = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=30.0))
    runs: dict[str, list[list[float]]] = {"stateful": [], "accumulate": []}
    try:
        await pool.start()
        await pool.run("print(1)")  # the first snippet of a pool pays for page faults the rest share
        for _ in range(reps):
            await asyncio.sleep(SETTLE_S)
            state_times, state_out = await stateful(pool, calls)
            await asyncio.sleep(SETTLE_S)
            acc_times, acc_out = await accumulate(pool, calls)
            if state_out != acc_out:
                raise SystemExit("the stateful session and accumulate printed different things")
            runs["stateful"].append(state_times)
            runs["accumulate"].append(acc_times)
    finally:
        await pool.close()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two repetitions, for CI (~10 s)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per mode (default 10)")
    parser.add_argument("--calls", type=int, default=max(MARKS), help="tool calls per repetition (>= 32)")
    args = parser.parse_args()
    if (args.reps is not None and args.reps < 1) or args.calls < max(MARKS):
        parser.error(f"--reps must be >= 1 and --calls >= {max(MARKS)}")
    reps = args.reps or (2 if args.quick else 10)
    runs = asyncio.run(measure(reps, args.calls))
    print(f"cores: {len(os.sched_getaffinity(0))}  repetitions per mode: {reps}  calls per repetition: {args.calls}")
    print(f"load average: {os.getloadavg()[0]:.1f} (other work on the machine slows every number)")
    print("outputs: identical at every call in both modes")
    marks = [*MARKS, args.calls] if args.calls != max(MARKS) else list(MARKS)
    header = "".join(f"{'call ' + str(m) + ' ms':>14}" for m in marks)
    print(f"{'median':14}{header}{'repetition ms':>16}")
    medians: dict[str, list[float]] = {}
    for mode, latencies in runs.items():
        medians[mode] = [1e3 * statistics.median(rep[m - 1] for rep in latencies) for m in marks]
        medians[mode].append(1e3 * statistics.median(sum(rep) for rep in latencies))
        print(f"{mode:14}" + "".join(f"{v:14.1f}" for v in medians[mode][:-1]) + f"{medians[mode][-1]:16.1f}")
    ratios = [a / s for a, s in zip(medians["accumulate"], medians["stateful"])]
    print("ratio (accumulate / stateful): "
          + ", ".join(f"call {m}: {r:.1f}x" for m, r in zip(marks, ratios)) + f", repetition: {ratios[-1]:.1f}x")


if __name__ == "__main__":
    main()

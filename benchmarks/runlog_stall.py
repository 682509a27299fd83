"""How long the event loop stalls while finished repetitions are logged: the run log's write + fsync called on
the loop's thread (as the solve loop did) against the same call handed to a worker thread (``record_off_loop``,
as it does now). Every engine stream waits while the loop is stalled, so the stall is time lost by all of them.

A ticker task asks to wake every millisecond and records how late each wake-up comes; both ways log the same
repetitions (realistic size: four turns of model text with code and output) into a fresh run log on the same
file system, side by side in one run.

    python benchmarks/runlog_stall.py               # 200 repetitions each way
    python benchmarks/runlog_stall.py --quick       # 30 each way
    python benchmarks/runlog_stall.py --dir /kaggle/working   # measure on another file system
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from solver.config import Config
from solver.loop.problem import record_off_loop
from solver.runlog import RunLog
from solver.types import Answer, Execution, Repetition, Turn

TICK_S = 0.001  # the ticker's period
GAP_S = 0.005  # between two finished repetitions (a busy run finishes one every few ms to seconds)


def repetition(index: int) -> Repetition:
    """About 12 KB of JSON: four turns of ~2,500 characters, three of them with code and output."""
    prose = "We count the pairs (a, b) with a + b = n and check the parity of each case carefully. " * 28
    turns = tuple(
        Turn(prose + "```python\nprint(sum(1 for a in range(100) for b in range(100) if a + b == 42))\n```",
             600 + 700 * t, 650, "stop", 4.2,
             Execution("print(42)", "ok", "43\n", "", 0.012) if t < 3 else None,
             "```output\n43\n```\n" if t < 3 else "", 0.41, 0.2, 512 * t)
        for t in range(4))
    return Repetition("p1", index, 1000 + index, "done", turns, (Answer("43", "43", "code"),
                                                                  Answer("43", "\\boxed{43}", "boxed")),
                      time.time(), 17.5)


async def measure(log: RunLog, count: int, record: Callable[[Repetition], Awaitable[None]]) -> dict[str, float]:
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            asked = time.perf_counter()
            await asyncio.sleep(TICK_S)
            lags.append(max(0.0, time.perf_counter() - asked - TICK_S))

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(GAP_S)
    started = time.perf_counter()
    spans: list[float] = []
    ticks_inside = 0  # ticker wake-ups served while a record was being written
    for i in range(count):
        rep = repetition(i)
        before, t0 = len(lags), time.perf_counter()
        await record(rep)
        spans.append(time.perf_counter() - t0)
        ticks_inside += len(lags) - before
        await asyncio.sleep(GAP_S)
    wall = time.perf_counter() - started
    done.set()
    await tick
    lags.sort()
    return {"max_ms": 1000 * lags[-1], "p99_ms": 1000 * lags[int(0.99 * (len(lags) - 1))],
            "median_ms": 1000 * statistics.median(lags), "stalled_s": sum(lags), "wall_s": wall,
            "record_ms": 1000 * statistics.mean(spans), "ticks_inside": ticks_inside / count}


async def main(count: int, where: Path) -> None:
    results: dict[str, dict[str, float]] = {}
    for name in ("on the loop", "off the loop"):
        with tempfile.TemporaryDirectory(dir=where) as tmp, RunLog.create(Path(tmp) / "run", Config()) as log:
            if name == "on the loop":
                async def record(rep: Repetition, log: RunLog = log) -> None:
                    log.append(rep)  # what the solve loop did: the write and fsync on the loop's thread
            else:
                async def record(rep: Repetition, log: RunLog = log) -> None:
                    await record_off_loop(log.append, rep)
            results[name] = await measure(log, count, record)
    print(f"{count} repetitions each way, logged under {where} (~12 KB each, {GAP_S * 1000:.0f} ms apart), "
          f"ticker every {TICK_S * 1000:.0f} ms")
    print("ticker lateness (max, p99, median, summed) and, per record, its duration and the ticks the loop served"
          " meanwhile")
    print(f"{'':14}{'max ms':>9}{'p99 ms':>9}{'median ms':>11}{'stalled s':>11}{'wall s':>9}{'record ms':>11}"
          f"{'ticks/record':>14}")
    for name, r in results.items():
        print(f"{name:14}{r['max_ms']:9.2f}{r['p99_ms']:9.2f}{r['median_ms']:11.3f}{r['stalled_s']:11.3f}"
              f"{r['wall_s']:9.2f}{r['record_ms']:11.2f}{r['ticks_inside']:14.2f}")
    on, off = results["on the loop"], results["off the loop"]
    print(f"ratio on/off: max stall {on['max_ms'] / max(off['max_ms'], 1e-6):.1f} x, "
          f"p99 {on['p99_ms'] / max(off['p99_ms'], 1e-6):.1f} x, "
          f"time stalled {on['stalled_s'] / max(off['stalled_s'], 1e-6):.1f} x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="30 repetitions each way")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="file system to log on (default: the temp directory)")
    args = parser.parse_args()
    asyncio.run(main(30 if args.quick else args.count, args.dir))

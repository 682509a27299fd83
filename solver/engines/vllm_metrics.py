"""The engine's memory pressure during a run: KV cache usage and preemptions, sampled from vLLM's in-process
metrics (``vllm_compat.metrics_snapshot``; filled while log stats are on, vLLM's default).

vLLM updates its gauges once per scheduler step it reports; a sampler polls them every ``interval_s`` seconds
and keeps the peak, so a peak shorter than the interval can be missed (the preemption counter cannot: it only
grows). Usage is a fraction of the KV cache blocks, 0..1.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from solver.engines.vllm_compat import metrics_snapshot

KV_USAGE = "vllm:kv_cache_usage_perc"  # a gauge, a fraction 0..1 despite its name
PREEMPTIONS = "vllm:num_preemptions"  # a counter over the engine's life
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"

T = TypeVar("T")
P = TypeVar("P", bound="Polling[Any]")


@dataclass(frozen=True)
class UsageReading:
    """One poll of the metrics: the gauges now and the preemption counter so far."""

    kv_usage: float
    preemptions: int
    running: int
    waiting: int


@dataclass(frozen=True)
class Usage:
    """What a run did to the engine's memory: the KV cache peak (fraction of blocks) and the preemptions it
    caused, with the most requests seen running and waiting at once."""

    kv_peak: float
    kv_last: float
    preemptions: int
    running_peak: int
    waiting_peak: int
    samples: int

    def line(self) -> str:
        """
        >>> Usage(0.981, 0.2, 7, 16, 12, 40).line()
        'KV cache peak 98.1 %, preemptions 7, running peak 16, waiting peak 12 (40 samples)'
        """
        return (f"KV cache peak {100 * self.kv_peak:.1f} %, preemptions {self.preemptions}, running peak "
                f"{self.running_peak}, waiting peak {self.waiting_peak} ({self.samples} samples)")


def reading(metrics: Iterable[Any]) -> UsageReading:
    """A reading from metric records (``name``, ``value``). With several engines in the process (one label set
    each), usage is the largest and the counts are summed.

    >>> from types import SimpleNamespace as M
    >>> reading([M(name=KV_USAGE, value=0.5), M(name=KV_USAGE, value=0.75), M(name=PREEMPTIONS, value=3),
    ...          M(name=RUNNING, value=4.0), M(name="vllm:other", value=9)])
    UsageReading(kv_usage=0.75, preemptions=3, running=4, waiting=0)
    """
    kv, preempted, running, waiting = 0.0, 0, 0, 0
    for m in metrics:
        if m.name == KV_USAGE:
            kv = max(kv, float(m.value))
        elif m.name == PREEMPTIONS:
            preempted += int(m.value)
        elif m.name == RUNNING:
            running += int(m.value)
        elif m.name == WAITING:
            waiting += int(m.value)
    return UsageReading(kv, preempted, running, waiting)


def fold(baseline: UsageReading, readings: Iterable[UsageReading]) -> Usage:
    """The usage over a run from the readings taken during it; preemptions count from ``baseline`` (the
    counter covers the engine's whole life).

    >>> base = UsageReading(0.0, 2, 0, 0)
    >>> fold(base, [UsageReading(0.4, 2, 8, 0), UsageReading(1.0, 5, 6, 10), UsageReading(0.1, 9, 1, 0)])
    Usage(kv_peak=1.0, kv_last=0.1, preemptions=7, running_peak=8, waiting_peak=10, samples=3)
    >>> fold(base, [])
    Usage(kv_peak=0.0, kv_last=0.0, preemptions=0, running_peak=0, waiting_peak=0, samples=0)
    """
    rs = list(readings)
    return Usage(
        kv_peak=max((r.kv_usage for r in rs), default=0.0),
        kv_last=rs[-1].kv_usage if rs else 0.0,
        preemptions=max(0, max((r.preemptions for r in rs), default=baseline.preemptions) - baseline.preemptions),
        running_peak=max((r.running for r in rs), default=0),
        waiting_peak=max((r.waiting for r in rs), default=0),
        samples=len(rs),
    )


def read_vllm() -> UsageReading:
    return reading(metrics_snapshot())


class Polling(Generic[T]):
    """Polls ``read`` every ``interval_s`` seconds on the event loop while a run goes on: ``samples[0]`` is the
    reading before the run (counters cover the engine's whole life), the last one the reading after its last step.
    """

    def __init__(self, read: Callable[[], Awaitable[T]], interval_s: float) -> None:
        self.read, self.interval_s = read, interval_s
        self.samples: list[T] = []
        self._task: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        while True:
            self.samples.append(await self.read())
            await asyncio.sleep(self.interval_s)

    async def __aenter__(self: P) -> P:
        self.samples = [await self.read()]
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.samples.append(await self.read())


class UsageSampler(Polling[UsageReading]):
    """The engine's memory pressure over a run::

        async with UsageSampler() as sampler:
            ... the run ...
        print(sampler.usage.line())

    ``read`` is the metrics source (vLLM's by default; a test double in control-flow tests).
    """

    def __init__(self, interval_s: float = 0.25, read: Callable[[], UsageReading] = read_vllm) -> None:
        async def poll() -> UsageReading:
            return read()

        super().__init__(poll, interval_s)

    @property
    def usage(self) -> Usage:
        return fold(self.samples[0], self.samples[1:]) if self.samples else fold(UsageReading(0.0, 0, 0, 0), [])


@contextlib.asynccontextmanager
async def engine_usage(engine_name: str, report: Callable[[str], None],
                       read: Callable[[], UsageReading] = read_vllm, interval_s: float = 0.5) -> AsyncIterator[None]:
    """Around a run: samples and reports the usage line when the engine is vLLM in this process (its metrics
    live here; a server's or a cluster's do not), does nothing otherwise. One poll costs a walk over vLLM's
    metric registry (well under a millisecond), so 0.5 s keeps it off the event loop's budget. A run that fails
    (an engine that could not be built, say) reports nothing: its error is the last word, not a line that reads
    like a result; one that is interrupted reports what it used until then."""
    if engine_name != "vllm":
        yield
        return
    sampler = UsageSampler(interval_s=interval_s, read=read)
    failed = False
    try:
        async with sampler:
            yield
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise
    except BaseException:
        failed = True
        raise
    finally:
        if sampler.usage.samples and not failed:
            report(f"engine: {sampler.usage.line()}")


# vLLM's prefix-cache counters (tokens queried, tokens found), in vLLM 0.26 to 0.33; a server's page names
# counters with a ``_total`` suffix.
PREFIX_QUERIES = "vllm:prefix_cache_queries"
PREFIX_HITS = "vllm:prefix_cache_hits"


@dataclass(frozen=True)
class StartMark:
    """An engine's start as its metrics see it: from ``begin`` to ``end`` (seconds on one clock) the engine was
    starting, its warm-up's requests included; at ``end`` its prefix-cache counters read these (tokens). A
    problem's figures count from here (``solver.measure.day.table.hit_rate``)."""

    begin: float
    end: float
    prefix_queries: float
    prefix_hits: float

    def shifted(self, t0: float) -> StartMark:
        """The same on a clock that reads 0 at ``t0`` (a ``Sampler``'s)."""
        return StartMark(self.begin - t0, self.end - t0, self.prefix_queries, self.prefix_hits)


def in_process_sample() -> tuple[UsageReading, float, float]:
    """vLLM's metrics in this process (``vllm_compat.metrics_snapshot``)."""
    metrics = metrics_snapshot()
    queries = sum(float(m.value) for m in metrics if m.name == PREFIX_QUERIES)
    hits = sum(float(m.value) for m in metrics if m.name == PREFIX_HITS)
    return reading(metrics), queries, hits

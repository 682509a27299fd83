"""What the engine did, request by request and step by step: the raw material of an engine time model.

``RequestTimeline`` keeps one ``RequestRecord`` per engine request (when it was sent, its first token, its end, the
prompt it was sent, how much of it the prefix cache held, the tokens it decoded, the requests the engine held when
it was sent); ``TimedEngine`` fills it for any engine of the ``Engine`` protocol. ``Sampler`` polls the engine's
own metrics (in process: vLLM's metrics registry; a server: its ``/metrics`` page) into a series of ``MetricsSample``s:
requests running and waiting, KV cache usage, and the preemption and prefix-cache counters.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from solver.engines.vllm_metrics import (PREFIX_HITS, PREFIX_QUERIES, Polling, UsageReading, Usage, fold,
                                         in_process_sample)
from solver.measure.wrapped import WrappedEngine
from solver.types import Delta, GenerationRequest

@dataclass(frozen=True)
class RequestRecord:
    """One engine request. Times in seconds from the contender's start; ``first_token`` None when none came."""

    problem: str
    attempt: int
    turn: int
    start: float
    first_token: float | None
    end: float
    prompt_tokens: int
    cached_tokens: int | None  # of the prompt, what the prefix cache held (None: the engine did not say)
    generated_tokens: int  # decoded by the engine
    in_flight: int  # requests the engine (or this client, for a server) held when this one was sent
    finish: str | None


@dataclass
class RequestTimeline:
    """Request records of one contender, times from ``t0``."""

    t0: float = field(default_factory=time.perf_counter)
    records: list[RequestRecord] = field(default_factory=list)

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def rows(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records]

    def cached_share(self) -> float | None:
        """Prompt tokens served by the prefix cache over all prompt tokens of requests that reported it.

        >>> t = RequestTimeline(0.0, [RequestRecord("p", 0, 0, 0, 0.1, 1, 100, 0, 5, 0, "stop"),
        ...                    RequestRecord("p", 0, 1, 2, 2.1, 3, 300, 200, 5, 1, "stop")])
        >>> round(t.cached_share(), 2)
        0.5
        """
        known = [r for r in self.records if r.cached_tokens is not None]
        prompt = sum(r.prompt_tokens for r in known)
        return sum(r.cached_tokens or 0 for r in known) / prompt if prompt else None


class TimedEngine(WrappedEngine):
    """An engine whose every request is written to a ``RequestTimeline`` (what it decoded: its deltas' token ids)."""

    def __init__(self, inner: Any, timeline: RequestTimeline) -> None:
        super().__init__(inner)
        self.timeline = timeline

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        timeline = self.timeline
        start, held = timeline.now(), self.inner.running_requests()
        first: float | None = None
        prompt, cached, tokens, finish = len(request.prompt_token_ids or ()), None, 0, None
        try:
            async with contextlib.aclosing(self.inner.stream(request)) as deltas:
                async for delta in deltas:
                    if first is None and (delta.token_ids or delta.token_count):
                        first = timeline.now()
                    tokens += len(delta.token_ids) or delta.token_count
                    cached = delta.cached_tokens if delta.cached_tokens is not None else cached
                    prompt = delta.prompt_tokens if delta.prompt_tokens is not None else prompt
                    finish = delta.finish_reason or finish
                    yield delta
        finally:
            timeline.records.append(RequestRecord(request.problem_id, request.repetition, request.turn, start, first,
                                                  timeline.now(), prompt, cached, tokens, held, finish or "abort"))


@dataclass(frozen=True)
class MetricsSample:
    """One poll of an engine's metrics, ``t`` seconds from the sampler's start."""

    t: float
    reading: UsageReading
    prefix_queries: float
    prefix_hits: float


def page_sample(page: str) -> tuple[UsageReading, float, float]:
    """The same from a server's ``/metrics`` page (Prometheus text).

    >>> page = ('vllm:kv_cache_usage_perc{e="0"} 0.25\\nvllm:num_preemptions_total{e="0"} 3.0\\n'
    ...         'vllm:num_requests_running{e="0"} 8.0\\nvllm:prefix_cache_queries_total{e="0"} 1000.0\\n'
    ...         'vllm:prefix_cache_hits_total{e="0"} 750.0')
    >>> page_sample(page)
    (UsageReading(kv_usage=0.25, preemptions=3, running=8, waiting=0), 1000.0, 750.0)
    """
    from solver.engines.openai import parse_metric

    def value(name: str) -> float:
        return parse_metric(page, name) or 0.0

    return (UsageReading(value("vllm:kv_cache_usage_perc"), int(value("vllm:num_preemptions_total")),
                    int(value("vllm:num_requests_running")), int(value("vllm:num_requests_waiting"))),
            value(PREFIX_QUERIES + "_total"), value(PREFIX_HITS + "_total"))


class ServerMetrics:
    """Reads one server's ``/metrics`` (an async reader for ``Sampler``); ``aclose`` when done."""

    def __init__(self, url: str) -> None:
        import httpx

        self.url = url
        self.client = httpx.AsyncClient(timeout=5.0)

    async def __call__(self) -> tuple[UsageReading, float, float]:
        response = await self.client.get(self.url + "/metrics")
        response.raise_for_status()
        return page_sample(response.text)

    async def aclose(self) -> None:
        await self.client.aclose()


class Sampler(Polling[MetricsSample]):
    """Polls an engine's metrics every ``interval_s`` while a contender runs (one poll walks vLLM's whole metrics
    registry: ~3 ms of the front end's thread on 2 cores, measured with cProfile; 0.25 s keeps it near 1 %)::

        async with Sampler(read) as sampler:
            ... the contender ...
        sampler.usage, sampler.prefix_hit_rate, sampler.series()
    """

    def __init__(self, read: Callable[[], Awaitable[tuple[UsageReading, float, float]]], interval_s: float = 0.25) -> None:
        async def poll() -> MetricsSample:
            reading, queries, hits = await read()
            return MetricsSample(time.perf_counter() - self.t0, reading, queries, hits)

        super().__init__(poll, interval_s)
        self.t0 = 0.0

    async def __aenter__(self) -> Sampler:
        self.t0 = time.perf_counter()
        return await super().__aenter__()

    @property
    def usage(self) -> Usage:
        return fold(self.samples[0].reading, [s.reading for s in self.samples[1:]])

    @property
    def prefix_hit_rate(self) -> float | None:
        """Prefix-cache hits over queries (tokens) during the run, from the engine's own counters.

        >>> s = Sampler(None)
        >>> s.samples = [MetricsSample(0, UsageReading(0, 0, 0, 0), 100, 50),
        ...              MetricsSample(1, UsageReading(0, 0, 0, 0), 300, 150)]
        >>> s.prefix_hit_rate
        0.5
        """
        if len(self.samples) < 2:
            return None
        queries = self.samples[-1].prefix_queries - self.samples[0].prefix_queries
        hits = self.samples[-1].prefix_hits - self.samples[0].prefix_hits
        return hits / queries if queries > 0 else None

    def series(self) -> list[list[float]]:
        """[t, running, waiting, KV usage] per sample (the engine's own gauges)."""
        return [[round(s.t, 3), s.reading.running, s.reading.waiting, round(s.reading.kv_usage, 4)]
                for s in self.samples]


async def in_process_reader() -> tuple[UsageReading, float, float]:
    return in_process_sample()

"""Load on served endpoints: streamed requests spread round-robin over OpenAI-compatible servers through the
solver's own client, one per endpoint so every request is attributed to the server that answered it, and the
statistics per endpoint (latency percentiles, time to the first token, tokens per second). ``benchmarks/load.py``
and ``benchmarks/layouts.py`` drive it and print ``report``."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

import numpy as np

from solver.config import Config, ConfigError

__all__ = ["EndpointStats", "LoadSample", "check_loopback", "free_ports", "report", "run_load"]

PROMPTS = (
    "What is the remainder when 2^100 is divided by 7?",
    "How many positive divisors does 3600 have?",
    "Find the sum of all integers n with 1 <= n <= 100 such that n^2 + 1 is divisible by 5.",
    "A triangle has sides 13, 14 and 15. What is its area?",
)

Outcome = Literal["done", "failed", "cut"]


@dataclass(frozen=True)
class LoadSample:
    """One request: how it ended, its latencies (s) and the tokens it generated."""

    endpoint: str
    outcome: Outcome
    start_s: float
    end_s: float
    first_token_s: float | None
    tokens: int
    error: str | None = None


@dataclass
class EndpointStats:
    url: str
    samples: list[LoadSample] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        return sum(s.outcome == outcome for s in self.samples)

    def latency_ms(self, q: float) -> float:
        """Percentile ``q`` of the finished requests' end-to-end latency (ms); nan when none finished.

        >>> stats = EndpointStats("u", [LoadSample("u", "done", 0.0, t, 0.0, 1) for t in (0.1, 0.2, 0.3, 0.4)])
        >>> round(stats.latency_ms(50), 1), round(stats.latency_ms(99), 1)
        (250.0, 397.0)
        """
        done = [1000 * (s.end_s - s.start_s) for s in self.samples if s.outcome == "done"]
        return float(np.percentile(done, q)) if done else float("nan")

    def first_token_ms(self) -> float:
        firsts = [1000 * (s.first_token_s - s.start_s) for s in self.samples
                  if s.outcome == "done" and s.first_token_s is not None]
        return float(np.median(firsts)) if firsts else float("nan")

    def tokens(self) -> int:
        return sum(s.tokens for s in self.samples)

    def tokens_per_s(self) -> float:
        """Tokens generated (finished, failed and cut requests alike) over the span from the first request sent
        to the last one ending (for the "all" row: over every endpoint's requests)."""
        if not self.samples:
            return 0.0
        span = max(s.end_s for s in self.samples) - min(s.start_s for s in self.samples)
        return self.tokens() / span if span > 0 else 0.0


def check_loopback(url: str) -> str:
    """The URL when its host is a loopback address (this benchmark loads local servers only), else ConfigError.

    >>> check_loopback("http://127.0.0.1:8000"), check_loopback("http://localhost:8001")
    ('http://127.0.0.1:8000', 'http://localhost:8001')
    >>> check_loopback("http://10.0.0.5:8000")
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: --endpoint http://10.0.0.5:8000 is not on loopback (this load test only loads local servers)
    """
    host = urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(f"--endpoint {url} is not on loopback (this load test only loads local servers)")
    return url


def free_ports(count: int) -> int:
    """A first port with ``count`` consecutive free loopback ports from it."""
    from solver.engines.launch import port_is_free

    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = int(sock.getsockname()[1])
        if base + count < 65536 and all(port_is_free("127.0.0.1", base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports found")


async def run_load(config: Config, urls: Sequence[str], requests: int, concurrency: int, max_tokens: int,
                   duration_s: float) -> list[EndpointStats]:
    from solver.engines.openai.engine import open_openai_engine
    from solver.types import GenerationRequest

    engines = [await open_openai_engine(config.replace({"engine.endpoints": [url]})) for url in urls]
    stats = [EndpointStats(url) for url in urls]
    try:
        tokenizer = engines[0].tokenizer
        prompts = []
        for text in PROMPTS:
            if tokenizer is None:
                prompts.append((text, None))
                continue
            prompt = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                   add_generation_prompt=True)
            prompts.append((prompt, tuple(tokenizer.encode(prompt, add_special_tokens=False))))
        slots = [asyncio.Semaphore(concurrency) for _ in urls]
        started = time.monotonic()

        async def one(i: int) -> None:
            which = i % len(urls)
            prompt, ids = prompts[i % len(prompts)]
            request = GenerationRequest(f"load-{i}", prompt, ids, max_tokens=max_tokens,
                                        temperature=config.sampling.temperature, top_p=1.0, seed=i, stop=(),
                                        extra={"ignore_eos": True})  # exactly max_tokens tokens per request
            async with slots[which]:
                start, first, tokens = time.monotonic(), None, 0
                try:
                    async for delta in engines[which].stream(request):
                        if first is None and (delta.token_ids or delta.text):
                            first = time.monotonic()
                        tokens += len(delta.token_ids) or delta.token_count
                        if delta.finish_reason is not None:
                            outcome: Outcome = "failed" if delta.finish_reason == "error" else "done"
                            stats[which].samples.append(LoadSample(urls[which], outcome, start - started,
                                                                   time.monotonic() - started,
                                                                   None if first is None else first - started,
                                                                   tokens, delta.error))
                            return
                except asyncio.CancelledError:
                    stats[which].samples.append(LoadSample(urls[which], "cut", start - started,
                                                           time.monotonic() - started,
                                                           None if first is None else first - started, tokens))
                    raise

        tasks = [asyncio.create_task(one(i)) for i in range(requests)]
        _, pending = await asyncio.wait(tasks, timeout=duration_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        # Requests that never got a slot before the end were not sent: they leave no sample.
    finally:
        for engine in engines:
            await engine.close()
    return stats


def report(stats: Sequence[EndpointStats], wall_s: float, requests: int, max_tokens: int, concurrency: int) -> str:
    head = (f"{'endpoint':<26} {'done':>5} {'failed':>6} {'cut':>4} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
            f"{'ttft p50':>9} {'tokens':>7} {'tok/s':>7}")
    lines = [f"requests: {requests} x {max_tokens} tokens, {concurrency} in flight per endpoint; "
             f"wall {wall_s:.1f} s (engines opened and tokenizer loaded included)", head]
    everything = EndpointStats("all", [s for e in stats for s in e.samples])
    for row in [*stats, everything]:
        tps = row.tokens_per_s()
        lines.append(f"{row.url:<26} {row.count('done'):>5} {row.count('failed'):>6} {row.count('cut'):>4} "
                     f"{row.latency_ms(50):>8.0f} {row.latency_ms(95):>8.0f} {row.latency_ms(99):>8.0f} "
                     f"{row.first_token_ms():>9.0f} {row.tokens():>7} {tps:>7.1f}")
    errors = sorted({s.error for s in everything.samples if s.error})
    lines += [f"error: {e}" for e in errors[:5]]
    return "\n".join(lines)

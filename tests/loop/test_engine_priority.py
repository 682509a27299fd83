"""The real vLLM engine scheduling by priority: a started repetition's next turn goes before work not yet begun.

One engine with ``scheduling_policy: priority`` and one sequence slot, so the order in which waiting requests
are admitted is observable.
"""

from __future__ import annotations

import asyncio

import pytest

from solver.config import load_config
from solver.types import GenerationRequest

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def engine_config():
    """The shared ``engine_loop`` (tests/conftest.py) started with priority scheduling and one sequence slot."""
    return load_config("tiny", overrides={"engine.args.scheduling_policy": "priority",
                                          "engine.args.max_num_seqs": 1})


def test_real_engine_admits_waiting_requests_in_priority_order(engine_loop):
    loop, engine = engine_loop
    ids = tuple(engine.tokenizer.encode("Count from one to fifty.", add_special_tokens=False))
    finished: list[str] = []

    async def one(name: str, priority: int, tokens: int) -> None:
        req = GenerationRequest(name, "", ids, max_tokens=tokens, temperature=0.8, top_p=1.0, seed=1, stop=(),
                                extra={"ignore_eos": True}, priority=priority)
        async for delta in engine.stream(req):
            if delta.finish_reason is not None:
                assert delta.finish_reason == "length", delta.error
        finished.append(name)

    async def scenario() -> None:
        first = asyncio.create_task(one("running", 0, 96))  # holds the only slot
        await asyncio.sleep(0.3)
        assert not first.done()
        # Submitted while the slot is busy, lowest priority first: admission must follow priority, not arrival.
        rest = [asyncio.create_task(one(name, prio, 4)) for name, prio in (("late", 9), ("mid", 5), ("soon", 1))]
        await asyncio.gather(first, *rest)

    outcome = loop.run(scenario(), timeout_s=300)
    assert outcome.ok, outcome.error
    assert finished == ["running", "soon", "mid", "late"]

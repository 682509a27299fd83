"""The engine's warm-up: every step shape the scheduler can produce, run once before the first problem.

Why (measured on an H200, vLLM 0.26, dummy gpt-oss-120b, the h100-gptoss preset; benchmarks/README.md, "No stall
on the day"): every one of the 16 holds of a cold day slice (29.9 s, 9.9 % of it) was the engine compiling Triton
kernels mid-problem: gpt-oss's MoE routing (triton_kernels' ``_topk_forward`` and ``_sum_bitmatrix_rows``, with
``_combined_routing_memset``), specialised by Triton on the step's row count rounded up to 32 (a constexpr
stride) and on whether the count is divisible by 16. vLLM pads a step of up to its largest CUDA-graph size to a
captured size, compiled at start, but runs a larger step (any step carrying a prefill chunk past that size: the
tool output and header appended after each tool call) at its exact size, so each new 32-token bucket compiled the
first time a step fell in it, ~1 s a kernel with the GPU idle.

So the warm-up sends, one at a time, a prompt of fresh random tokens for each step size above the graphs' range
on a ladder of 16 (a multiple of 16 and the size one past it: both divisibility variants of every 32-token bucket),
and every exact size inside it (cheap insurance: there the capture had compiled them all). Each step then holds
exactly that many tokens, and every kernel specialisation compiles, or loads from the compile cache, before the
first problem. Cold, that moves the compiles to the start (276 s on the H200 for 266 kernels); with a shipped
compile cache (solver/engines/compile_cache/) they load in 27.7 s.

The pure part (:func:`warmup_shapes`) is checked here; :func:`run_warmup` drives a started engine.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Triton specialises integer arguments on divisibility by 16 (and on == 1), and the MoE routing kernels on the
# row count rounded up to 32: a multiple of 16 and the size one past it reach both variants of every 32-token
# bucket (the 124 specialisations the H200's cold warm-up compiled above 64 tokens; none compiled after it).
SHAPE_STRIDE = 16
# The prompt tokens are drawn from the first ids of the vocabulary: every model's tokenizer knows them (vLLM
# refuses ids past the tokenizer's), and a random draw makes a prefix-cache hit, which would shorten the step,
# practically impossible.
TOKEN_ID_CEILING = 32000
LOG_LINE = "engine warm-up: {shapes} step shapes ({low}..{high} tokens, {tokens} in all) in {seconds:.1f} s"


def warmup_shapes(max_num_batched_tokens: int, graph_max: int, stride: int = SHAPE_STRIDE) -> tuple[int, ...]:
    """Step sizes (tokens) the warm-up runs: every size up to ``graph_max`` (the largest CUDA-graph size; 0 when
    the engine captures none), then each multiple of ``stride`` up to ``max_num_batched_tokens`` (the scheduler's
    largest step) and the size one past each, the first size past the graphs and the largest step.

    >>> warmup_shapes(128, 8)
    (1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 32, 33, 48, 49, 64, 65, 80, 81, 96, 97, 112, 113, 128)
    >>> warmup_shapes(40, 0)
    (1, 16, 17, 32, 33, 40)
    >>> shapes = warmup_shapes(2048, 64)   # the h100-gptoss preset in vLLM 0.26 (2048 tokens a step by default)
    >>> len(shapes), shapes[62:67], shapes[-2:]
    (312, (63, 64, 65, 80, 81), (2033, 2048))
    """
    if max_num_batched_tokens < 1 or graph_max < 0 or stride < 1:
        raise ValueError("warmup_shapes: max_num_batched_tokens >= 1, graph_max >= 0 and stride >= 1")
    shapes = set(range(1, graph_max + 1)) | {1, graph_max + 1, max_num_batched_tokens}
    for multiple in range(stride, max_num_batched_tokens + 1, stride):
        shapes |= {multiple, multiple + 1}
    return tuple(sorted(n for n in shapes if n <= max_num_batched_tokens))


@dataclass(frozen=True)
class EngineShape:
    """What decides a started engine's step shapes (read from vLLM's own config)."""

    max_num_batched_tokens: int  # the scheduler's token budget per step
    graph_max: int  # the largest CUDA-graph size steps are padded to; 0: none captured (eager, CPU)
    vocab_size: int


@dataclass(frozen=True)
class WarmupReport:
    """One warm-up: the step sizes run, their tokens, and the seconds it took (wall clock)."""

    shapes: tuple[int, ...]
    tokens: int
    seconds: float
    failed: int = 0  # requests that ended in an error (the warm-up goes on: it only costs speed)

    def line(self) -> str:
        """The start-up log's line (``solver.engines.startup_log`` reads its seconds back).

        >>> WarmupReport((65, 80), 145, 2.04).line()
        'engine warm-up: 2 step shapes (65..80 tokens, 145 in all) in 2.0 s'
        >>> WarmupReport((), 0, 0.0).line()
        'engine warm-up: 0 step shapes (0..0 tokens, 0 in all) in 0.0 s'
        """
        text = LOG_LINE.format(shapes=len(self.shapes), low=min(self.shapes, default=0),
                               high=max(self.shapes, default=0), tokens=self.tokens, seconds=self.seconds)
        return text + (f"; {self.failed} requests failed" if self.failed else "")


def warmup_prompts(shapes: Sequence[int], vocab_size: int, seed: int = 0) -> list[list[int]]:
    """One prompt of fresh random token ids per shape (a fixed seed: the same prompts at every start).

    >>> [len(p) for p in warmup_prompts((3, 5), 100)]
    [3, 5]
    >>> max(max(p) for p in warmup_prompts((50,), 100)) < 100
    True
    """
    rng = random.Random(seed)
    high = max(1, min(vocab_size, TOKEN_ID_CEILING))
    return [[rng.randrange(high) for _ in range(n)] for n in shapes]


async def run_warmup(llm: Any, shape: EngineShape, *, clock: Any = time.perf_counter) -> WarmupReport:
    """Send each warm-up prompt to a started ``AsyncLLM`` alone (the next after the last one finished), so each
    step holds exactly one shape. A failed request is counted, not raised: a warm-up only buys speed."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    shapes = warmup_shapes(shape.max_num_batched_tokens, shape.graph_max)
    params = SamplingParams(max_tokens=1, temperature=0.0)
    started, failed = clock(), 0
    for prompt in warmup_prompts(shapes, shape.vocab_size):
        request_id = f"warmup-{len(prompt)}-{uuid.uuid4().hex[:8]}"
        try:
            async for _ in llm.generate(TokensPrompt(prompt_token_ids=prompt), params, request_id=request_id):
                pass
        except Exception as exc:  # noqa: BLE001 - the engine boundary: a failed warm-up request is counted
            failed += 1
            log.warning("warm-up request of %d tokens failed: %s", len(prompt), exc)
    report = WarmupReport(shapes, sum(shapes), round(clock() - started, 3), failed)
    log.info(report.line())
    return report

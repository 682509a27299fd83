"""Random-weight models built once from a fixed seed, for real-engine tests and probes on a CPU. Their output is
noise: they prove plumbing (token ids in, stop ids out, parsing that survives garbage, a cache that behaves like the
real model's), never anything about maths. Built into ``$SOLVER_CACHE/NAME``; vLLM runs them with
``skip_tokenizer_init`` (no tokenizer is saved: the callers render and read ids themselves).

- ``tiny-harmony`` (~13 MB): gpt-oss's harmony vocabulary (201,088 ids), for the harmony dialect's real-engine
  tests and the real-shape benchmark on a CPU;
- ``tiny-hybrid`` (~1 MB): gpt-oss's KV cache layout (layers alternating a 128-token sliding window and full
  attention, Gemma-2's architecture, which vLLM runs on CPU), so vLLM builds its hybrid KV cache manager (two groups
  sharing one block pool) as it does for gpt-oss: for the engine probes' re-sent contexts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from solver.files import staged_dir
from solver.models.cache import ModelError, cache_dir

VOCAB = 201088  # o200k_harmony: o200k_base plus the harmony special tokens, padded as gpt-oss pads it
WINDOW = 128  # gpt-oss's sliding window, in tokens
_DONE_MARKER = ".built"


def ensure_random_model(name: str, build: Callable[[], Any], seed: int, target: Path | None = None) -> Path:
    """The model ``build()`` makes (a transformers model; torch seeded with ``seed`` first), saved once under
    ``$SOLVER_CACHE/name``; later calls return the cached folder."""
    target = target or cache_dir() / name
    if (target / _DONE_MARKER).is_file():
        return target
    try:
        import torch
    except ImportError as exc:
        raise ModelError(f"building the {name} model needs torch and transformers: {exc}") from exc
    torch.manual_seed(seed)
    model = build().to(torch.bfloat16)
    with staged_dir(target, replace=True) as staging:  # never a half-written model
        model.save_pretrained(staging)
        (staging / _DONE_MARKER).write_text(f"seed {seed}\n")
    return target


def _tiny_harmony() -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=1,
        num_key_value_heads=1, head_dim=32,  # 32: the smallest head size vLLM's CPU attention takes
        max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=199998,
        eos_token_id=200002, pad_token_id=199999, torch_dtype="bfloat16"))


def _tiny_hybrid() -> Any:
    from transformers import Gemma2Config, Gemma2ForCausalLM

    # vocabulary 32,000: the probes' prompt ids are below 30,000
    return Gemma2ForCausalLM(Gemma2Config(
        vocab_size=32000, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, sliding_window=WINDOW, max_position_embeddings=8192,
        torch_dtype="bfloat16", layer_types=["sliding_attention", "full_attention"] * 2))


def ensure_tiny_harmony_model(target: Path | None = None) -> Path:
    return ensure_random_model("tiny-harmony", _tiny_harmony, 20260101, target)


def ensure_tiny_hybrid_model(target: Path | None = None) -> Path:
    return ensure_random_model("tiny-hybrid", _tiny_hybrid, 20261125, target)

"""A tiny random-weight model with gpt-oss's harmony vocabulary (201,088 token ids), for real-engine tests of the
harmony dialect on a CPU. Built once from a fixed seed into ``$SOLVER_CACHE/tiny-harmony`` (~13 MB, bf16, no
tokenizer: vLLM runs it with ``skip_tokenizer_init`` because the dialect renders and parses ids itself).

Its output is noise: it proves the plumbing (token ids in, stop token ids out, parsing that survives garbage,
no crash, no process left), never anything about maths.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from solver.models.cache import ModelError, cache_dir

DIR_NAME = "tiny-harmony"
VOCAB = 201088  # o200k_harmony: o200k_base plus the harmony special tokens, padded as gpt-oss pads it
SEED = 20260101
_DONE_MARKER = ".built"


def tiny_harmony_dir() -> Path:
    return cache_dir() / DIR_NAME


def ensure_tiny_harmony_model(target: Path | None = None) -> Path:
    """Build the model once; later calls return the cached one."""
    target = target or tiny_harmony_dir()
    if (target / _DONE_MARKER).is_file():
        return target
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as exc:
        raise ModelError(f"building the tiny harmony model needs torch and transformers: {exc}") from exc
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=1,
        num_key_value_heads=1, head_dim=32,  # 32: the smallest head size vLLM's CPU attention takes
        max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=199998,
        eos_token_id=200002, pad_token_id=199999, torch_dtype="bfloat16")
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        staging = Path(tmp) / "model"
        model.save_pretrained(staging)
        (staging / _DONE_MARKER).write_text(f"seed {SEED}\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # atomic on one filesystem: never a half-written model
    return target

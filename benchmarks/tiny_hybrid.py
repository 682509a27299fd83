"""A tiny random-weight model with gpt-oss's KV cache layout on CPU: layers alternating a 128-token sliding window
and full attention (Gemma-2's architecture, which vLLM runs on CPU), so vLLM builds its hybrid KV cache manager
(two groups sharing one block pool) as it does for gpt-oss. For the engine probes' re-sent contexts
(``probes.py --probes resent``): its output is noise, its cache behaviour is the point.

    python benchmarks/tiny_hybrid.py            # prints the folder (built once, ~1 MB, under $SOLVER_CACHE)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from solver.models import cache_dir

WINDOW = 128  # gpt-oss's sliding window, in tokens
SEED = 20261125
_DONE = ".built"


def ensure_tiny_hybrid(target: Path | None = None) -> Path:
    """Build the model once (vocabulary 32,000: the probes' prompt ids are below 30,000); later calls return it."""
    target = target or cache_dir() / "tiny-hybrid"
    if (target / _DONE).is_file():
        return target
    import torch
    from transformers import Gemma2Config, Gemma2ForCausalLM

    config = Gemma2Config(vocab_size=32000, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=WINDOW,
                          max_position_embeddings=8192, torch_dtype="bfloat16",
                          layer_types=["sliding_attention", "full_attention"] * 2)
    torch.manual_seed(SEED)
    model = Gemma2ForCausalLM(config).to(torch.bfloat16)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        staging = Path(tmp) / "model"
        model.save_pretrained(staging)
        (staging / _DONE).write_text(f"seed {SEED}\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # never a half-written model
    return target


if __name__ == "__main__":
    print(ensure_tiny_hybrid())
    sys.exit(0)

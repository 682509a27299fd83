"""The same function: gpt-oss-120b's MoE layer computed by vLLM's two MXFP4 MoE paths, each against a reference on
the dequantized weights, side by side.

The layer's shape (hidden 2880, 128 experts, top 4, expert intermediate 2880, biases, SwiGLU with alpha 1.702 and
limit 7, gate/up rows interleaved as the checkpoint stores them), MXFP4 expert weights (E2M1 values, one E8M0 scale
per 32) quantized here from random weights whose rows spread over a decade of magnitude, so the scales span several
exponents as a trained layer's do. The same weights, inputs and router logits go to:

  triton  ``triton_kernel_moe_forward`` (vllm/model_executor/layers/fused_moe/experts/gpt_oss_triton_kernels_moe.py),
          the weights swizzled by ``_swizzle_mxfp4`` as vLLM's MXFP4 oracle does for its TRITON backend;
  marlin  ``fused_marlin_moe`` (.../experts/marlin_moe.py), the weights repacked by
          ``prepare_moe_mxfp4_layer_for_marlin`` and padded to Marlin's tiles (hidden 3072, intermediate 2944) as
          the oracle rounds them for its MARLIN backend;

and to the reference (torch, expert by expert) on the dequantized weights, in bf16 (the precision vLLM's own
test_gpt_oss_triton_kernels.py checks the Triton path against) and in fp32. At each token count: each backend's
relative error against both, as vLLM's kernel tests measure it (triton_kernels.testing.assert_close: the largest
and the RMS relative error, normalised by the reference's largest value; their tolerances 0.025 and 0.005) and as
a plain relative L2 error. A whole-model comparison on the dummy checkpoint cannot tell the backends apart (its
next-token distribution is flat), so the layer is compared alone.

    python benchmarks/moe_numerics.py --dry-run                   # CPU: the pure part at a small shape; kernels named
    python benchmarks/moe_numerics.py --gpu --json $OUT/moe_numerics.json     # H200/H100: vLLM 0.26, its MoE kernels

Without ``--gpu`` the script runs the pure part (quantize, dequantize, the reference) at ``--small`` size on the
CPU and prints the reference's own bf16 error: no kernel is called.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the solver package, run from a checkout

from solver.errors import BadInput  # noqa: E402 - after the path set-up above
from solver.files import atomic_write  # noqa: E402

# E2M1 (FP4) values by their 4-bit code: bit 3 is the sign, codes 0..7 the magnitudes (OCP MX spec, and the order
# vLLM's and triton_kernels' MXFP4 kernels decode them in).
FP4_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
BLOCK = 32  # values per E8M0 scale
E2M1_EMAX = 2  # the largest E2M1 exponent: 6 = 1.5 x 2^2
ALPHA, LIMIT = 1.702, 7.0  # gpt-oss's SwiGLU (config swiglu_limit 7.0; alpha in vLLM's swigluoai kernels)
TOLERANCES = {"maxtol": 0.025, "rmstol": 0.005}  # vLLM tests/kernels/moe/test_gpt_oss_triton_kernels.py, test_equiv
KERNELS = {  # what the GPU run calls, by module (vLLM 0.26's paths)
    "triton": [("vllm.model_executor.layers.fused_moe.experts.gpt_oss_triton_kernels_moe", "triton_kernel_moe_forward"),
               ("vllm.model_executor.layers.quantization.utils.mxfp4_utils", "_swizzle_mxfp4"),
               ("vllm.model_executor.layers.fused_moe.config", "mxfp4_w4a16_moe_quant_config")],
    "marlin": [("vllm.model_executor.layers.fused_moe.experts.marlin_moe", "fused_marlin_moe"),
               ("vllm.model_executor.layers.quantization.utils.marlin_utils_fp4", "prepare_moe_mxfp4_layer_for_marlin"),
               ("vllm.scalar_type", "scalar_types")],
}
MARLIN_HIDDEN_TILE, MARLIN_INTERMEDIATE_TILE = 256, 128  # vLLM 0.26 oracle/mxfp4.py, round-ups for MARLIN on CUDA


@dataclass(frozen=True)
class Shape:
    """The MoE layer's shape: ``hidden`` (K), ``intermediate`` (N, per expert), experts, experts per token."""

    hidden: int = 2880
    intermediate: int = 2880
    experts: int = 128
    top_k: int = 4

    def __post_init__(self) -> None:
        if self.hidden % BLOCK or self.intermediate % BLOCK:
            raise BadInput(f"hidden and intermediate must be multiples of {BLOCK}")
        if not 1 <= self.top_k <= self.experts:
            raise BadInput("top_k must be in 1..experts")


SMALL = Shape(hidden=128, intermediate=96, experts=8, top_k=4)


def round_up(n: int, to: int) -> int:
    """
    >>> round_up(2880, 256), round_up(2880, 128), round_up(2944, 128)
    (3072, 2944, 2944)
    """
    return -(-n // to) * to


# -- MXFP4: quantize, pack, dequantize (torch, any device) --


def quantize_mxfp4(w: Any) -> tuple[Any, Any]:
    """``w`` (..., K) as MXFP4: packed codes (..., K/2) uint8 (the lower nibble holds the even element) and E8M0
    scales (..., K/32) uint8 (biased by 127). Per block of 32 the shared exponent is floor(log2(max |w|)) - 2, so
    the block's largest value lands in [4, 8) and saturates at 6 (the OCP MX rule); each value rounds to the
    nearest E2M1 value. An all-zero block gets scale 2^-127.

    >>> import torch
    >>> w = torch.tensor([[0.0, 0.25, -0.5, 0.75, 1.0, -1.5, 3.0, 2.9] * 4])
    >>> codes, scales = quantize_mxfp4(w)
    >>> codes.shape, scales.shape, scales.tolist()   # max |w| 3.0: exponent 1 - 2 = -1, biased 126
    (torch.Size([1, 16]), torch.Size([1, 1]), [[126]])
    >>> dequantize_mxfp4(codes, scales)[0, :8].tolist()
    [0.0, 0.25, -0.5, 0.75, 1.0, -1.5, 3.0, 3.0]
    """
    import torch

    *lead, k = w.shape
    blocks = w.float().reshape(*lead, k // BLOCK, BLOCK)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    exponent = torch.where(amax > 0, torch.floor(torch.log2(amax.clamp_min(2.0 ** -126))) - E2M1_EMAX,
                           torch.full_like(amax, -127.0)).clamp(-127, 127)
    scaled = blocks / torch.exp2(exponent)
    magnitudes = torch.tensor(FP4_MAGNITUDES, device=w.device)
    index = (scaled.abs().clamp(max=6.0).unsqueeze(-1) - magnitudes).abs().argmin(dim=-1)  # nearest magnitude
    codes = (index | (((scaled < 0) & (index > 0)).long() << 3)).to(torch.uint8).reshape(*lead, k)  # zero: +0
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed, (exponent.squeeze(-1) + 127).to(torch.uint8)


def dequantize_mxfp4(packed: Any, scales: Any, dtype: Any = None) -> Any:
    """MXFP4 codes and scales (``quantize_mxfp4``'s layout) back to values, float32 unless ``dtype``."""
    import torch

    values = torch.tensor([*FP4_MAGNITUDES, *(-m for m in FP4_MAGNITUDES)], device=packed.device)
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)
    out = values[codes.long()]
    *lead, k = out.shape
    out = out.reshape(*lead, k // BLOCK, BLOCK) * torch.exp2(scales.float() - 127).unsqueeze(-1)
    return out.reshape(*lead, k).to(dtype or torch.float32)


# -- the layer: random weights, the reference --


@dataclass
class Layer:
    """One MoE layer's expert weights, MXFP4 (``w13``: (E, 2N, K/2) gate/up rows interleaved, ``w2``: (E, K, N/2);
    scales likewise per 32), biases (E, 2N) and (E, K) in bf16."""

    shape: Shape
    w13: Any
    w13_scale: Any
    w13_bias: Any
    w2: Any
    w2_scale: Any
    w2_bias: Any

    def dequantized(self, dtype: Any) -> tuple[Any, Any]:
        return dequantize_mxfp4(self.w13, self.w13_scale, dtype), dequantize_mxfp4(self.w2, self.w2_scale, dtype)


def random_layer(shape: Shape, seed: int, device: str = "cpu") -> Layer:
    """Random expert weights quantized to MXFP4: each output row's standard deviation drawn log-uniformly in
    [0.005, 0.05] (so block maxima, and the E8M0 scales, spread over several exponents), biases ~ N(0, 0.02)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)

    def weights(rows: int, cols: int) -> tuple[Any, Any]:
        packed, scales = [], []
        for _ in range(shape.experts):  # expert by expert: the fp32 draft of one is all that is held at once
            std = torch.exp(torch.empty(rows, 1, device=device).uniform_(math.log(0.005), math.log(0.05),
                                                                          generator=gen))
            p, s = quantize_mxfp4(torch.randn(rows, cols, device=device, generator=gen) * std)
            packed.append(p)
            scales.append(s)
        return torch.stack(packed), torch.stack(scales)

    w13, w13_scale = weights(2 * shape.intermediate, shape.hidden)
    w2, w2_scale = weights(shape.hidden, shape.intermediate)
    bias = {"w13": 2 * shape.intermediate, "w2": shape.hidden}
    b13, b2 = (0.02 * torch.randn(shape.experts, n, device=device, generator=gen) for n in bias.values())
    return Layer(shape, w13, w13_scale, b13.to(torch.bfloat16), w2, w2_scale, b2.to(torch.bfloat16))


def random_inputs(shape: Shape, tokens: int, seed: int, device: str = "cpu") -> tuple[Any, Any]:
    """Hidden states (tokens, K) bf16 ~ N(0, 1) (the MoE's input follows an RMSNorm) and router logits (tokens, E)
    bf16 ~ N(0, 1)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(tokens, shape.hidden, device=device, generator=gen).to(torch.bfloat16)
    logits = torch.randn(tokens, shape.experts, device=device, generator=gen).to(torch.bfloat16)
    return x, logits


def route(logits: Any, top_k: int) -> tuple[Any, Any]:
    """gpt-oss's routing: the top ``top_k`` logits, softmax over them (vLLM's ``renormalize=True``); weights fp32,
    ids int32."""
    import torch

    values, ids = torch.topk(logits.float(), top_k, dim=-1)
    return torch.softmax(values, dim=-1), ids.to(torch.int32)


def swiglu_oai(h: Any) -> Any:
    """gpt-oss's activation on interleaved (gate, up) columns: gate clamped above at 7, up to [-7, 7],
    gate x sigmoid(1.702 gate) x (up + 1)."""
    import torch

    gate, up = h[..., 0::2].clamp(max=LIMIT), h[..., 1::2].clamp(-LIMIT, LIMIT)
    return gate * torch.sigmoid(ALPHA * gate) * (up + 1)


def reference_moe(x: Any, logits: Any, layer: Layer, dtype: Any, weights13_2: tuple[Any, Any] | None = None) -> Any:
    """The layer computed expert by expert in ``dtype`` (torch.bfloat16: weights, activations and each product's
    result in bf16, as a bf16 model runs; torch.float32: the exact function of the dequantized weights up to fp32
    rounding); returns float32 (tokens, K). ``weights13_2``: ``layer.dequantized(dtype)`` made once by the caller."""
    import torch

    w13, w2 = weights13_2 or layer.dequantized(dtype)
    weights, ids = route(logits, layer.shape.top_k)
    xs = x.to(dtype)
    out = torch.zeros(x.shape[0], layer.shape.hidden, dtype=torch.float32, device=x.device)
    for e in ids.unique().tolist():
        token, slot = (ids == e).nonzero(as_tuple=True)
        h = xs[token] @ w13[e].T + layer.w13_bias[e].to(dtype)
        y = swiglu_oai(h) @ w2[e].T + layer.w2_bias[e].to(dtype)
        out.index_add_(0, token, y.float() * weights[token, slot].unsqueeze(-1))
    return out


def naive_moe(x: Any, logits: Any, layer: Layer) -> Any:
    """The same function token by token and expert by expert in float64, for tests at small shapes."""
    import torch

    w13, w2 = (w.double() for w in layer.dequantized(torch.float32))
    out = torch.zeros(x.shape[0], layer.shape.hidden, dtype=torch.float64)
    weights, ids = route(logits, layer.shape.top_k)
    for t in range(x.shape[0]):
        for k in range(layer.shape.top_k):
            e = int(ids[t, k])
            h = w13[e] @ x[t].double() + layer.w13_bias[e].double()
            y = w2[e] @ swiglu_oai(h) + layer.w2_bias[e].double()
            out[t] += float(weights[t, k]) * y
    return out


@dataclass(frozen=True)
class Error:
    """``got`` against ``ref``: the plain relative L2 error, and triton_kernels.testing.assert_close's two (both
    normalised by the reference's largest magnitude; each element's error over max(its reference magnitude, the
    reference's RMS)), with whether vLLM's test tolerances hold."""

    rel_l2: float
    max_rel: float
    rms_rel: float
    within_vllm_tolerance: bool


def error(got: Any, ref: Any) -> Error:
    """
    >>> import torch
    >>> ref = torch.tensor([1.0, -2.0, 4.0, 0.5])
    >>> e = error(ref * 1.001, ref)
    >>> round(e.rel_l2, 6), round(e.max_rel, 6), e.within_vllm_tolerance
    (0.001, 0.001, True)
    >>> error(ref + torch.tensor([0.0, 0.0, 0.4, 0.0]), ref).within_vllm_tolerance
    False
    """
    import torch

    got, ref = got.double(), ref.double()
    rel_l2 = float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-300))
    scale = 1.0 / (ref.abs().max() + 1e-30)
    refn, gotn = ref * scale, got * scale
    rms = torch.sqrt(refn.square().mean()) + 1e-30
    rel = (refn - gotn).abs() / torch.maximum(rms, refn.abs())
    max_rel, rms_rel = float(rel.max()), float(torch.sqrt(rel.square().mean()))
    return Error(rel_l2, max_rel, rms_rel,
                 max_rel <= TOLERANCES["maxtol"] and rms_rel <= TOLERANCES["rmstol"])


# -- the GPU kernels (vLLM 0.26 with its MoE kernels; imported only here) --


def triton_moe(x: Any, logits: Any, layer: Layer) -> Any:
    """vLLM's TRITON MXFP4 path (OAI triton_kernels) on ``layer``: weights swizzled as the oracle does, biases fp32."""
    from vllm.utils.import_utils import has_triton_kernels

    if not has_triton_kernels():
        raise RuntimeError("this vLLM has no triton_kernels (the kit's 4-moe carry installs them)")
    from triton_kernels.matmul_ogs import FlexCtx, PrecisionConfig
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import mxfp4_w4a16_moe_quant_config
    from vllm.model_executor.layers.fused_moe.experts.gpt_oss_triton_kernels_moe import triton_kernel_moe_forward
    from vllm.model_executor.layers.quantization.utils.mxfp4_utils import _swizzle_mxfp4

    w13, flex13, scale13 = _swizzle_mxfp4(layer.w13.clone(), layer.w13_scale.clone())
    w2, flex2, scale2 = _swizzle_mxfp4(layer.w2.clone(), layer.w2_scale.clone())
    config = mxfp4_w4a16_moe_quant_config(
        w1_scale=PrecisionConfig(weight_scale=scale13, flex_ctx=FlexCtx(rhs_data=flex13)),
        w2_scale=PrecisionConfig(weight_scale=scale2, flex_ctx=FlexCtx(rhs_data=flex2)),
        w1_bias=layer.w13_bias.float(), w2_bias=layer.w2_bias.float())
    out = triton_kernel_moe_forward(hidden_states=x, w1=w13, w2=w2, gating_output=logits, topk=layer.shape.top_k,
                                    renormalize=True, activation=MoEActivation.SWIGLUOAI, quant_config=config)
    return out[:, :layer.shape.hidden].float()


def pad_for_marlin(layer: Layer) -> Layer:
    """The layer at Marlin's tile sizes (hidden to a multiple of 256, intermediate of 128), as vLLM's oracle rounds
    them for its MARLIN backend: extra (gate, up) row pairs, input columns and output rows are zero codes with scale
    1 and zero bias, so they add nothing to the function."""
    import torch
    import torch.nn.functional as F

    s = layer.shape
    hidden, inter = round_up(s.hidden, MARLIN_HIDDEN_TILE), round_up(s.intermediate, MARLIN_INTERMEDIATE_TILE)
    rows13, cols13, rows2, cols2 = 2 * (inter - s.intermediate), hidden - s.hidden, hidden - s.hidden, \
        inter - s.intermediate

    def pad(packed: Any, scales: Any, rows: int, cols: int) -> tuple[Any, Any]:
        return (F.pad(packed, (0, cols // 2, 0, rows)), F.pad(scales, (0, cols // BLOCK, 0, rows), value=127))

    w13, w13_scale = pad(layer.w13, layer.w13_scale, rows13, cols13)
    w2, w2_scale = pad(layer.w2, layer.w2_scale, rows2, cols2)
    return Layer(Shape(hidden, inter, s.experts, s.top_k), w13, w13_scale.to(torch.uint8),
                 F.pad(layer.w13_bias, (0, rows13)), w2, w2_scale.to(torch.uint8), F.pad(layer.w2_bias, (0, rows2)))


def marlin_moe(x: Any, logits: Any, layer: Layer) -> Any:
    """vLLM's MARLIN MXFP4 path on ``layer``: padded to Marlin's tiles, repacked by
    ``prepare_moe_mxfp4_layer_for_marlin``, routed as gpt-oss routes (``route``), SwiGLU-OAI."""
    import types

    import torch.nn.functional as F
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.experts.marlin_moe import fused_marlin_moe
    from vllm.model_executor.layers.quantization.utils.marlin_utils_fp4 import prepare_moe_mxfp4_layer_for_marlin
    from vllm.scalar_type import scalar_types

    padded = pad_for_marlin(layer)
    holder = types.SimpleNamespace(params_dtype=x.dtype)  # all the repacking reads of a layer
    w13, w2, s13, s2, b13, b2 = prepare_moe_mxfp4_layer_for_marlin(holder, padded.w13, padded.w2, padded.w13_scale,
                                                                   padded.w2_scale, padded.w13_bias, padded.w2_bias)
    weights, ids = route(logits, layer.shape.top_k)
    xp = F.pad(x, (0, padded.shape.hidden - layer.shape.hidden)).contiguous()
    out = fused_marlin_moe(hidden_states=xp, w1=w13, w2=w2, bias1=b13, bias2=b2, w1_scale=s13, w2_scale=s2,
                           topk_weights=weights, topk_ids=ids, quant_type_id=scalar_types.float4_e2m1f.id,
                           global_num_experts=layer.shape.experts, activation=MoEActivation.SWIGLUOAI)
    return out[:, :layer.shape.hidden].float()


BACKENDS = {"triton": triton_moe, "marlin": marlin_moe}


def compare(layer: Layer, tokens: list[int], seed: int, backends: list[str], device: str,
            done: Callable[[list[dict[str, Any]]], None] = lambda rows: None) -> list[dict[str, Any]]:
    """Per token count: the references (bf16, fp32) and each backend in ``backends`` on the same inputs; each
    one's error against both references, and the bf16 reference's against fp32. A backend that fails is a value in
    its row (``error``: the exception's first line), so the other's numbers still come back; ``done`` gets the rows
    so far after each token count (a device call cut off keeps them)."""
    import torch

    from solver.errors import first_line

    rows: list[dict[str, Any]] = []
    exact, bf16 = layer.dequantized(torch.float32), layer.dequantized(torch.bfloat16)
    for t in tokens:
        x, logits = random_inputs(layer.shape, t, seed + t, device)
        ref32 = reference_moe(x, logits, layer, torch.float32, exact)
        ref16 = reference_moe(x, logits, layer, torch.bfloat16, bf16)
        row: dict[str, Any] = {"tokens": t, "bf16_reference_vs_fp32": asdict(error(ref16, ref32))}
        for name in backends:
            try:
                got = BACKENDS[name](x, logits, layer)
            except Exception as exc:  # a kernel's failure (any kind: CUDA, Triton, an API drift) is this row's value
                row[name] = {"error": first_line(exc)}
                continue
            row[name] = {"vs_bf16": asdict(error(got, ref16)), "vs_fp32": asdict(error(got, ref32))}
        rows.append(row)
        done(rows)
        shown = "  ".join(f"{n} {row[n]['vs_bf16']['rel_l2']:.2e} (max {row[n]['vs_bf16']['max_rel']:.2e})"
                          if "error" not in row[n] else f"{n} failed: {row[n]['error']}" for n in backends)
        print(f"{t:4d} tokens: relative L2 error against the bf16 reference: {shown or '-'}; bf16 reference against "
              f"fp32 {row['bf16_reference_vs_fp32']['rel_l2']:.2e}", flush=True)
    return rows


def kernels_here() -> dict[str, str]:
    """Each kernel function the GPU run calls, as this machine's vLLM source defines it: 'found', or why not. Read
    from the source (``ast``), not imported: importing vLLM's MoE modules costs a minute on two CPU cores and
    needs CUDA ops a CPU build lacks."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    root = Path(spec.origin).parent if spec and spec.origin else None
    found = {}
    for backend, names in KERNELS.items():
        for module, name in names:
            path = root.joinpath(*module.split(".")[1:]).with_suffix(".py") if root else None
            if path is None or not path.is_file():
                found[f"{backend}: {module}.{name}"] = "no such module in this vLLM"
                continue
            tree = ast.parse(path.read_text())
            defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            defined |= {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
            found[f"{backend}: {module}.{name}"] = "found" if name in defined else "module found, name missing"
    return found


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="moe_numerics.py", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="call vLLM's Triton and Marlin MXFP4 MoE kernels (CUDA)")
    parser.add_argument("--tokens", default="1,8,64,512", help="token counts, comma-separated")
    parser.add_argument("--backends", default="triton,marlin", help="among triton, marlin")
    parser.add_argument("--small", action="store_true", help=f"the small shape {SMALL} (the CPU default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--dry-run", action="store_true",
                        help="parse and check; run the pure part at the small shape; name the kernels; call none")
    args = parser.parse_args(argv)
    try:
        args.tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    except ValueError:
        raise BadInput(f"--tokens: comma-separated whole numbers, not {args.tokens!r}") from None
    if not args.tokens or min(args.tokens) < 1:
        raise BadInput("--tokens: numbers >= 1")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not args.backends or not set(args.backends) <= set(BACKENDS):
        raise BadInput(f"--backends: choose among {', '.join(BACKENDS)}")
    if args.json is not None and not args.json.parent.is_dir():
        raise BadInput(f"--json: no folder {args.json.parent}")
    args.shape = SMALL if args.small or not args.gpu else Shape()
    return args


def dry_run(args: argparse.Namespace, argv: list[str]) -> int:
    """Everything up to the kernel calls: the pure part (quantize, dequantize, both references) at the small shape
    on this machine, the full shape's padding for Marlin, and which kernel functions this vLLM has."""
    import torch

    from solver.dryrun import DryRun

    dry = DryRun("moe_numerics.py")
    layer = random_layer(SMALL, args.seed)
    x, logits = random_inputs(SMALL, 4, args.seed)
    e = error(reference_moe(x, logits, layer, torch.float32), naive_moe(x, logits, layer))
    dry.add(f"pure part at {SMALL}: the fp32 reference against the naive one, relative L2 {e.rel_l2:.1e}")
    full = Shape()
    dry.add(f"{'GPU' if args.gpu else 'CPU'} shape {args.shape}; tokens {args.tokens}; backends {args.backends}; "
            f"Marlin pads hidden {full.hidden} -> {round_up(full.hidden, MARLIN_HIDDEN_TILE)}, intermediate "
            f"{full.intermediate} -> {round_up(full.intermediate, MARLIN_INTERMEDIATE_TILE)}")
    if args.gpu:
        for name, state in kernels_here().items():
            if state == "found":
                dry.add(f"kernel {name}")
            else:
                dry.skipped.append(f"kernel {name}: {state}; the GPU machine's vLLM 0.26 has it")
    if args.json is not None:
        dry.add(f"writes {args.json}")
    return dry.print()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        if args.dry_run:
            return dry_run(args, argv)
    except BadInput as exc:
        print(f"moe_numerics.py: error: {exc}", file=sys.stderr)
        return 2
    import torch

    device = "cuda" if args.gpu else "cpu"
    if args.gpu and not torch.cuda.is_available():
        print("moe_numerics.py: error: --gpu: no CUDA device visible", file=sys.stderr)
        return 2
    if args.gpu:
        import vllm

        vllm_version = vllm.__version__
    else:
        vllm_version = None  # the CPU run calls none of vLLM's kernels: the references only

    head = {"argv": argv, "shape": asdict(args.shape), "tolerances": TOLERANCES, "vllm": vllm_version,
            "torch": torch.__version__, "device": torch.cuda.get_device_name() if args.gpu else "cpu"}

    def save(rows: list[dict[str, Any]]) -> None:
        if args.json is not None:
            atomic_write(args.json, json.dumps({**head, "rows": rows}, indent=1))

    layer = random_layer(args.shape, args.seed, device)
    rows = compare(layer, args.tokens, args.seed, args.backends if args.gpu else [], device, save)
    return 1 if any("error" in row.get(name, {}) for row in rows for name in args.backends) else 0


if __name__ == "__main__":
    sys.exit(main())

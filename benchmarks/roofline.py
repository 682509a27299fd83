"""The decode step against its memory bound: pure decode steps timed at each batch and context, fitted as
base(B) + c x B x C, each printed beside the bound that the model's config and the GPU's measured bandwidth give
(``solver/timing/roofline.py``), with a plot; optionally a profile of a few steps, GPU time by kernel class.

Each context's prompts (random ids, distinct per sequence) are prefilled once, all of them before any batch decodes
(so every batch re-sends cached prompts and its sequences decode at once); each batch then decodes ``--decode`` tokens, and the step is the window in which all its sequences decode (``measure.decode``:
prefill timed apart), ``1000 x B / tokens-per-s`` ms. A batch whose contexts do not fit the engine's KV cache is
left out and said so. The bandwidth is measured first, in a process of its own (a device-to-device copy of 2 GiB,
read and write counted), so the bound is this machine's, not a datasheet's; the datasheet's is printed beside it.

    python benchmarks/roofline.py --quick                                   # CPU, the tiny model, small sizes
    python benchmarks/roofline.py --gpu --model PATH --set engine.args.load_format=dummy \
        --json roofline.json --plot roofline.png
    # the profile needs vLLM's torch profiler in the engine (it changes vLLM's compile hash: a cold start)
    python benchmarks/roofline.py --gpu --model PATH --set engine.args.load_format=dummy \
        --set 'engine.args.profiler_config={"profiler":"torch","torch_profiler_dir":"/root/prof"}' \
        --batches 1,8 --contexts 32768 --profile 1x32768,8x32768 --json profile.json
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from solver.config import ConfigError, add_gpu_arguments, gpu_config
from solver.errors import BadInput
from solver.files import atomic_write
from solver.measure.vllm_probes import cache_tokens, decode, generate, random_ids
from solver.timing.roofline import StepModel, fit_steps, summarise_trace

# Datasheet HBM bandwidth (bytes/s), printed beside the measured one; the bound uses the measured.
DATASHEET = {"H100 80GB HBM3": 3.35e12, "H200": 4.8e12}
_COPY = """
import json, sys, time, torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
n = (2 << 30 if dev == "cuda" else 256 << 20) // 2
a = torch.empty(n, dtype=torch.bfloat16, device=dev); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
sync(); t = time.perf_counter(); k = 20
for _ in range(k): b.copy_(a)
sync(); s = time.perf_counter() - t
name = torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"
print(json.dumps({"device": name, "bandwidth": 2 * a.numel() * a.element_size() * k / s}))
"""


def measure_bandwidth() -> dict[str, Any]:
    """The device's copy bandwidth (bytes/s, read + write) and name, from a process of its own, so none of its
    memory stays beside the engine."""
    done = subprocess.run([sys.executable, "-c", _COPY], capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"bandwidth probe failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def datasheet(device: str) -> float | None:
    return next((v for k, v in DATASHEET.items() if k in device), None)


async def profile_step(llm: Any, batch: int, context: int, tokens: int, folder: Path) -> dict[str, Any]:
    """``tokens`` decode steps at (batch, context) under vLLM's torch profiler; the trace's GPU time by class."""
    before = set(glob.glob(str(folder / "**" / "*.json*"), recursive=True))
    prompts = [random_ids(context, ("decode", context, i)) for i in range(batch)]
    await asyncio.gather(*(generate(llm, p, 1, i) for i, p in enumerate(prompts)))  # prefilled, cached
    await llm.start_profile()
    await asyncio.gather(*(generate(llm, p, tokens, i) for i, p in enumerate(prompts)))
    await llm.stop_profile()
    deadline = time.monotonic() + 120
    new: list[str] = []
    while time.monotonic() < deadline:  # the worker writes its trace after stop returns
        new = sorted(set(glob.glob(str(folder / "**" / "*.json*"), recursive=True)) - before)
        if new and all(os.path.getsize(f) > 0 for f in new):
            time.sleep(2)
            break
        await asyncio.sleep(1)
    events: list[dict[str, Any]] = []
    for f in new:
        opener = gzip.open if f.endswith(".gz") else open
        with opener(f, "rt") as handle:  # type: ignore[operator]
            events += json.load(handle).get("traceEvents", [])
    s = summarise_trace(events, steps=tokens)
    return {"batch": batch, "context": context, "steps": tokens, "files": [Path(f).name for f in new],
            "kernel_ms_per_step": {k: v / tokens for k, v in s.kernel_ms.items()},
            "busy_ms_per_step": s.busy_ms / tokens, "span_ms_per_step": s.span_ms / tokens,
            "idle_ms_per_step": s.idle_ms / tokens, "top_rest": s.top_rest}


async def run(args: argparse.Namespace, bandwidth: dict[str, Any]) -> dict[str, Any]:
    from solver.engines import open_engine
    from solver.models import resolve_model

    config = args.config
    model_dir = Path(resolve_model(config.engine.model))
    hf = json.loads((model_dir / "config.json").read_text())
    kv = str(config.engine.args.get("kv_cache_dtype") or "auto")
    step = StepModel.of(hf, kv_bytes=1 if kv.startswith("fp8") else 2)
    bw = float(bandwidth["bandwidth"])
    began = time.perf_counter()
    engine = await open_engine(config)
    started = time.perf_counter() - began
    llm = engine._llm
    out: dict[str, Any] = {"argv": args.argv, "device": bandwidth["device"], "bandwidth_measured": bw,
                           "bandwidth_datasheet": datasheet(bandwidth["device"]), "kv_cache_dtype": kv,
                           "engine_args": config.engine.args, "engine_start_s": started,
                           "compile_cache": None if engine.compile_cache is None else engine.compile_cache.line,
                           "bound": {"dense_bytes": step.dense_bytes, "expert_bytes": step.expert_bytes,
                                     "kv_bytes_per_token": step.kv_bytes_per_token,
                                     "context_ns": step.context_ns(bw)},
                           "rows": [], "left_out": []}
    try:
        await asyncio.gather(*(generate(llm, random_ids(64, ("warm", i)), 8, i) for i in range(4)))
        size = cache_tokens(llm) or 0
        out["kv_cache_tokens"] = size
        print(f"engine: started in {started:.1f} s; KV cache {size} tokens ({kv}); bandwidth {bw / 1e9:.0f} GB/s "
              f"measured on {bandwidth['device']} (datasheet {(datasheet(bandwidth['device']) or 0) / 1e9:.0f})")
        if out["compile_cache"]:
            print(out["compile_cache"])
        for context in args.contexts:
            fits = [b for b in args.batches if b * (context + args.decode + 64) <= 0.9 * size] if size else args.batches
            out["left_out"] += [{"batch": b, "context": context} for b in args.batches if b not in fits]
            if not fits:
                continue
            for r in await decode(llm, fits, context, args.decode, prefill_first=True):
                if r["tps"] is None:
                    out["left_out"].append({"batch": r["seqs"], "context": context, "why": "empty window"})
                    continue
                ms = 1e3 * r["seqs"] / r["tps"]
                bound = step.bound_ms(r["seqs"], context, bw)
                row = {"batch": r["seqs"], "context": context, "step_ms": ms, "bound_ms": bound,
                       "ratio": ms / bound, "tps": r["tps"], "prefill_s": r["prefill_s"],
                       "cached_share": r["cached_share"]}
                out["rows"].append(row)
                print(f"B {row['batch']:>2} C {context:>6}: step {ms:7.2f} ms, bound {bound:6.2f} ms, "
                      f"{row['ratio']:.2f}x ({r['tps']:.0f} tok/s)")
            if args.json is not None:  # after each context: a call cut off keeps what it measured
                atomic_write(args.json, json.dumps(out, indent=1))
        if out["rows"]:
            f = fit_steps((r["batch"], r["context"], r["step_ms"]) for r in out["rows"])
            out["fit"] = {"base_ms": {str(b): v for b, v in f.base_ms.items()}, "context_ns": f.context_ns,
                          "residual_ms": f.residual_ms, "points": f.points,
                          "base_bound_ms": {str(b): step.bound_ms(b, 0, bw) for b in f.base_ms}}
            print(f"fit: context {f.context_ns:.2f} ns a token (bound {step.context_ns(bw):.2f}: "
                  f"{f.context_ns / step.context_ns(bw):.2f}x); base per batch " + ", ".join(
                      f"B{b} {v:.2f} ms (bound {step.bound_ms(b, 0, bw):.2f}: {v / step.bound_ms(b, 0, bw):.2f}x)"
                      for b, v in f.base_ms.items()) + f"; residual {f.residual_ms:.3f} ms rms over {f.points}")
        if args.profile:
            folder = Path(((config.engine.args.get("profiler_config") or {}).get("torch_profiler_dir")) or ".")
            out["profile"] = []
            for batch, context in args.profile:
                p = await profile_step(llm, batch, context, args.profile_steps, folder)
                out["profile"].append(p)
                print(f"profile B {batch} C {context}: per step busy {p['busy_ms_per_step']:.2f} ms, idle "
                      f"{p['idle_ms_per_step']:.2f} ms; " + ", ".join(
                          f"{k} {v:.2f}" for k, v in sorted(p["kernel_ms_per_step"].items(), key=lambda kv: -kv[1])))
                if args.json is not None:
                    atomic_write(args.json, json.dumps(out, indent=1))
    finally:
        await engine.close()
    return out


def plot(out: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    batches = sorted({r["batch"] for r in out["rows"]})
    for i, b in enumerate(batches):
        rows = sorted((r for r in out["rows"] if r["batch"] == b), key=lambda r: r["context"])
        xs = [r["context"] / 1e3 for r in rows]
        line, = ax.plot(xs, [r["step_ms"] for r in rows], "o-", label=f"B {b} measured")
        ax.plot(xs, [r["bound_ms"] for r in rows], "--", color=line.get_color(), label=f"B {b} bound")
    ax.set_xlabel("context per sequence (k tokens)")
    ax.set_ylabel("decode step (ms)")
    ax.set_title(f"decode step vs memory bound, {out['device']} ({out['bandwidth_measured'] / 1e12:.2f} TB/s)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"{what}: comma-separated whole numbers, not {text!r}") from None
    if not values or min(values) < 1:
        raise BadInput(f"{what}: whole numbers >= 1, not {text!r}")
    return values


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,2,4,8,16", help="sequences decoding at once, comma-separated")
    parser.add_argument("--contexts", default="2048,16384,32768,49152", help="context per sequence, comma-separated")
    parser.add_argument("--decode", type=int, default=96, help="tokens each sequence decodes per point")
    parser.add_argument("--profile", default="", help="BxC points to profile, e.g. 1x32768,8x32768 (needs "
                        "engine.args.profiler_config with a torch_profiler_dir)")
    parser.add_argument("--profile-steps", type=int, default=8, help="decode steps in each profile")
    parser.add_argument("--quick", action="store_true", help="CPU sizes: batches 1,2 contexts 128,512, 16 tokens")
    add_gpu_arguments(parser, preset_help="a preset name (default tiny, or h100-gptoss with --gpu)",
                      model_help="engine.model: a local model folder",
                      set_help="config override, e.g. --set engine.args.attention_backend=TRITON_ATTN")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here (after each context)")
    parser.add_argument("--plot", type=Path, default=None, help="a PNG of the steps beside their bounds")
    parser.add_argument("--dry-run", action="store_true", help="parse, plan and check; start nothing")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.quick:
        args.batches, args.contexts, args.decode = "1,2", "128,512", 16
    args.batches = ints(args.batches, "--batches")
    args.contexts = ints(args.contexts, "--contexts")
    if args.decode < 8 or args.profile_steps < 1:
        raise BadInput("--decode must be >= 8 and --profile-steps >= 1")
    try:
        args.profile = [tuple(int(v) for v in p.lower().split("x")) for p in args.profile.split(",") if p.strip()]
    except ValueError:
        raise BadInput(f"--profile: BxC points such as 1x32768,8x32768, not {args.profile!r}") from None
    if any(len(p) != 2 or min(p) < 1 for p in args.profile):
        raise BadInput(f"--profile: BxC points such as 1x32768,8x32768, not {args.profile!r}")
    for path in (args.json, args.plot):
        if path is not None and not path.parent.is_dir():
            raise BadInput(f"no folder {path.parent} for {path}")
    try:
        args.config = gpu_config(args)
    except (ConfigError, ValueError) as exc:
        raise BadInput(str(exc).splitlines()[0]) from exc
    if args.profile and not (args.config.engine.args.get("profiler_config") or {}).get("torch_profiler_dir"):
        raise BadInput("--profile needs engine.args.profiler_config with a torch_profiler_dir (an absolute path)")
    limit = args.config.engine.args.get("max_model_len")
    longest = max(args.contexts + [c for _, c in args.profile]) + args.decode
    if limit is not None and longest > limit:
        raise BadInput(f"contexts of {longest} tokens, engine.args.max_model_len is {limit}")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
        if args.dry_run:
            from solver.dryrun import DryRun

            dry = DryRun("roofline.py")
            dry.engine(args.config, BadInput)
            dry.add(f"decode steps at batches {args.batches} x contexts {args.contexts}, {args.decode} tokens each "
                    f"(those past the KV cache left out); prefill up to {max(args.batches) * sum(args.contexts)} "
                    "tokens, timed apart")
            if args.profile:
                dry.add(f"profile {args.profile_steps} steps at {', '.join(f'{b}x{c}' for b, c in args.profile)}")
            return dry.print()
    except BadInput as exc:
        print(f"roofline.py: error: {exc}", file=sys.stderr)
        return 2
    if not args.gpu:
        for key, value in args.config.engine.env.items():
            os.environ.setdefault(key, str(value))
    bandwidth = measure_bandwidth()
    out = asyncio.run(run(args, bandwidth))
    if args.json is not None:
        atomic_write(args.json, json.dumps(out, indent=1))
    if args.plot is not None and out["rows"]:
        plot(out, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())

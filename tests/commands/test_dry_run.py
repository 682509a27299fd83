"""``--dry-run`` (solver/dryrun/plan.py): a command parsed, planned and checked as written, nothing started and
nothing written; what only the GPU machine has is named as skipped, a missing file of the checkout is bad input,
and the layout is checked against the GPUs this process sees. Every GPU command of the READMEs is dry-run by
tests/test_readme_gpu_commands.py; here, what a dry run must refuse."""

from __future__ import annotations

import runpy
import os
import subprocess

import pytest

from conftest import ROOT, solver_cmd

RUN = {"cwd": ROOT, "capture_output": True, "text": True, "timeout": 120}


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Triton" not in line]
    assert done.returncode == 2 and len(lines) == 1, done.stdout + done.stderr
    return lines[0]


def test_a_sweep_on_more_engines_than_gpus_is_refused_before_anything_starts(tmp_path):
    out = tmp_path / "sweep"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    done = subprocess.run(solver_cmd("sweep", "benchmarks/data/aimo3_rehearsal.csv", "--preset", "h100-gptoss",
                                     "--reps", "8", "--workers", "8", "--cluster", "local:4", "--out", str(out),
                                     "--dry-run"), env=env, **RUN)
    assert "4 engine actors x 1 GPUs each do not fit the cluster's 2 GPUs" in one_line_error(done)
    env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    done = subprocess.run(solver_cmd("sweep", "benchmarks/data/aimo3_rehearsal.csv", "--preset", "h100-gptoss",
                                     "--reps", "8", "--workers", "8", "--cluster", "local:4", "--out", str(out),
                                     "--dry-run"), env=env, **RUN)
    assert done.returncode == 0, done.stderr
    assert "dry run: plan: --cluster local:4: 4 engine actors of 1 GPU on the 4 GPUs visible (0,1,2,3)" in done.stdout
    assert not out.exists()  # nothing written


def test_a_kaggle_rehearsal_dry_run_checks_every_name_and_writes_nothing(tmp_path):
    pytest.importorskip("vllm")  # the predictor's check of sampling.extra is vLLM's own (hidden in the fast tier)
    out = tmp_path / "rehearsal"
    args = ("kaggle-local", "benchmarks/data/aimo3_rehearsal.csv", "--preset", "h100-gptoss", "--model",
            "/nowhere/dummy-gptoss-120b", "--time-limit", "470", "--out", str(out), "--dry-run")
    done = subprocess.run(solver_cmd(*args), **RUN)
    assert done.returncode == 0, done.stderr
    assert "dry run: skipped: --model /nowhere/dummy-gptoss-120b: not on this machine" in done.stdout
    assert not out.exists()
    done = subprocess.run(solver_cmd(*args, "--stopper", "sometimes"), **RUN)
    assert "sometimes" in one_line_error(done)


def test_a_missing_file_of_the_checkout_is_bad_input_but_the_gpu_machines_own_is_skipped(capsys):
    from solver.cli import main  # benchmarks/day.py is `solver day`

    missing = ROOT / "benchmarks" / "data" / "none.jsonl.xz"
    assert main(["day", "--attempts-file", str(missing), "--estimate", "--dry-run"]) == 2
    error = capsys.readouterr().err
    assert "--attempts-file: no file or folder benchmarks/data/none.jsonl.xz in this checkout" in error
    assert main(["day", "--attempts-file", "/nowhere/slice.jsonl.xz", "--estimate", "--dry-run"]) == 0
    assert "dry run: skipped: --attempts-file /nowhere/slice.jsonl.xz: not on this machine" in capsys.readouterr().out


def test_an_engine_wider_than_the_gpus_visible_is_refused(capsys, monkeypatch):
    pressure = runpy.run_path(str(ROOT / "benchmarks" / "pressure.py"), run_name="pressure")  # the script, loaded
    args = ["--preset", "h100", "--model", "/nowhere/m", "--set", "engine.args.tensor_parallel_size=2", "--dry-run"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert pressure["main"](args) == 2
    assert "one engine spans 2 GPUs (tensor x pipeline x data parallel); 1 visible" in capsys.readouterr().err
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert pressure["main"](args) == 0
    assert "dry run: plan: GPUs: the engine spans 2 of the 2 visible (0,1)" in capsys.readouterr().out


def test_a_misspelt_engine_argument_is_one_line_with_the_nearest_name_before_anything_starts(capsys, monkeypatch):
    from solver.cli import main  # benchmarks/day.py is `solver day`

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    day = ["day", "--gpu", "--model", "/nowhere/gpt-oss-120b", "--attempts-file", "/nowhere/slice.jsonl.xz",
           "--estimate", "--dry-run"]
    assert main([*day, "--set", "engine.args.jit_monitor_verbos=true"]) == 2  # a GPU preset: the GPU kit's vLLM
    assert capsys.readouterr().err.strip() == ("solver: error: engine.args.jit_monitor_verbos: not an engine "
                                               "argument of vLLM 0.26.0 (nearest: 'jit_monitor_verbose')")
    assert main([*day, "--set", "engine.args.jit_monitor_verbose=true"]) == 0
    assert "dry run: plan: engine.args: 8 names, all vLLM 0.26.0's" in capsys.readouterr().out
    serve = ["serve", "--preset", "t4x2", "--model", "/nowhere/m", "--dry-run", "--", "--tensor-parallel-size", "1"]
    assert main([*serve[:-3], "--set", "engine.args.tensor_paralel_size=1"]) == 2
    assert "engine.args.tensor_paralel_size: not an engine argument of vLLM 0.26.0 (nearest: " \
           "'tensor_parallel_size')" in capsys.readouterr().err
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert main(serve) == 0  # docs/serving.md's: one server a GPU, each with the flags after --
    assert "dry run: plan: server on port 8001, GPUs 1: " in capsys.readouterr().out
    pressure = runpy.run_path(str(ROOT / "benchmarks" / "pressure.py"), run_name="pressure")
    assert pressure["main"](["--preset", "h100", "--set", "engine.args.max_num_seq=8", "--dry-run"]) == 2
    assert "engine.args.max_num_seq: not an engine argument of vLLM 0.26.0 (nearest: 'max_num_seqs')" in (
        capsys.readouterr().err)


def test_the_cpu_engine_is_checked_against_the_vllm_installed_here(capsys, monkeypatch):
    vllm = pytest.importorskip("vllm")  # the CPU build: hidden in the fast tier, where its names are skipped
    from solver.cli import main

    monkeypatch.chdir(ROOT)
    day = ["day", "--attempts-file", "/nowhere/slice.jsonl.xz", "--estimate", "--dry-run"]  # the tiny CPU engine
    assert main(day) == 0
    assert f"engine.args: 10 names, all vLLM {vllm.__version__}'s" in capsys.readouterr().out
    assert main([*day, "--set", "engine.args.enforce_eagr=true"]) == 2
    assert capsys.readouterr().err.strip() == (f"solver: error: engine.args.enforce_eagr: not an engine argument of "
                                               f"vLLM {vllm.__version__} (nearest: 'enforce_eager')")


def test_the_gpu_kits_engine_arguments_are_its_wheels_and_take_every_gpu_presets(capsys):
    from solver.config.loading import load_preset, presets
    from solver.engines.engine_args import DATA, GPU_KIT_VLLM, cpu_engine, gpu_kit_args

    header = [line for line in DATA.read_text().splitlines() if line.startswith("#")]
    assert f"vllm-{GPU_KIT_VLLM}-" in header[1] and "sha256" in header[1]  # its source, named
    assert any(f"pip download vllm=={GPU_KIT_VLLM} --no-deps" in line for line in header)  # and how it was made
    assert any("scripts/vllm_engine_args.py" in line for line in header)
    known = gpu_kit_args()
    assert {"model", "max_num_seqs", "kv_cache_dtype", "enable_log_requests"} <= known.names  # both classes'
    for name in presets():
        engine = load_preset(name).get("engine") or {}
        if not cpu_engine(engine.get("env") or {}):
            assert known.refused(engine.get("args") or {}) is None, name  # names and values
            assert known.unknown_sampling((load_preset(name).get("sampling") or {}).get("extra") or {}) is None
    assert known.rules["moe_backend"].choices[0] == "auto" and "marlin" in known.rules["moe_backend"].choices
    assert known.rules["max_num_seqs"].bounds == (("ge", 1.0),) and known.flags["-tp"] == "tensor_parallel_size"


def test_the_help_lists_every_preset():
    from solver.config.loading import presets
    from solver.commands.common import preset_list

    done = subprocess.run(solver_cmd("compile-cache", "build", "--help"), **RUN)
    shown = " ".join(done.stdout.split())
    assert preset_list() in shown and "tiny (CPU)" in shown
    assert all(name in preset_list().split(", ") or f"{name} (CPU)" in preset_list() for name in presets())
    assert "h100-gptoss" in shown


def test_the_installed_vllms_names_read_from_its_source_are_its_engine_arguments():
    pytest.importorskip("vllm")  # the CPU build: hidden in the fast tier
    import dataclasses

    import vllm
    from vllm.engine.arg_utils import AsyncEngineArgs

    from solver.engines.engine_args import installed_args

    known = installed_args()
    assert known is not None and known.version == vllm.__version__
    assert known.names == {f.name for f in dataclasses.fields(AsyncEngineArgs)}


def test_the_installed_vllms_rules_read_from_its_source_are_what_it_refuses():
    """The closed sets and bounds read from the installed vLLM's sources (``installed_args``) against vLLM itself:
    the same choices as its ``Literal`` types, its pydantic config classes refusing what the rules refuse (and the
    one line ``config_refusal`` makes of it), and its server's parser taking exactly the flags read."""
    pytest.importorskip("vllm")  # the CPU build: hidden in the fast tier
    import typing

    from pydantic import ValidationError
    from vllm.config.cache import CacheConfig, CacheDType
    from vllm.config.kernel import MoEBackend
    from vllm.config.model import ModelDType
    from vllm.config.scheduler import SchedulerConfig

    from solver.engines.engine_args import installed_args
    from solver.engines.vllm_compat import config_refusal

    known = installed_args()
    assert known is not None
    for name, literal in (("kv_cache_dtype", CacheDType), ("moe_backend", MoEBackend), ("dtype", ModelDType)):
        assert set(known.rules[name].choices) == set(typing.get_args(literal)), name
    assert known.rules["kv_cache_dtype"].problem("fp9") is not None and known.rules["max_num_seqs"].problem(-4)
    with pytest.raises(ValidationError) as refused:
        CacheConfig(cache_dtype="fp9")
    assert config_refusal(refused.value).startswith("CacheConfig.cache_dtype: Input should be ")
    with pytest.raises(ValidationError) as refused:
        SchedulerConfig(max_num_seqs=-4, max_model_len=2048, is_encoder_decoder=False)
    assert config_refusal(refused.value) == ("SchedulerConfig.max_num_seqs: Input should be greater than or equal to "
                                             "1 (got -4)")
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    except ImportError:  # before 0.32
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    real = {flag: action.dest for flag, action in parser._option_string_actions.items()
            if flag not in ("-h", "--help") and not (flag.startswith("--no-") and flag not in known.flags)}
    assert real == dict(known.flags)


def test_a_solve_dry_run_checks_the_run_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """``solve --dry-run``: the same checks as the run makes before it writes (``prepare_run``), then the plan;
    RUN_DIR is not made. (A GPU preset's is in docs/bad-input.md's table: without --model it is refused.)"""
    from solver.cli import main

    monkeypatch.chdir(ROOT)
    out = tmp_path / "run"
    replay = ["solve", "--engine", "replay", "--from", "tests/data/replay_run", "--out", str(out), "--dry-run"]
    assert main(replay) == 0
    shown = capsys.readouterr().out
    assert "dry run: plan: 6 problems, at most 4 repetitions each, stopped by " in shown
    assert "on the replay engine; output " in shown
    assert not out.exists()
    assert main([*replay, "--set", "engine.replay_timing=model"]) == 2  # what the run refuses, the dry run does
    assert "engine.replay_timing model needs engine.time_model" in capsys.readouterr().err

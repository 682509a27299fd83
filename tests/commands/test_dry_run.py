"""``--dry-run`` (solver/commands/dryrun.py): a command parsed, planned and checked as written, nothing started and
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

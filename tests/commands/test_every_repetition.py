"""One spelling for "run every repetition": ``--stopper none``, taken alike by the commands that run a policy
(solve, kaggle-local) and by those that search policies (simulate, tune): solver.config.stopper_set is the one
rule. Through the real CLI, in its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

RECORDED = ROOT / "tests" / "data" / "eval_sweep" / "runs" / "T0.8-tir-w2"  # demo-01: 42 x 4 recorded


def solver(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "solver", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_solve_runs_every_repetition_with_stopper_none(tmp_path: Path) -> None:
    """The recorded problem's four agreeing repetitions: agree:2 stops at two, none runs all four."""
    for stopper, reps, reason in (("agree:2", 2, "agree:2"), ("none", 4, "max_reps")):
        out = tmp_path / stopper.replace(":", "-")
        done = solver("solve", "--engine", "replay", "--from", str(RECORDED), "--limit", "1", "--stopper", stopper,
                      "--out", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        row = next(line for line in done.stdout.splitlines() if line.startswith("| demo-01 "))
        assert f"| {reps} | {reason} |" in row, row
    assert yaml.safe_load((tmp_path / "none" / "config.yaml").read_text())["stop"]["stoppers"] == []


def test_kaggle_local_takes_the_same_spelling(tmp_path: Path) -> None:
    pytest.importorskip("vllm")  # its dry run checks sampling.extra with vLLM's own
    done = solver("kaggle-local", "demo", "--dry-run", "--stopper", "none", "--out", str(tmp_path / "r"),
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_flag_says_it_in_every_commands_help(tmp_path: Path) -> None:
    for command in ("solve", "kaggle-local", "simulate", "tune"):
        done = solver(command, "--help", cwd=tmp_path)
        assert "'none' = run every repetition" in " ".join(done.stdout.split()), command

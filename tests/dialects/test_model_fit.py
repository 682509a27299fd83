"""A preset whose dialect does not fit the model is refused in one line, naming the preset to use
(solver/dialects/fit.py): gpt-oss speaks harmony, and fed the fences dialect of ``h100`` it would run and never make
a real tool call. Checked on a gpt-oss ``config.json`` (the dummy gpt-oss-120b folder of ../shared: no weights),
through the real CLI in its own process (a dry run and a real start) and through the Kaggle predictor the notebook
builds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


@pytest.fixture
def gptoss(dummy_gptoss: Path) -> Path:
    return dummy_gptoss


def solver(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "solver", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def refused(done: subprocess.CompletedProcess[str], preset: str) -> str:
    """The one error line of a refusal (exit 2), which names the wrong preset and the one to use."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"preset {preset}" in lines[0] and "use preset h100-gptoss" in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("preset", ["h100", "t4x2", "qwen3"])
def test_a_dry_run_refuses_a_preset_whose_dialect_does_not_fit_gpt_oss(gptoss: Path, preset: str,
                                                                      tmp_path: Path) -> None:
    pytest.importorskip("vllm")  # kaggle-local's dry run checks sampling.extra with vLLM's own (hidden in the fast tier)
    line = refused(solver("kaggle-local", "demo", "--dry-run", "--preset", preset, "--model", str(gptoss),
                          "--out", str(tmp_path / "rehearsal"), cwd=tmp_path), preset)
    assert "config.json model_type gpt_oss" in line and "harmony" in line
    assert not (tmp_path / "rehearsal").exists()


def test_the_dry_run_of_the_gpt_oss_preset_passes(gptoss: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    done = solver("kaggle-local", "demo", "--dry-run", "--preset", "h100-gptoss", "--model", str(gptoss),
                  "--out", str(tmp_path / "rehearsal"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "parsed and checked; nothing started" in done.stdout and f"model: {gptoss}" in done.stdout


def test_a_hub_id_is_told_by_its_name(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    line = refused(solver("kaggle-local", "demo", "--dry-run", "--preset", "h100", "--model", "openai/gpt-oss-120b",
                          "--out", str(tmp_path / "r"), cwd=tmp_path), "h100")
    assert line.startswith("solver: error: openai/gpt-oss-120b is a gpt-oss model (its name)")


def test_a_real_start_refuses_it_before_anything_is_written(gptoss: Path, tmp_path: Path) -> None:
    done = solver("solve", "demo", "--preset", "h100", "--model", str(gptoss), "--out", str(tmp_path / "run"),
                  cwd=tmp_path)
    refused(done, "h100")
    assert not (tmp_path / "run").exists()


def test_the_notebooks_predictor_refuses_it_before_any_model_loads(gptoss: Path) -> None:
    from solver.config import ConfigError, load_config
    from solver.kaggle import KagglePredictor

    with pytest.raises(ConfigError, match="use preset h100-gptoss"):
        KagglePredictor(load_config("h100", overrides={"engine.model": str(gptoss)}), "aimo3")

"""solver/config/schema.py: null overrides (``--set KEY=null``) clear nullable keys and are refused for the rest."""

import argparse

import pytest

from solver.commands.common import config_from_args
from solver.config import ConfigError, load_config


def _args(*sets: str, preset: str = "tiny") -> argparse.Namespace:
    return argparse.Namespace(overrides=list(sets), preset=preset, config_file=None)


@pytest.mark.parametrize("preset,key,section,field", [
    ("h100", "budget.total_s", "budget", "total_s"),
    ("l4x4", "answers.modulus", "answers", "modulus"),
    ("h100", "sampling.logprobs", "sampling", "logprobs"),
])
def test_set_null_clears_a_nullable_key_the_preset_sets(preset, key, section, field):
    assert getattr(getattr(load_config(preset), section), field) is not None  # the preset sets it
    config = config_from_args(_args(f"{key}=null", preset=preset))
    assert getattr(getattr(config, section), field) is None
    # ``~`` is YAML's other spelling of null
    assert getattr(getattr(config_from_args(_args(f"{key}=~", preset=preset)), section), field) is None


@pytest.mark.parametrize("key", ["solve.reps", "sampling.temperature", "engine.endpoints", "budget",
                                 "prompt.dialect", "sandbox.namespaces"])
def test_set_null_on_a_key_that_cannot_be_null_is_one_line(key):
    with pytest.raises(ConfigError) as caught:
        config_from_args(_args(f"{key}=null"))
    message = str(caught.value)
    assert message == f"{key} cannot be null (only keys documented as 'or null' can)"


def test_unset_flags_still_set_nothing():
    """Flags the user left out must not reach load_config as None (they would now clear or be refused)."""
    args = _args()
    for name in ("model", "engine", "endpoint", "replay_from", "reps", "workers", "parallel_problems",
                 "max_tokens", "temperature", "seed", "voter", "stopper"):
        setattr(args, name, None)
    assert config_from_args(args) == load_config("tiny")


def test_null_inside_a_passthrough_map_is_kept_for_the_engine():
    config = load_config("tiny", overrides={"engine.args.quantization": None})
    assert config.engine.args["quantization"] is None


def test_cli_null_for_a_non_nullable_key_exits_2_with_one_line_and_no_run_dir(tmp_path):
    import subprocess
    import sys

    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "solver", "solve", "demo", "--set", "solve.reps=null",
                           "--out", str(run)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not run.exists()
    assert done.stderr.strip() == "solver: error: solve.reps cannot be null (only keys documented as 'or null' can)"


def test_the_gpu_flags_are_parsed_in_one_place_and_resolve_one_way():
    """--gpu, --preset, --model and --set come from solver.config.loading's one block; no script or command adds
    --gpu itself but moe_numerics.py, whose --gpu calls CUDA kernels and picks no preset (loading's GPU flags)."""
    import re
    from pathlib import Path

    from solver.config import add_gpu_arguments, gpu_config

    root = Path(__file__).resolve().parents[1]
    copies = sorted(str(p.relative_to(root)) for d in ("benchmarks", "solver") for p in (root / d).rglob("*.py")
                    if re.search(r"add_argument\(\s*\"--gpu\"", p.read_text()))
    assert copies == ["benchmarks/moe_numerics.py", "solver/config/loading.py"]
    parser = argparse.ArgumentParser()
    add_gpu_arguments(parser)
    cpu = gpu_config(parser.parse_args([]))
    assert cpu == load_config("tiny")  # a CPU run: the tiny preset and its embedded model, as they are
    chosen = gpu_config(parser.parse_args(["--preset", "h100-gptoss", "--model", "/m", "--set", "engine.model=/x"]))
    assert chosen.engine.model == "/m"  # --model is engine.model, over --set

"""Presets as data: each one's time budget gives every problem of a full set its floor and ends by the cutoff;
multi-GPU presets' tensor and data parallel sizes reach vLLM's engine arguments unchanged, and the cluster sizes
actors by the GPUs one engine spans."""

from __future__ import annotations

from pathlib import Path

import pytest

from doubles import FakeClock
from solver.cluster.spec import ClusterSpec, actor_count
from solver.config import Layout, load_config
from solver.core.budget import BudgetManager

PRESETS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "solver" / "presets").glob("*.yaml"))
UNBUDGETED = {"tiny", "h100x2"}  # CPU runs and validation on two H100s have no time budget (their presets say so)


def test_the_presets_are_the_ones_this_module_knows() -> None:
    assert set(PRESETS) == {"h100", "h100-gptoss", "h100x2", "l4x4", "qwen3", "t4x2", "tiny"}


@pytest.mark.parametrize("preset", PRESETS)
def test_a_presets_budget_gives_every_problem_its_floor_and_ends_by_the_cutoff(preset: str) -> None:
    """The worst case: every problem uses all the time it is given, one after another, for the preset's whole set."""
    config = load_config(preset).budget
    clock = FakeClock(0.0)
    budget = BudgetManager(config, clock)
    if preset in UNBUDGETED:
        assert (config.total_s, budget.cutoff, budget.next_deadline()) == (None, None, None)
        return
    given = []
    for _ in range(config.problems):
        deadline = budget.next_deadline()
        assert deadline is not None
        given.append(deadline - clock.now())
        clock.advance(given[-1])
        budget.finish_problem()
    assert min(given) >= config.min_s and max(given) <= config.max_s, given
    assert given[0] == config.max_s  # a fresh run's first problem gets the most a problem may have
    assert budget.cutoff is not None and clock.now() <= budget.cutoff <= config.total_s


@pytest.mark.parametrize("preset, tp, dp, gpus, batch", [
    ("l4x4", 4, 1, 4, 64),      # one engine over Kaggle's four L4s
    ("h100x2", 1, 2, 2, 256),   # one engine core per H100, vLLM balancing requests between them
    ("t4x2", 2, 1, 2, 64),
    ("h100", 1, 1, 1, 128),
])
def test_parallel_sizes_pass_through_to_vllm(preset, tp, dp, gpus, batch):
    pytest.importorskip("vllm")  # the arguments are vLLM's own AsyncEngineArgs
    from solver.engines.vllm_async import engine_args

    config = load_config(preset)
    args = engine_args(config, "/models/any")  # builds AsyncEngineArgs; loads nothing
    assert (args.tensor_parallel_size, args.data_parallel_size) == (tp, dp)
    layout = Layout.of(config.engine.args)
    assert (layout.engine_gpus, layout.batch) == (gpus, batch)


def test_actor_count_follows_the_gpus_one_engine_spans():
    l4x4 = Layout.of(load_config("l4x4").engine.args)
    assert actor_count(ClusterSpec("auto"), 8.0, l4x4) == 2  # two 4-GPU tensor-parallel engines on 8 GPUs
    assert actor_count(ClusterSpec("auto", actors=1), 8.0, l4x4) == 1

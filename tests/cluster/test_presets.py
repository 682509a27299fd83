"""Multi-GPU presets: tensor and data parallel sizes reach vLLM's engine arguments unchanged, and the cluster
sizes actors by the GPUs one engine spans."""

from __future__ import annotations

import pytest

from solver.cluster.spec import ClusterSpec, actor_count, engine_batch, gpus_per_engine
from solver.config import load_config


@pytest.mark.parametrize("preset, tp, dp, gpus, batch", [
    ("l4x4", 4, 1, 4, 64),      # one engine over Kaggle's four L4s
    ("h100x2", 1, 2, 2, 256),   # one engine core per H100, vLLM balancing requests between them
    ("t4x2", 2, 1, 2, 64),
    ("h100", 1, 1, 1, 128),
])
def test_parallel_sizes_pass_through_to_vllm(preset, tp, dp, gpus, batch):
    from solver.engines.vllm_async import engine_args

    config = load_config(preset)
    args = engine_args(config, "/models/any")  # builds AsyncEngineArgs; loads nothing
    assert (args.tensor_parallel_size, args.data_parallel_size) == (tp, dp)
    assert gpus_per_engine(config.engine.args) == gpus
    assert engine_batch(config.engine.args) == batch


def test_actor_count_follows_the_gpus_one_engine_spans():
    l4x4 = gpus_per_engine(load_config("l4x4").engine.args)
    assert actor_count(ClusterSpec("auto"), 8.0, l4x4) == 2  # two 4-GPU tensor-parallel engines on 8 GPUs
    assert actor_count(ClusterSpec("auto", actors=1), 8.0, l4x4) == 1

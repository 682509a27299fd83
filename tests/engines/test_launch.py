"""solver/engines/launch.py: how many GPUs each ``solver serve`` server gets (pure planning, no process)."""

from __future__ import annotations

import pytest

from solver.config import Layout, load_config
from solver.engines.launch import plan_servers


def test_h100x2_data_parallel_server_gets_both_gpus():
    """h100x2 runs one data-parallel-2 engine: one server spanning GPUs 0 and 1, not two servers of one GPU."""
    config = load_config("h100x2")
    assert config.engine.args["data_parallel_size"] == 2
    specs = plan_servers(config, "m", servers=None, gpus=["0", "1"])
    assert [(s.port, s.devices) for s in specs] == [(8000, "0,1")]
    # four GPUs hold two such servers
    specs = plan_servers(config, "m", servers=None, gpus=["0", "1", "2", "3"])
    assert [(s.port, s.devices) for s in specs] == [(8000, "0,1"), (8001, "2,3")]


@pytest.mark.parametrize("args,extra,gpus", [
    ({}, ["-dp", "2"], 2),
    ({}, ["--data-parallel-size", "4"], 4),
    ({}, ["--data-parallel-size=2", "-tp", "2"], 4),
    ({"data_parallel_size": 2}, ["-dp", "1"], 1),  # the flags win over the config, as on the server
    ({"data_parallel_size": 2, "tensor_parallel_size": 2}, [], 4),
    ({}, ["--data-parallel-size-local", "2"], 1),  # another vLLM flag, not an abbreviation of ours
    ({"tensor_parallel_size": 2}, ["-dp", "x"], 2),  # a bad value is the server's to refuse
])
def test_a_servers_gpus_count_data_parallel_from_config_and_flags(args, extra, gpus):
    assert Layout.of(args, extra).engine_gpus == gpus
    assert len(plan_servers(load_config("tiny").replace({"engine.args": args}), "m", servers=None,
                            gpus=[str(i) for i in range(4)], extra_args=extra)) == 4 // gpus


def test_data_parallel_flags_that_do_not_fit_the_gpus_are_refused_before_anything_starts():
    from solver.engines.launch import LaunchError

    with pytest.raises(LaunchError, match=r"^2 servers need 4 GPUs at 2 each; 2 visible$"):
        plan_servers(load_config("tiny"), "m", servers=2, gpus=["0", "1"], extra_args=["-dp", "2"])

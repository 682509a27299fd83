"""One GPU layout value (``solver.config.Layout``): its two spellings (engine arguments with a server's flags, and a
name) agree, bad ones are one line, and a new layout is one entry of timing data: a ``tp2-dp2`` and a ``tp4`` added
to a time model file reach the time model, the sweep's plan (its pick and ``--layout``), the cluster's actor count
and ``solver serve``'s servers with no code change."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from conftest import ROOT, solver_cmd

from solver.cluster.spec import ClusterSpec, actor_count
from solver.config import Config, ConfigError, Layout, parse_layout
from solver.engines.launch import plan_servers
from solver.offline.sweep import fitting_layouts
from solver.timing.model import DATA_DIR, load_time_model

FIXTURE = ROOT / "tests" / "data" / "replay_run"


@pytest.mark.parametrize("text, args, extra", [
    ("one", {}, []),
    ("tp2", {"tensor_parallel_size": 2}, []),
    ("dp2", {}, ["-dp", "2"]),
    ("tp1-dp2", {"data_parallel_size": 4}, ["--data-parallel-size=2"]),  # the server's flag wins
    ("tp4-pp2", {"pipeline_parallel_size": 2}, ["--tensor-parallel-size", "4"]),
    ("tp2-dp2", {"tensor_parallel_size": 2, "data_parallel_size": 2, "dtype": "half"}, ["--max-model-len", "9"]),
])
def test_a_name_and_the_engine_arguments_spell_the_same_layout(text, args, extra):
    named, asked = parse_layout(text), Layout.of(args, extra)
    assert named == asked
    assert Layout.of(named.engine_args()) == named  # the arguments a name asks vLLM for read back as it
    assert parse_layout(named.label) == named


def test_gpus_batch_and_replicas_follow_from_the_sizes():
    layout = Layout.of({"tensor_parallel_size": 2, "data_parallel_size": 2, "max_num_seqs": 32}, replicas=3)
    assert (layout.engine_gpus, layout.gpus, layout.batch, layout.name, layout.label) == \
        (4, 12, 64, "tp2-dp2", "tp2-dp2-replicas:3")
    assert parse_layout("replicas:2") == Layout(replicas=2) and parse_layout("replicas:2").gpus == 2
    assert layout.engine == Layout(tensor=2, data=2, seqs=32) and layout.engines_on(9) == 2


@pytest.mark.parametrize("text, at_once", [("one", 1), ("tp2", 1), ("replicas:2", 1), ("dp2", 2), ("tp2-dp4", 4),
                                            ("dp2-replicas:3", 2)])
def test_each_data_parallel_rank_gets_a_problem_of_its_own(text, at_once):
    """A run in a layout solves as many problems at once per engine as it has data-parallel ranks (each rank
    batches on its own), and the config it runs with says so; the engine's arguments are the layout's."""
    layout = parse_layout(text)
    config = Config().replace(layout.run_overrides())
    assert layout.parallel_problems == at_once and config.solve.parallel_problems == at_once
    assert Layout.of(config.engine.args) == layout.engine


@pytest.mark.parametrize("text", ["tp", "tp0", "tp2-tp2", "two", "replicas:x", "tp2-", ""])
def test_a_bad_name_is_one_line(text):
    with pytest.raises(ConfigError, match="is not tpN") as caught:
        parse_layout(text)
    assert "\n" not in str(caught.value)


def test_bad_engine_arguments_are_one_line():
    with pytest.raises(ConfigError, match=r"^engine.args.data_parallel_size must be a whole number, got 'x'$"):
        Layout.of({"data_parallel_size": "x"})
    with pytest.raises(ConfigError, match=r"^layout: replicas must be a whole number >= 1, got 0$"):
        Layout(replicas=0)


@pytest.fixture
def four_gpu_model(tmp_path):
    """The shipped gpt-oss model with two layouts more, each one entry of data (the name says its GPUs)."""
    data = yaml.safe_load((DATA_DIR / "h100-gptoss.yaml").read_text())
    data["layouts"]["tp2-dp2"] = {"time_scale": 0.2, "sources": {"time_scale": "a test's figure"}}
    data["layouts"]["tp4"] = {"time_scale": 0.9, "cache_tokens": 9_000_000,
                              "sources": {"time_scale": "a test's figure", "cache_tokens": "a test's figure"}}
    path = tmp_path / "four.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_new_layout_is_one_entry_of_timing_data(four_gpu_model):
    model = load_time_model(four_gpu_model)
    tp4, both = parse_layout("tp4"), parse_layout("tp2-dp2")
    assert model.figures(tp4).gpus == 4 and model.figures(both).gpus == 4
    assert model.for_layout(tp4).cache_tokens == 9_000_000
    assert model.for_layout(both).step_s[0][1] == pytest.approx(model.step_s[0][1] * 0.2)
    assert [x.name for x in fitting_layouts(model, 2)] == ["tp1", "tp2"]
    assert [x.name for x in fitting_layouts(model, 4)] == ["tp1", "tp2", "tp2-dp2", "tp4"]
    # the config that runs it: the cluster counts its engines, serve plans its servers
    config = Config().replace(both.overrides())
    engine = Layout.of(config.engine.args)
    assert engine.name == "tp2-dp2" and actor_count(ClusterSpec("auto"), 8.0, engine) == 2
    servers = plan_servers(config, "m", servers=None, gpus=[str(i) for i in range(8)])
    assert [s.devices for s in servers] == ["0,1,2,3", "4,5,6,7"]


def plan(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(solver_cmd("sweep", "demo", "--reps", "8", "--workers", "8", "--preset", "h100-gptoss",
                                     "--out", "unused", "--plan", "--plan-from", str(FIXTURE), *flags),
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_the_sweep_plan_picks_a_new_layout_and_names_it(four_gpu_model):
    done = plan("--time-model", str(four_gpu_model), "--gpus", "4")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("plan: layout tp2-dp2 on 4 GPUs, picked among time model h100-gptoss's layouts"), \
        lines[0]
    assert "sooner than tp4 (" in lines[0] and "sooner than tp1 (" in lines[0]
    assert lines[-1] == ("plan: run it with --set engine.args.tensor_parallel_size=2 "
                         "--set engine.args.data_parallel_size=2")
    done = plan("--time-model", str(four_gpu_model), "--layout", "tp4", "--gpus", "8")
    assert done.returncode == 0, done.stderr
    assert "plan: 8 GPUs, layout tp4: 2 engines of 4 GPUs (time model h100-gptoss/tp4)" in done.stdout
    assert done.stdout.splitlines()[-1] == ("plan: 2 engines: run it with --cluster local:2 "
                                            "--set engine.args.tensor_parallel_size=4")

"""``solver sweep --plan``: how long a validation takes on G GPUs, printed before anything runs (nothing written);
``solver sweep --check``: the same estimate against measured runs. Measured here on the replay engine timed by an
engine time model (``engine.replay_timing: model``): one engine, then two engine actors on a local Ray taking
problems from one queue; the estimate plays the runs' own attempts on the same model and queue, within 10 %."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest
from conftest import ROOT, solver_cmd

from solver.timing.model import dump, load_time_model, scaled

FIXTURE = ROOT / "tests" / "data" / "replay_run"


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(solver_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_the_plan_prints_the_estimate_on_the_gpus_asked_and_writes_nothing(tmp_path):
    out = tmp_path / "sweep"
    done = run_cli("sweep", "demo", "--reps", "4,8", "--workers", "8", "--preset", "h100-gptoss", "--out", str(out),
                   "--plan", "--plan-from", str(FIXTURE), "--cluster", "local:2", "--layout", "tp2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "plan: layout tp2: --layout tp2"
    assert lines[1] == "plan: 4 GPUs, layout tp2: 2 engines of 2 GPUs (time model h100-gptoss/tp2)"
    assert "8 problems x 8 attempts, 8 in flight" in lines[2]
    assert lines[-2].startswith("plan: engine start 2 min 11 s x 1; in all ")
    assert lines[-1] == "plan: run it with --set engine.args.tensor_parallel_size=2"  # the preset's engine is tp1
    assert not out.exists()


@pytest.mark.parametrize("gpus", [2, 4])
def test_the_plan_on_g_gpus_says_which_layout_it_picks_and_why(tmp_path, gpus):
    """P problems x N attempts on G GPUs with no layout asked: every layout of the time model that fits is
    estimated; the first line names the pick and its time against each other one, the rest is the pick's plan."""
    done = run_cli("sweep", "demo", "--reps", "8", "--workers", "8", "--preset", "h100-gptoss", "--out",
                   str(tmp_path / "s"), "--plan", "--plan-from", str(FIXTURE), "--gpus", str(gpus), timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    head = (f"plan: layout tp1 on {gpus} GPUs, picked among time model h100-gptoss's layouts that fit: it ends "
            "soonest")
    assert lines[0].startswith(head), lines[0]
    assert f"(tp1: {gpus} engines of 1 GPU, each engine second x1.021)" in lines[0]
    assert "sooner than tp2 (" in lines[0] and f"tp2: {gpus // 2} engine" in lines[0]
    assert lines[1] == f"plan: {gpus} GPUs, layout tp1: {gpus} engines of 1 GPU (time model h100-gptoss/tp1)"
    assert lines[-1] == f"plan: {gpus} engines: run it with --cluster local:{gpus}"


@pytest.mark.parametrize("flags, needle", [
    (["--gpus", "1", "--layout", "tp2"], "spans 2 GPUs per engine; 1 GPU holds none"),
    (["--layout", "tp8"], "has no layout 'tp8'"),
    (["--gpus", "0"], "--gpus must be >= 1"),
])
def test_a_plan_that_cannot_be_made_is_one_line(tmp_path, flags, needle):
    done = run_cli("sweep", "demo", "--reps", "4", "--workers", "4", "--preset", "h100-gptoss", "--out",
                   str(tmp_path / "s"), "--plan", "--plan-from", str(FIXTURE), *flags, timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and needle in lines[0], done.stderr


def test_a_plan_needs_recorded_attempts(tmp_path):
    done = run_cli("sweep", "demo", "--reps", "4", "--workers", "4", "--out", str(tmp_path / "s"), "--plan",
                   timeout=60)
    assert done.returncode == 2 and "--plan needs recorded attempts: --plan-from RUN_DIR" in done.stderr


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory):
    """The tiny CPU model four times slower: problems of ~5 s, so the run's own overheads (Ray's hand-out,
    logging: tens of milliseconds a problem) are small beside what is estimated, as on a GPU where a problem takes
    minutes."""
    path = tmp_path_factory.mktemp("model") / "slow.yaml"
    # no layouts: each actor's replay engine runs the model alone, so replicas are not slowed by each other here
    path.write_text(dump(replace(scaled(load_time_model("tiny"), 4.0), name="slow", layouts=())))
    return path


# ~20 s (one engine) and ~14 s (two actors) of replayed engine time: the full suite's
@pytest.mark.parametrize("cluster", [pytest.param([], marks=pytest.mark.slow),
                                     pytest.param(["--cluster", "local:2"], marks=pytest.mark.slow)],
                         ids=["one engine", "two actors"])
def test_the_estimate_of_a_measured_run_is_within_ten_per_cent(tmp_path, slow_model, cluster):
    if cluster:
        pytest.importorskip("ray")
    run_dir = tmp_path / "run"
    done = run_cli("solve", "--engine", "replay", "--from", str(FIXTURE), "--out", str(run_dir), "--limit", "4",
                   "--set", "engine.replay_timing=model", "--set", f"engine.time_model={slow_model}",
                   "--set", "engine.replay_outputs=true", "--set", "solve.reps=4", "--set", "solve.workers=4",
                   *cluster)
    assert done.returncode == 0, done.stderr
    check = run_cli("sweep", "--check", str(run_dir), timeout=60)
    engines = "2 engines of 1 GPU" if cluster else "1 engine of 1 GPU"
    assert check.returncode == 0, check.stdout + check.stderr
    assert engines in check.stdout and "within 10%" in check.stdout, check.stdout

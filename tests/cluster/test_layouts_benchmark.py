"""benchmarks/layouts.py: its pure parts (layout names, bad input before any engine starts; the doctests of its
drivers, ``solver.measure.scaling`` and ``fleet``, run with the package's), and on the
real CPU engine the GPU sitting's scaling command in miniature: the real shape on two engine actors, then a replica's
engine killed from outside mid-run (its engine core process and any workers of it, SIGKILL): its problem re-queued to
the other actor, nothing lost, the run finished. Timing is never asserted."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys

import pytest
from conftest import ROOT

from solver.measure.shape import shape_options, shape_tool_times, shape_workload

BENCHMARKS = ROOT / "benchmarks"


def run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "benchmarks/layouts.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def layouts_main(argv: list[str]) -> int:
    """The script's ``main``, loaded as the script it is (``runpy``: the benchmarks are run, not imported)."""
    return runpy.run_path(str(BENCHMARKS / "layouts.py"), run_name="layouts")["main"](argv)


@pytest.mark.parametrize("args, needle", [
    (["scaling", "--layouts", "one,tp"], "--layouts: one, replicas:N, tpN or dpN, not 'tp'"),
    (["scaling", "--layouts", "one", "--fault", "2"], "--fault N needs N >= 2 problems"),
    (["scaling", "--layouts", "replicas:2", "--fault", "1"], "--fault N needs N >= 2 problems"),
    (["seed", "--tp", "1,x"], "--tp: comma-separated whole numbers"),
    (["load", "--sides", "both"], "--sides: serve, actors or both"),
])
def test_bad_input_is_one_line_before_any_engine(args, needle, real_attempts_path):
    done = run(*args, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and needle in lines[0], done.stderr


@pytest.mark.slow
@pytest.mark.engine  # two CPU engines side by side (~3 min on 2 cores, their start most of it)
def test_two_replicas_solve_the_real_shape_and_survive_a_killed_engine(carried_extract, tmp_path):
    """The first 2 problems x 2 attempts of the real file (an extract of just them: the parent and the layout's
    process each read it, not the whole file), each call waiting a fixed 0.05 s."""
    pytest.importorskip("ray")
    result = tmp_path / "layouts.json"
    done = run("scaling", "--layouts", "replicas:2", "--attempts-file", str(carried_extract), "--problems", "2",
               "--attempts", "2", "--attempt-tokens", "300",
               "--tool-time", "0.05", "--fault", "2", "--out", str(tmp_path / "runs"), "--json", str(result),
               timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    [row] = json.loads(result.read_text())["layouts"]
    assert row["engines"] == 2 and row["decided"] == 2 and row["deaths"] == [] and row["unsolved"] == []
    assert row["decoded"] == row["planned"]  # identical work: the plan's tokens, decoded once
    assert sorted(a["name"] for a in row["actors"]) == ["engine-0", "engine-1"]
    assert len({a["cache_root"] for a in row["actors"]}) == 2  # one vLLM cache folder each
    fault = row["fault"]
    assert fault["passed"], fault["checks"]
    assert any(k.startswith("VLLM::EngineCore") for k in fault["killed"])  # the engine, from outside
    [death] = fault["deaths"]
    assert death["actor"] == "engine-1" and "EngineDied" in death["reason"]
    assert "fault (replicas:2, 2 problems" in done.stdout and "PASSED" in done.stdout
    assert "check " in done.stdout  # the time model's prediction of the run, beside the measurement


# -- the GPU commands' argument paths, on the CPU (issue: each met first on the GPU) --


@pytest.fixture(scope="module")
def carried_extract(real_attempts_path, tmp_path_factory):
    """2 problems x 2 attempts of the real file, each request carrying 0.5 s of measured tool time, as an extract
    written with ``extract_attempts.py --measure-tools`` carries them."""
    from test_benchmarks_day import write_extract

    return write_extract(real_attempts_path, tmp_path_factory.mktemp("layouts") / "x.jsonl.xz",
                         ("aimo3-15245", "aimo3-160"), 2, 0.5)


def planned(attempts_file, tool_time: str = "auto"):
    """The scaling parent's workload: 2 problems x 2 attempts of ``attempts_file``, 300 tokens each, as the flags'
    defaults leave the rest (``add_shape_arguments``), checked and planned."""
    return shape_workload(shape_options(
        attempts_file=attempts_file, problems=2, attempts=2, problem_ids="", attempt_tokens=300, attempt_requests=None,
        tool_time=tool_time, sandbox_workers=None, contenders="b1", gpu=False, preset="h100-gptoss", model=None,
        json=None, overrides=[], dry=None))


def test_scaling_without_tool_time_takes_the_extracts_seconds(carried_extract):
    """``scaling`` with no ``--tool-time`` (the GPU command as written): the parent's tool times, read before any
    layout's process starts, are the extract's carried seconds (before: AttributeError on ``args.tool_s``)."""
    work = planned(carried_extract)
    times = shape_tool_times(work, None)
    calls = [s for rs in work.plan for r in rs for s in r.steps if s.call]
    assert work.tool_time == "carried" and work.tool_source == "carried with the extract"
    assert calls and len(times) == len(calls)
    assert set(times.values()) == {0.5}
    fixed = planned(carried_extract, "0.05")
    assert fixed.tool_time == "0.05" and fixed.tool_source == "0.05 s per call"
    assert set(shape_tool_times(fixed, None).values()) == {0.05}


def test_scaling_dry_run_runs_each_layouts_process_with_its_gpus(carried_extract, monkeypatch, capfd):
    """The scaling parent as the GPU command runs it (no ``--tool-time``, two GPUs visible), with ``--dry-run``:
    each layout's process is started as in a run, with its own GPUs, and plans its part; nothing starts."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    code = layouts_main(["scaling", "--layouts", "one,replicas:2", "--attempts-file", str(carried_extract),
                         "--problems", "2", "--attempts", "2", "--attempt-tokens", "300", "--fault", "2",
                         "--dry-run"])
    out = capfd.readouterr().out
    assert code == 0, out
    assert "layout one: one in-process engine; GPUs visible to its process: 0;" in out
    assert "layout replicas:2: 2 engine actors on a local Ray, one GPU each; GPUs visible to its process: 0,1;" in out
    assert "tool times: " in out and "layout one: predicted on time model tiny, layout tp1" in out
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert layouts_main(["scaling", "--layouts", "one,replicas:2", "--attempts-file", str(carried_extract),
                         "--problems", "2", "--attempts", "2", "--dry-run"]) == 2
    assert "layout replicas:2 needs 2 GPUs; 1 visible" in capfd.readouterr().err


def test_seed_children_each_check_only_their_own_size(monkeypatch, capfd):
    """``seed --tp 1,2`` on two GPUs: the TP1 process sees one GPU (its ``CUDA_VISIBLE_DEVICES``) and must not
    refuse the list for TP2 (before: "--tp 2 needs 2 GPUs; 1 visible", exit 2, the TP1 row lost); the parent, seeing
    two, checks the whole list."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert layouts_main(["seed", "--tp", "1,2", "--preset", "h100", "--dry-run"]) == 0
    out = capfd.readouterr().out
    assert "tp1: one engine, tensor_parallel_size 1, on GPUs 0;" in out
    assert "tp2: one engine, tensor_parallel_size 2, on GPUs 0,1;" in out
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert layouts_main(["seed", "--tp", "1,2", "--preset", "h100", "--dry-run"]) == 2
    assert "--tp 2 needs 2 GPUs; 1 visible" in capfd.readouterr().err

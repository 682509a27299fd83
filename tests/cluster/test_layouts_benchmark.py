"""benchmarks/layouts.py: its pure parts (doctests, layout names, bad input before any engine starts), and on the
real CPU engine the GPU sitting's scaling command in miniature: the real shape on two engine actors, then a replica's
engine killed from outside mid-run (its engine core process and its worker, SIGKILL): its problem re-queued to the
other actor, nothing lost, the run finished. Timing is never asserted."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys

import pytest
from conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))  # the benchmarks import each other as top-level modules


def run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "benchmarks/layouts.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_layouts_doctests_pass():
    assert doctest.testmod(importlib.import_module("layouts")).failed == 0


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
def test_two_replicas_solve_the_real_shape_and_survive_a_killed_engine(real_attempts_path, tmp_path):
    pytest.importorskip("ray")
    result = tmp_path / "layouts.json"
    done = run("scaling", "--layouts", "replicas:2", "--problems", "2", "--attempts", "2", "--attempt-tokens", "300",
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

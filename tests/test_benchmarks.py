"""The benchmarks run in CI in their quick modes: they must run to the end and print their ratios.

Timing is never asserted here (the machines are shared and noisy); the numbers are read by people, and the
recorded ones live in benchmarks/README.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(*args: str, timeout: float) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_sandbox_benchmark_quick_prints_latency_and_speedup():
    out = run_benchmark("benchmarks/sandbox.py", "--quick", timeout=300)
    assert re.search(r"median", out) and re.search(r"\d+(\.\d+)?\s*x", out), out


@pytest.mark.slow
def test_stopping_benchmark_on_a_synthetic_run_prints_every_policy():
    out = run_benchmark("benchmarks/stopping.py", "--synthetic", "--trials", "20", "--jobs", "1", timeout=300)
    assert "runs: synthetic" in out
    for policy in ("none (all 32)", "agree_rules", "agree:4", "beta", "ztest", "esc:5"):
        assert policy in out
    full = re.search(r"none \(all 32\)\s+([\d.]+)%", out)
    assert full is not None and 0 < float(full.group(1)) <= 100


def test_a_traced_engine_decodes_the_planned_tokens_then_appends_the_scripted_ending():
    """What ``benchmarks/engine.py``'s contenders share (``solver.measure.traced``), on a scripted engine: each turn
    asks the engine for exactly its planned tokens among plain words, then gets the plan's python call (a turn that
    runs code) or its answer; ``decoded`` counts what the engine generated. (The contenders on the real engine are
    started once, by ``tests/test_benchmarks_real.py``.)"""
    import asyncio
    from dataclasses import replace

    from doubles import ScriptedEngine
    from solver.measure.traced import RepetitionPlan, TracedEngine, TurnPlan, make_script
    from solver.types import GenerationRequest

    script = make_script("harmony", None)
    inner = ScriptedEngine(lambda request: " ".join(["w"] * 100))
    plan = RepetitionPlan((TurnPlan(5, 0.25), TurnPlan(3, None)), 7)
    traced = TracedEngine(inner, {("p", 0): plan}, "sleep", script)
    base = GenerationRequest("r", "prompt", None, 1000, 1.0, 1.0, 0, ("stop",), problem_id="p", repetition=0)

    async def turn(number: int) -> list:
        return [d async for d in traced.stream(replace(base, turn=number))]

    first, last = asyncio.run(turn(0)), asyncio.run(turn(1))
    forced = inner.requests[0]
    assert forced.max_tokens == 5 and forced.stop == () and forced.extra["min_tokens"] == 5
    assert forced.extra["ignore_eos"] and forced.extra["allowed_token_ids"] == list(script.words)
    assert first[-1].finish_reason == "stop" and "to=python" in first[-1].text and "time.sleep(0.250)" in first[-1].text
    assert last[-1].finish_reason == "stop" and "\\boxed{7}" in last[-1].text
    assert traced.decoded == {("p", 0): 5 + 3}


def test_engine_benchmark_refuses_unknown_contenders_before_any_engine_starts():
    done = subprocess.run([sys.executable, "benchmarks/engine.py", "--contenders", "b,x"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert "--contenders: choose among b, b1, bs, c" in done.stderr


@pytest.mark.slow
@pytest.mark.engine
def test_load_benchmark_quick_prints_percentiles_and_tokens_per_s_per_endpoint(served):
    # Against the session's running server: the servers the benchmark starts itself come from the launcher that
    # `solver serve` and benchmarks/real_shape.py's (s) use too (tests/engines, tests/test_benchmarks_real.py).
    out = run_benchmark("benchmarks/load.py", "--quick", "--endpoint", served, timeout=600)
    assert "p50 ms" in out and "p95 ms" in out and "p99 ms" in out and "tok/s" in out, out
    rows = re.findall(r"^(http://127\.0\.0\.1:\d+|all)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+(\d+)"
                      r"\s+([\d.]+)$", out, re.M)
    assert [r[0] for r in rows][-1] == "all" and len(rows) == 2, out
    for _, done, failed, cut, p50, p95, p99, tokens, tps in rows:
        assert (int(done), int(failed), int(cut), int(tokens)) == (8, 0, 0, 8 * 16)  # ignore_eos: 16 each
        assert 0 < int(p50) <= int(p95) <= int(p99) and float(tps) > 0


@pytest.mark.parametrize("args,message", [
    (["--endpoint", "http://10.0.0.5:8000"], "is not on loopback"),
    (["--requests", "0"], "--requests must be >= 1"),
    (["--duration", "0"], "--duration must be > 0"),
])
def test_load_benchmark_bad_input_is_one_line_and_exit_2_before_any_server_starts(args, message):
    done = subprocess.run([sys.executable, "benchmarks/load.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr

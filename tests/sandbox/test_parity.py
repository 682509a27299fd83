"""Jupyter parity on real attempts: a fixed sample of the recorded gpt-oss-120b attempts replayed through the
h100-gptoss preset's sandbox (IPython's shell, the harness's starter cell) shows the model the text the recording
harness's kernel showed it. Read from ../shared at run time (skipped with one line without it), never copied."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import sys
from pathlib import Path

import pytest

from solver.config import load_config
from solver.dialects.output import OutputStyle

ROOT = Path(__file__).resolve().parents[2]
# Chosen by reference (problem id : attempt index in file order) from a run of benchmarks/sandbox_parity.py at the
# harness's 120 s limit (40 attempts): attempts whose every call showed the recorded text and took under 0.2 s here,
# 155 calls with definitions, pretty-printed values, 3 tracebacks, a syntax error and 5 empty outputs among them.
SAMPLE = ("aimo3-15245:8", "aimo3-q10-g265710644-g44636594:2", "aimo3-q10-g4M-g44636594:0", "aimo3-21818:11",
          "aimo3-21818:20", "aimo3-q10-g4M:5", "imo-2011-sl-c1-n6:1")
TARGET = 0.98


@functools.cache
def parity_module():
    """benchmarks/sandbox_parity.py, loaded by path (registered first: its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location("sandbox_parity", ROOT / "benchmarks" / "sandbox_parity.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_sample_of_real_attempts_replays_with_the_kernels_text(real_attempts):
    parity = parity_module()
    config = load_config("h100-gptoss")
    chosen = [(name, parity.attempt_calls(attempt)) for name, attempt in parity.select(real_attempts, None, SAMPLE)]
    results = asyncio.run(parity.run(chosen, config.sandbox, OutputStyle.from_config(config.prompt), 2,
                                     parity.HARNESS_TIMEOUT_S))
    summary = parity.summarise(results)
    assert summary.calls == sum(len(calls) for _name, calls in chosen) == 155
    differences = {name: [(o.call.index, o.shown[:200], o.call.recorded[:200]) for o in found]
                   for name, found in summary.families.items()}
    assert summary.share >= TARGET, differences
    assert "timeout" not in summary.families  # quick calls: none near the limit


def test_calls_are_read_from_the_recorded_tokens_as_the_harness_read_them(real_attempts):
    parity = parity_module()
    (name, attempt), = parity.select(real_attempts, None, SAMPLE[:1])
    calls = parity.attempt_calls(attempt)
    assert len(calls) == sum(r.tool_output is not None for r in attempt.requests)
    assert all(call.code.strip() for call in calls)  # the harness ran a call only when it had code
    assert [call.index for call in calls] == list(range(len(calls)))


@pytest.mark.parametrize("count", [1, 7, 328])
def test_attempts_spread_over_the_file_are_distinct(real_attempts, count):
    parity = parity_module()
    chosen = parity.select(real_attempts, count, ())
    assert len({name for name, _attempt in chosen}) == len(chosen) == count

"""The session benchmark runs in CI in its quick mode (~10 s): it must run to the end, find both ways printing
the same thing at every call, and print its ratios. Timing is never asserted (the machines are shared)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_session_benchmark_quick_prints_latencies_and_ratios() -> None:
    done = subprocess.run([sys.executable, "benchmarks/sessions.py", "--quick"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "outputs: identical at every call in both modes" in out
    for mode in ("stateful", "accumulate"):
        assert re.search(rf"^{mode}\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+$", out, re.MULTILINE), out
    assert re.search(r"call 1: [\d.]+x, call 8: [\d.]+x, call 32: [\d.]+x, repetition: [\d.]+x", out), out


def test_session_benchmark_refuses_bad_arguments() -> None:
    done = subprocess.run([sys.executable, "benchmarks/sessions.py", "--calls", "8"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--calls >= 32" in done.stderr

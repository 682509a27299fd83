"""benchmarks/cluster.py runs to the end in its quick mode and prints both contenders and their ratio (no timing
is asserted: the numbers are read by people, see benchmarks/README.md).

Both contenders, in process and on a Ray actor, solve against the session's running ``solver serve`` endpoint
(``served``): what the benchmark measures is the path around the engine, the same for any engine, and the real
engine inside a Ray actor is test_cluster_engine.py's."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

pytest.importorskip("ray")


@pytest.mark.slow
@pytest.mark.engine
def test_cluster_benchmark_quick_prints_both_contenders_and_the_ratio(served):
    done = subprocess.run([sys.executable, "benchmarks/cluster.py", "--quick", "--set", "engine.name=openai",
                           "--set", f"engine.endpoints=[{served}]"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(a) in process" in done.stdout and "(b) Ray actor" in done.stdout
    assert re.search(r"ratio \(b\)/\(a\) = \d", done.stdout), done.stdout

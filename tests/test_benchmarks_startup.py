"""The start-up and memory-pressure benchmarks: bad input fails in one line before an engine starts; on the real
CPU engine a trial times the start and reads vLLM's log (marker ``engine``). Timing is never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["benchmarks/startup.py", "benchmarks/pressure.py"])
def test_a_bad_setting_fails_in_one_line_with_exit_2(script: str) -> None:
    done = subprocess.run([sys.executable, script, "--preset", "tiny", "--set", "nokey"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: --set expects KEY=VALUE, got 'nokey'"]


@pytest.mark.engine
def test_a_startup_trial_times_first_token_and_reads_the_kv_cache_line(tmp_path: Path) -> None:
    report = tmp_path / "startup.json"
    done = subprocess.run([sys.executable, "benchmarks/startup.py", "--preset", "tiny", "--json", str(report)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [trial] = json.loads(report.read_text())
    assert trial["name"] == "preset"
    assert 0 < trial["ready_s"] <= trial["first_token_s"]
    assert trial["log"]["kv_cache_tokens"] > 0 and trial["log"]["weights_s"] is not None
    assert "first tok" in done.stdout

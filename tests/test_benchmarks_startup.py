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


@pytest.mark.parametrize(("args", "message"), [
    (["--trials", "preset,hot"], "error: unknown trial 'hot' (choose from preset, defaults, cold, warm)"),
    (["--trials", "warm"], "error: the warm trial needs --cache-dir, or the cold trial before it"),
])
def test_bad_trials_fail_in_one_line_with_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "benchmarks/startup.py", "--preset", "tiny", *args,
                           "--log-dir", str(tmp_path / "logs")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [message]
    assert not (tmp_path / "logs").exists()  # nothing written


def test_a_cold_trial_refuses_a_cache_that_holds_files(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "x").write_text("")
    done = subprocess.run([sys.executable, "benchmarks/startup.py", "--preset", "tiny", "--compare", "--cache-dir",
                           str(tmp_path / "cache")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "needs an empty --cache-dir" in done.stderr


@pytest.mark.slow
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


def test_a_trial_past_its_limit_is_ended_with_its_process_group_and_reported(tmp_path: Path) -> None:
    pytest.importorskip("vllm")  # the trial starts vLLM's engine, ended at 1 s
    done = subprocess.run([sys.executable, "benchmarks/startup.py", "--preset", "tiny", "--timeout", "1",
                           "--log-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert f"error: trial preset ran past 1.0 s; log in {tmp_path / 'startup-preset.log'}" in done.stderr

"""``solver solve --cluster``: bad cluster input is one line and exit 2 before anything starts; a driver killed
with SIGKILL mid-run resumes with ``--resume`` on a new local Ray, keeping every logged repetition.

The command runs as a process where it starts a local Ray of its own; input it refuses, a preset's budget dropped, and an
actor that cannot start on the package's running Ray (``local_ray``), run in this process (``solver.cli.main``)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter

import pytest
from conftest import ROOT, solver_cmd

from solver.cli import main

FIXTURE = ROOT / "tests" / "data" / "replay_run"


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(solver_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("flags, needle", [
    (["--cluster", "10.0.0.1:6379"], "local:N, auto or ray://HOST:PORT"),
    (["--cluster", "local:0"], "N >= 1"),
    (["--cluster", "local:2", "--actors", "3"], "drop --actors"),
    (["--actors", "2"], "--actors needs --cluster"),
])
def test_bad_cluster_input_is_one_line_and_writes_nothing(tmp_path, capsys, flags, needle):
    out = tmp_path / "run"
    assert main(["solve", "--engine", "replay", "--from", str(FIXTURE), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert not out.exists()


def test_a_presets_time_budget_is_dropped_on_a_cluster_and_said(tmp_path, capsys, local_ray):
    out = tmp_path / "run"
    assert main(["solve", "--engine", "replay", "--from", str(FIXTURE), "--out", str(out), "--limit", "1",
                 "--set", "budget.total_s=3600", "--set", "budget.cutoff_s=3500", "--set", "sandbox.workers=1",
                 "--set", "engine.replay_time_scale=0", "--cluster", "local:1"]) == 0
    assert "a time budget is for one engine" in capsys.readouterr().err
    saved = (out / "config.yaml").read_text()
    assert "total_s: null" in saved and "cutoff_s: null" in saved


def _descendants(pid: int) -> list:
    import psutil

    return psutil.Process(pid).children(recursive=True)


@pytest.mark.slow  # a soak of Ray: two clusters started, a driver killed mid-run
def test_driver_killed_mid_run_resumes_on_a_new_cluster(tmp_path):
    pytest.importorskip("ray")
    import psutil

    out = tmp_path / "run"
    args = ["solve", "--engine", "replay", "--from", str(FIXTURE), "--out", str(out), "--cluster", "local:2",
            "--workers", "1", "--set", "engine.replay_time_scale=0.5", "--set", "sandbox.workers=1"]
    driver = subprocess.Popen(solver_cmd(*args), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    log = out / "log.jsonl"
    started = time.monotonic()
    try:
        while time.monotonic() - started < 150:
            if log.exists() and log.read_text().count('"type": "repetition"') >= 3:
                break
            assert driver.poll() is None, driver.stderr.read().decode() if driver.stderr else ""
            time.sleep(0.2)
        kept = [line for line in log.read_text().splitlines() if '"type": "repetition"' in line]
        assert len(kept) >= 3
        helpers = _descendants(driver.pid)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    # Ray's reaper ends the local cluster with its driver; its per-node agents may linger: end what is left.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                              for p in helpers):
        time.sleep(0.5)
    for process in helpers:
        if process.is_running():
            process.kill()

    done = run_cli("solve", "--resume", str(out), "--cluster", "local:2")
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    for line in kept:  # the repetitions logged before the kill are still there, unchanged
        assert line in text
    from solver.runlog import read_log

    records = read_log(out)
    assert sorted(Counter(r.problem_id for r in records.results).values()) == [1] * 6
    finished = Counter((r.problem_id, r.index) for r in records.repetitions if r.status != "cancelled")
    assert max(finished.values()) == 1
    for result in records.results:
        assert result.repetitions == len(records.finished()[result.problem_id]) == 4


def test_an_actor_that_cannot_start_is_named_with_its_reason(tmp_path, capsys, local_ray):
    out = tmp_path / "run"
    assert main(["solve", "demo", "--engine", "replay", "--from", str(tmp_path / "missing"), "--out", str(out),
                 "--cluster", "local:1"]) == 1
    err = capsys.readouterr().err
    error = [line for line in err.splitlines() if line.startswith("solver: error:")]
    assert len(error) == 1 and "actor engine-0 failed to start" in error[0] and "no run log at" in error[0]
    assert not out.exists()

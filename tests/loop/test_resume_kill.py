"""A replayed solve killed with SIGKILL at random moments and resumed 10 times loses and duplicates nothing.

The replay engine needs no model, so this runs the real command end to end (sandbox, voting, stopping, log)
in about 30 s on 2 cores (a kill and its resume cost about 3 s, most of it the command's import).
``scripts/soak_resume.py --cycles 200`` is the long version of the same check.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _soak_module():
    spec = importlib.util.spec_from_file_location("soak_resume", ROOT / "scripts" / "soak_resume.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is being built
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_sigkill_and_resume_10_times_loses_and_duplicates_nothing(tmp_path: Path):
    soak = _soak_module()
    report = soak.soak(10, tmp_path, seed=1)
    assert report.ok, report.text()
    assert report.kills == 10
    assert report.runs_completed >= 1  # at least the last interrupted run was completed and checked whole
    assert report.finished_seen > 0


def test_replayed_run_reproduces_the_recorded_answers(tmp_path: Path):
    """Without interruptions, replaying every recorded repetition gives back the recorded votes."""
    from solver.runlog import read_log

    fixture = ROOT / "tests" / "data" / "replay_run"
    proc = subprocess.run([sys.executable, "-m", "solver", "solve", "--engine", "replay", "--from", str(fixture),
                           "--out", str(tmp_path / "run"), "--reps", "8", "--workers", "4", "--set",
                           "engine.replay_time_scale=0"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    recorded = {r.problem_id: r for r in read_log(fixture).results}
    replayed = {r.problem_id: r for r in read_log(tmp_path / "run").results}
    assert sorted(replayed) == sorted(recorded)
    for pid, result in replayed.items():
        # Vote totals are the same whatever the finish order (demo-03's 8th repetition was never recorded).
        assert result.votes == recorded[pid].votes, pid
        assert result.correct == recorded[pid].correct

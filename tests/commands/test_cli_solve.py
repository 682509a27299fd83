"""`solver solve` end to end on the replay engine (recorded generations, no model): the config it records.

The config tests run the command in this process (``solver.cli.main``, what the ``solver`` script calls); the
report test runs it as a process, for what a shell sees on stdout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, solver_cmd

from solver.cli import main

FIXTURE = ROOT / "tests" / "data" / "replay_run"


def solve(out: Path, *extra: str) -> dict:
    code = main(["solve", "--engine", "replay", "--from", str(FIXTURE), "--out", str(out), "--reps", "2",
                 "--workers", "2", "--set", "engine.replay_time_scale=0", *extra])
    assert code == 0
    return yaml.safe_load((out / "config.yaml").read_text())


@pytest.mark.parametrize("preset", ["tiny", "h100"])
def test_budget_problems_follows_the_data_size_when_unset(tmp_path: Path, preset: str):
    # The h100 preset says 50 (the Kaggle set); a 2-problem run must not budget as if 48 more were coming.
    config = solve(tmp_path / "run", "--limit", "2", "--preset", preset)
    assert config["budget"]["problems"] == 2


def test_budget_problems_set_by_the_user_is_kept(tmp_path: Path):
    assert solve(tmp_path / "a", "--limit", "2", "--set", "budget.problems=7")["budget"]["problems"] == 7
    file = tmp_path / "c.yaml"
    file.write_text("budget:\n  problems: 9\n")
    assert solve(tmp_path / "b", "--limit", "2", "--config", str(file))["budget"]["problems"] == 9


def test_solve_prints_the_report_it_wrote_and_a_resume_reads_the_log_once(tmp_path: Path):
    done = subprocess.run(solver_cmd("solve", "--engine", "replay", "--from", str(FIXTURE), "--out",
                                     str(tmp_path / "run"), "--reps", "2", "--limit", "2", "--set",
                                     "engine.replay_time_scale=0"),
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "run" / "report.md").read_text()
    assert done.stdout == report + f"run directory: {tmp_path / 'run'}\n"
    assert (tmp_path / "run" / "answers.csv").read_text().startswith("id,answer\ndemo-01,")
    again = subprocess.run(solver_cmd("solve", "--resume", str(tmp_path / "run")), capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "run" / "report.md").read_text() == report  # nothing left to solve: the same records


def test_a_config_file_that_is_not_a_mapping_is_one_line_and_exit_2(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]):
    file = tmp_path / "c.yaml"
    file.write_text("- reps: 4\n")
    assert main(["solve", "demo", "--config", str(file), "--out", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()
    assert capsys.readouterr().err.strip() == (f"solver: error: config {file} must hold sections of keys (a mapping), "
                                               "not a list")

"""Accuracy reports of recorded runs: grading, groups, wrong-answer distributions, the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from data.eval_runs import Planned, build_run, planned_problems
from solver.cli import main
from solver.config import load_config
from solver.core.grading import pass_at_k, wilson_interval
from solver.runlog import load_summary, render_report, write_report
from solver.types import Problem


def small_run(run_dir: Path, *, finish: bool = True) -> Path:
    planned = [
        Planned(Problem("p1", "What is 6 times 7?", "42", {"level": "1"}), ("42", "42", "41")),
        Planned(Problem("p2", "What is 3 + 4?", "7", {"level": "1"}), ("7", "8", "8")),
        Planned(Problem("p3", "What is 2 * 3?", "6", {"level": "2"}), (None, "5", "5")),
        Planned(Problem("p4", "Unknown reference.", None, {"level": "2"}), ("3", "3", "3")),
    ]
    build_run(run_dir, load_config("tiny").replace({"solve.reps": 3, "solve.workers": 2}), planned, finish=finish)
    return run_dir


def test_summary_grades_votes_and_single_repetitions(tmp_path: Path) -> None:
    summary = load_summary(small_run(tmp_path / "run"))
    by_id = {p.problem.id: p for p in summary.problems}
    assert [p.problem.id for p in summary.problems] == ["p1", "p2", "p3", "p4"]
    assert (by_id["p1"].correct, by_id["p2"].correct, by_id["p3"].correct, by_id["p4"].correct) == (
        True, False, False, None)
    assert summary.correct == 1 and len(summary.graded) == 3
    assert by_id["p1"].rep_accuracy == pytest.approx(2 / 3)
    assert (by_id["p2"].any_correct, by_id["p3"].any_correct) == (True, False)
    assert by_id["p3"].answer_counts() == [("5", 2), (None, 1)]
    assert by_id["p3"].statuses() == {"error": 1, "done": 2}
    assert [(value, [p.problem.id for p in members]) for value, members in summary.groups["level"]] == [
        ("1", ["p1", "p2"]), ("2", ["p3", "p4"])]
    assert "subset" not in summary.groups  # one value only: not a grouping


def test_rendered_report_explains_wrong_problems(tmp_path: Path) -> None:
    text = render_report(load_summary(small_run(tmp_path / "run")))
    assert "| 4 | 3 | 1/3 = 33.3 %" in text  # problems, graded, majority accuracy
    assert "## By level" in text
    assert "### p2: reference 7, submitted 8" in text
    assert "1 of 3 repetitions were right but lost the vote" in text
    assert "### p3: reference 6, submitted 5" in text
    assert "no repetition found the reference answer" in text
    assert "| no answer | 1 |  |" in text  # the engine failure shows in the distribution
    assert "### p1" not in text and "### p4" not in text


def test_interrupted_run_lists_unfinished_problems(tmp_path: Path) -> None:
    summary = load_summary(small_run(tmp_path / "run", finish=False))
    assert all(p.result is None and p.correct is None for p in summary.problems)
    text = render_report(summary)
    assert "## Unfinished" in text and "p1, p2, p3, p4" in text
    assert "## Wrong problems" not in text


def test_report_of_a_larger_run_groups_by_topic(tmp_path: Path) -> None:
    run = tmp_path / "run"
    build_run(run, load_config("tiny").replace({"solve.reps": 8}), planned_problems(8))
    summary = load_summary(run)
    assert [value for value, _ in summary.groups["topic"]] == ["arithmetic", "counting", "number theory"]
    assert summary.problems[0].correct is True  # always right
    assert summary.problems[-1].correct is False  # never right
    assert "demo-06" in render_report(summary).split("## Wrong problems")[1]


def test_statistics_helpers() -> None:
    low, high = wilson_interval(3, 3)
    assert 0.4 < low < 0.5 and high == 1.0
    assert wilson_interval(1.5, 3)[0] < 0.5 < wilson_interval(1.5, 3)[1]  # fractional successes work
    values = [pass_at_k(10, 3, k) for k in range(1, 11)]
    assert values == sorted(values) and values[0] == pytest.approx(0.3) and values[-1] == 1.0


def test_report_command_writes_file_and_fails_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = small_run(tmp_path / "run")
    out = tmp_path / "report.md"
    assert main(["report", str(run), "--out", str(out)]) == 0
    assert out.read_text() == write_report(run)
    assert main(["report", str(run)]) == 0
    assert capsys.readouterr().out.count("# Run report: run") == 1
    assert main(["report", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("solver: error: no run log at") and err.count("\n") == 1

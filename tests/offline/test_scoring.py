"""The leaderboard as AIMO3 scores it: a day's runs and credit, the line, the run-time jitter, and what the data can
tell two settings apart by, each on a case whose answer is known by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from solver.cli import main
from solver.offline.sim import SimulationError, markdown, simulate

from offline.test_simulate import request, synthetic, write_run

# Three problems, reference 3: "split" recorded once right and once wrong, "one" once right, "wrong" twice wrong.
SPEC = {"split": ("3", ["3", "4"]), "one": ("3", ["3"]), "wrong": ("3", ["4", "4"])}


def test_the_private_rule_runs_the_same_problems_twice_with_the_seed_policys_draws(tmp_path: Path) -> None:
    """One repetition per problem and run. Under ``per-run`` seeds, "split" has both runs' draws recorded, so its two
    runs take its two repetitions, one each: exactly one run is right, 0.5 every day. "one" has a single repetition,
    which both runs draw: 1. "wrong": 0. So every private day scores 1.5, while the first run alone scores 1 or 2.
    Under ``fixed`` seeds the second run replays the first: the private day is the first run's, 1 or 2, with the
    same mean; both policies' rows are there whichever the config names."""
    run = write_run(tmp_path / "run", SPEC)
    per_run = (("sampling.seed_policy", "per-run"),)
    private = simulate(request(run, reps=(1,), workers=(1,), trials=200, scoring="aimo3-private", line=1.5,
                               overrides=per_run))
    s = private.summaries[0]
    assert set(s.scores) == {1.5} and s.p_line == 1.0 and s.runs == 2
    assert set(s.first_scores) == {1.0, 2.0} and abs(s.first_scores.mean() - 1.5) < 0.15
    assert s.first_p_line == pytest.approx(float((s.first_scores == 2).mean()))
    shares = dict(zip([p.problem.id for p in private.prepared], s.right_share))
    assert shares == {"one": 1.0, "split": 0.5, "wrong": 0.0}
    public = simulate(request(run, reps=(1,), workers=(1,), trials=200, line=1.5)).summaries[0]
    assert np.array_equal(public.scores, s.first_scores)  # the first run is the public day, draw for draw
    assert public.first is None and public.runs == 1 and public.seed_rows == ()
    fixed = simulate(request(run, reps=(1,), workers=(1,), trials=200, scoring="aimo3-private", line=1.5))
    f = fixed.summaries[0]
    assert np.array_equal(f.scores, f.first_scores) and np.array_equal(f.first_scores, s.first_scores)
    rows = {r.policy: r for r in f.seed_rows}
    assert rows == {r.policy: r for r in s.seed_rows}  # the same two rows whichever policy the config names
    assert rows["per-run"].std == 0 and rows["per-run"].p_line == 1.0
    assert rows["fixed"].std > 0 and rows["fixed"].p_line == pytest.approx(f.first_p_line)
    assert "## Seeds: the two runs alike or apart" in markdown(fixed) and "fixed (the config’s)" in markdown(fixed)


def test_the_private_runs_share_one_order_and_a_stress_order_places_the_hard_problems(tmp_path: Path) -> None:
    """AIMO3's private set is served in one fixed order for both runs (the gateway turns its shuffle off). One
    repetition of 100 s per problem, a budget that fits two: the third problem played is cut in every run. Under
    hard-first the hard problem (always wrong) takes its time and one easy one is cut: 1 right; under hard-last the
    two easy ones are played and the hard one cut: 2 right, whatever the seed policy."""
    spec = {"easy1": ("3", ["3"]), "easy2": ("3", ["3"]), "hard": ("3", ["4"])}
    run = write_run(tmp_path / "run", spec, seconds=lambda pid, i: 100.0)
    flat = (("budget.min_s", 0.0), ("budget.max_s", 100.0), ("budget.reserve_s", 0.0))
    scores = {}
    for order in ("hard-first", "hard-last", "random"):
        for policy in ("fixed", "per-run"):
            report = simulate(request(run, reps=(1,), workers=(1,), budgets=(200.0,), trials=60, order=order,
                                      scoring="aimo3-private", overrides=(*flat, ("sampling.seed_policy", policy))))
            scores[order, policy] = report.summaries[0].scores
    for policy in ("fixed", "per-run"):
        assert set(scores["hard-first", policy]) == {1.0} and set(scores["hard-last", policy]) == {2.0}
        # random: each run plays the first run's order, so both runs agree on what is cut: a whole 0, 1 or 2
        assert set(scores["random", policy]) <= {0.0, 1.0, 2.0} and len(set(scores["random", policy])) > 1
    with pytest.raises(SimulationError, match="--order must be random, hard-first, hard-last or hard-middle"):
        simulate(request(run, order="hardest"))


def test_a_rule_of_two_runs_is_the_same_whatever_the_jobs_and_the_grid(tmp_path: Path) -> None:
    run = synthetic(tmp_path / "run", [0.2, 0.5, 0.7, 0.9], reps=10)
    one = simulate(request(run, reps=(3,), trials=120, seed=4, scoring="aimo3-private")).summaries[0]
    jobs = simulate(request(run, reps=(3,), trials=120, seed=4, scoring="aimo3-private", jobs=2)).summaries[0]
    grid = simulate(request(run, reps=(1, 3, 12), trials=120, seed=4, scoring="aimo3-private")).summaries[1]
    for other in (jobs, grid):
        assert np.array_equal(one.scores, other.scores) and np.array_equal(one.first_scores, other.first_scores)
        assert one.seconds == other.seconds
    assert set(np.round(one.scores * 2)) <= set(range(0, 9)) and (one.scores % 0.5 == 0).all()


def test_the_machine_speed_scales_each_run_and_cuts_the_slow_ones(tmp_path: Path) -> None:
    """One problem a day, one repetition of 100 s, a budget of 101 s (no floor, no reserve): a run whose factor
    passes 1.01 is cut and answers the default (wrong here), one below is right. The fastest third of the range
    (factor <= 0.967) is never cut, the slowest (>= 1.033) always."""
    run = write_run(tmp_path / "run", {"p": ("3", ["3"])}, seconds=lambda pid, i: 100.0)
    flat = (("budget.min_s", 0.0), ("budget.max_s", 1000.0), ("budget.reserve_s", 0.0))
    s = simulate(request(run, reps=(1,), workers=(1,), budgets=(101.0,), trials=300, machine_speed=0.1,
                         overrides=flat)).summaries[0]
    j = s.jitter
    assert j is not None and j.fast.runs + j.slow.runs > 150
    assert (j.fast.right, j.fast.cut, j.slow.right, j.slow.cut) == (1.0, 0.0, 0.0, 1.0)
    assert 90.0 <= j.fast.seconds <= 100.0 / 1.0 * (1 - 0.1 / 3) + 1e-9 and 101.0 >= j.slow.seconds
    assert 0.3 < s.mean < 0.7  # right on the days below 1.01: about half
    steady = simulate(request(run, reps=(1,), workers=(1,), budgets=(101.0,), trials=300, overrides=flat))
    assert steady.summaries[0].jitter is None and steady.summaries[0].mean == 1.0  # no jitter: 100 s always fits


def test_without_a_budget_the_jitter_moves_the_seconds_only(tmp_path: Path) -> None:
    run = synthetic(tmp_path / "run", [0.3, 0.6, 0.8], reps=6)
    steady, jittered = (simulate(request(run, reps=(4,), workers=(2,), trials=90, machine_speed=j)).summaries[0]
                        for j in (0.0, 0.1))
    assert np.array_equal(steady.scores, jittered.scores)
    assert steady.total_std == 0 or jittered.total_std > steady.total_std
    assert jittered.seconds == pytest.approx(steady.seconds, rel=0.05)  # the factors average about 1
    assert jittered.jitter is not None and jittered.jitter.fast.seconds < jittered.jitter.slow.seconds


def test_each_setting_is_set_against_the_best_with_what_the_data_can_tell(tmp_path: Path) -> None:
    """At one cap, a lossless stop answers what every repetition answers on every draw: the same. One repetition
    against nine on problems right 70 % of the time, recorded 40 times: nine is clearly better. The same pair on 6
    recorded repetitions: the interval widens, and more recorded attempts than that would be needed."""
    rich = synthetic(tmp_path / "rich", [0.7] * 12, reps=40, seed=3)
    report = simulate(request(rich, reps=(1, 9), stoppers=((), ("lossless",)), workers=(1,), trials=200))
    by = {(s.setting.reps, s.setting.stoppers): s for s in report.summaries}
    best = next(s for s in report.summaries if s.vs_best is None)
    assert best.setting.reps == 9
    twin = by[(9, ("lossless",))] if best is by[(9, ())] else by[(9, ())]
    assert twin.vs_best is not None and twin.vs_best.verdict == "the same on every draw"
    one = by[(1, ())].vs_best
    assert one is not None and one.separable and one.mean < 0 and one.high < 0
    sparse = synthetic(tmp_path / "sparse", [0.7] * 12, reps=6, seed=3)
    thin = simulate(request(sparse, reps=(1, 9), workers=(1,), trials=200)).summaries[0].vs_best
    assert thin is not None and thin.half > one.half and not thin.separable
    assert thin.attempts is not None and thin.attempts > 6 and "recorded attempts per problem" in thin.verdict


def test_compare_pairs_rows_of_the_grid(tmp_path: Path) -> None:
    run = synthetic(tmp_path / "run", [0.4, 0.6, 0.8], reps=8)
    report = simulate(request(run, reps=(1, 3, 5), trials=60, compare=((3, 1), (2, 3))))
    (a, b) = report.comparisons
    assert (a.a, a.b, b.a, b.b) == (2, 0, 1, 2)
    s = report.summaries
    assert a.mean == pytest.approx(s[2].mean - s[0].mean) and b.mean == pytest.approx(s[1].mean - s[2].mean)
    with pytest.raises(SimulationError, match="the grid has 3 settings"):
        simulate(request(run, reps=(1, 3, 5), trials=5, compare=((1, 4),)))


def test_the_flags_and_their_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    run = write_run(tmp_path / "run", SPEC)
    out = tmp_path / "out"
    assert main(["simulate", str(run), "--reps", "1,2", "--trials", "20", "--jobs", "1", "--calibration-reps", "0",
                 "--scoring", "aimo3-private", "--line", "1.5", "--compare", "1,2", "--machine-speed", "0",
                 "--set", "sampling.seed_policy=per-run", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for needle in ("Scoring: aimo3-private", "## Two leaderboards", "## What the data can tell", "#1 − #2",
                   "P(≥1.5)"):
        assert needle in printed, needle
    assert "## Machine speed" not in printed
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["row"]) == [1, 2] and (summary["line"] == 1.5).all()
    assert {"p_line", "first_run_mean", "first_run_p_line", "vs_best", "separable", "beyond_data", "fixed_mean",
            "per_run_p_line"} <= set(summary)
    scores = pd.read_csv(out / "scores.csv")
    single = scores[scores["setting"].str.startswith("reps=1 ")]
    assert set(single["score"]) == {1.5} and set(single["first_run"]) <= {1.0, 2.0}
    for flags, message in ((["--scoring", "kaggle"], "unknown scoring 'kaggle'"),
                           (["--compare", "1,9"], "--compare 1,9: the grid has 1 setting,"),
                           (["--compare", "2,2"], "--compare takes two different row numbers"),
                           (["--machine-speed", "1"], "--machine-speed must be >= 0 and below 1"),
                           (["--line", "-1"], "--line must be >= 0")):
        code = main(["simulate", str(run), *flags, "--out", str(tmp_path / "bad")])
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1, (flags, err)
        assert not (tmp_path / "bad").exists()
    assert main(["simulate", str(run), "--order", "hardest", "--out", str(tmp_path / "bad")]) == 2
    assert "--order must be random, hard-first" in capsys.readouterr().err
    assert main(["tune", str(run), *["--scoring", "kaggle"], "--out", str(tmp_path / "bad")]) == 2
    assert "unknown scoring" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # argparse's own: usage and the message
        main(["simulate", str(run), "--compare", "1", "--out", str(tmp_path / "bad")])
    assert exited.value.code == 2 and "expected two row numbers A,B" in capsys.readouterr().err


def test_the_machine_speed_is_off_by_default_and_the_old_flag_still_sets_it(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from solver.commands.grid import machine_speed
    from solver.offline.sim import SimulationRequest

    assert SimulationRequest((tmp_path,)).machine_speed == 0.0  # no AIMO3 rule varies the machine
    run = write_run(tmp_path / "run", SPEC)
    assert main(["simulate", str(run), "--trials", "10", "--jobs", "1", "--calibration-reps", "0",
                 "--speed-jitter", "0.1", "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if "--speed-jitter is deprecated" in line]
    assert len(notes) == 1 and "machine-speed stress test" in captured.out and "## Machine speed" in captured.out
    import argparse

    assert machine_speed(argparse.Namespace(speed_jitter=None, machine_speed=0.2)) == 0.2


def test_a_setting_beyond_the_data_is_flagged_beside_its_row(tmp_path: Path) -> None:
    from solver.offline.sim import markdown

    run = synthetic(tmp_path / "run", [0.5, 0.6, 0.7, 0.8], reps=4)
    report = simulate(request(run, reps=(4, 8), trials=20))
    inside, beyond = report.summaries
    assert not inside.beyond_data and beyond.beyond_data and beyond.bootstrapped == 4
    rows = [line for line in markdown(report).splitlines() if line.startswith("| 2 |")]
    assert rows and rows[0].rstrip(" |").endswith("⚑ beyond the data: 4.0 of 4 topped up")
    held = simulate(request(run, trials=20, line=47.0))  # AIMO3's line, given, is above 4 problems
    assert math.isclose(held.summaries[0].p_line, 0.0) and "above the K = 4 problems" in markdown(held)
    assert "the line 47 (--line)" in markdown(held)


def test_the_default_line_is_aimo3s_share_of_the_days_problems(tmp_path: Path) -> None:
    """Without --line a 4-problem day is held to 47/50 of 4, not to 47 (which no such day reaches); the report and
    chosen.yaml's head say so."""
    from solver.offline.sim import markdown

    run = synthetic(tmp_path / "run", [0.9, 0.95, 0.97, 0.99], reps=8)
    report = simulate(request(run, trials=50))
    assert report.request.line == 3.76 and not report.line_given and report.summaries[0].line == 3.76
    assert report.summaries[0].p_line > 0.5  # a day that gets all 4 right clears it (none clears 47)
    assert "the line 3.76: AIMO3's prize line, 47 of 50, scaled to the day's 4 problems (--line L sets one)" in \
        markdown(report)

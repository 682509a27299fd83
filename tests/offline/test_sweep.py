"""Sweeps: the grid, the offline replay of repetition counts / voters / stoppers, outputs and the command.
The last test generates for real with the tiny model."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from data.eval_runs import Planned, build_run, build_sweep_runs, sweep_config
from solver.cli import main
from solver.config import Config, load_config
from solver.core.grading import GradedRepetition
from solver.offline.sweep import run_sweep
from solver.offline.sweep import analyse, simulate_problem
from solver.offline.sweep import PLOTS, load_sweep, write_outputs
from solver.offline.sweep import plan_runs, reusable_config
from solver.offline.sweep import SweepError, SweepSpec, spec_from_dict, stopper_for
from solver.types import Ballot, Problem
from solver.core.voting import make_voter

ROOT = Path(__file__).resolve().parents[2]


def rep(index: int, answer: str | None, seconds: float, tokens: int = 100) -> GradedRepetition:
    return GradedRepetition(index, "done" if answer else "error", Ballot(answer) if answer else None, None,
                            seconds, tokens, 1)


MAJORITY = make_voter(Config().vote, Config().answers)


def test_simulation_of_one_problem_schedules_votes_and_stops() -> None:
    pool = [rep(0, "7", 3.0), rep(1, "7", 1.0), rep(2, "5", 2.0), rep(3, None, 0.5), rep(4, "7", 4.0)]
    plain = stopper_for("none", 5)
    serial = simulate_problem(pool, [0, 1, 2, 3, 4], 5, 1, MAJORITY, plain, "0")
    assert (serial.answer, serial.finished, serial.launched, serial.seconds) == ("7", 5, 5, 10.5)
    parallel = simulate_problem(pool, [0, 1, 2, 3, 4], 5, 5, MAJORITY, plain, "0")
    assert parallel.seconds == 4.0  # everything at once: the slowest repetition
    # Two slots and "2 agree": finishes at t=1 (7), t=3 (7, stop); rep 2 started at t=1 and ran 2 of its 2 s.
    early = simulate_problem(pool, [0, 1, 2, 3, 4], 5, 2, MAJORITY, stopper_for("agree:2", 5), "0")
    assert (early.answer, early.finished, early.launched, early.seconds) == ("7", 2, 3, 3.0)
    assert early.tokens == pytest.approx(300.0)
    nothing = simulate_problem([rep(0, None, 1.0)], [0], 1, 1, MAJORITY, plain, "0")
    assert (nothing.answer, nothing.finished) == ("0", 1)  # the default answer
    assert simulate_problem(pool, [2, 3, 0, 1, 4], 2, 2, MAJORITY, plain, "0").answer == "5"  # 5 and no answer


def test_the_replay_weighs_unrated_ballots_as_the_confidence_voter_does_online() -> None:
    """A repetition without logprobs weighs the mean of the rated ones in the live vote; the sweep's replay must
    see the same ballot, not a rated one of weight 1."""
    from solver.core.voting import UnratedBallot

    confidence = make_voter(Config().replace({"vote.voter": "confidence"}).vote, Config().answers)
    ballots = [Ballot("7", 10.0), UnratedBallot("3"), UnratedBallot("3")]
    pool = [GradedRepetition(i, "done", b, None, 1.0 + i, 100, 1) for i, b in enumerate(ballots)]
    replayed = simulate_problem(pool, [0, 1, 2], 3, 3, confidence, stopper_for("none", 3), "0")
    assert replayed.answer == confidence.winner(ballots) == "3"  # 10 + 10 against 10


def test_spec_parsing_and_errors() -> None:
    spec = spec_from_dict({"data": "demo", "reps": "4,1,2", "workers": 2, "temperature": "0.6, 0.8",
                           "prompt": "tir,cot", "set": {"sampling.max_tokens": 64}})
    assert (spec.reps, spec.workers, spec.temperatures, spec.prompts, spec.max_reps) == (
        (1, 2, 4), (2,), (0.6, 0.8), ("tir", "cot"), 4)
    for bad, message in [({"reps": "1,x"}, "not a number: 'x'"), ({"reps": "0"}, "reps must be positive"),
                         ({"workers": None}, "workers is required"), ({"draws": 0}, "draws must be > 0"),
                         ({"set": [1]}, "set must be a mapping")]:
        with pytest.raises(SweepError, match=message):
            spec_from_dict({"data": "demo", "reps": "1", "workers": "1", **bad})


def test_plan_makes_one_run_per_generation_setting(tmp_path: Path) -> None:
    spec = SweepSpec("demo", reps=(2, 8), workers=(1, 4), temperatures=(0.6, 1.0), prompts=("tir", "cot"))
    runs = plan_runs(spec, load_config("tiny").replace({"stop.stoppers": ["beta"]}), tmp_path)
    assert len(runs) == 8
    assert runs[0].run_dir == tmp_path / "runs" / "T0.6-tir-w1"
    assert {(r.config.solve.reps, r.config.stop.stoppers, r.config.budget.total_s) for r in runs} == {
        (8, (), None)}
    assert {(r.config.sampling.temperature, r.config.prompt.template, r.config.solve.workers) for r in runs} == {
        (t, p, w) for t in (0.6, 1.0) for p in ("tir", "cot") for w in (1, 4)}


def exact_runs(out: Path) -> list[Planned]:
    """Three problems without ties: right 5/5, right 3/5 (wins), right 1/5 (loses)."""
    planned = [Planned(Problem("a", "A?", "1"), ("1",) * 5),
               Planned(Problem("b", "B?", "2"), ("2", "3", "2", "4", "2")),
               Planned(Problem("c", "C?", "3"), ("3", "4", "4", "4", "5"))]
    for w in (1, 2):
        build_run(out / "runs" / f"T0.8-tir-w{w}", sweep_config(w, 5), planned,
                  seconds_per_token=0.01 * (1 + 0.3 * (w - 1)))  # more in flight: each one 30 % slower
    return planned


def test_analysis_rows_match_hand_computed_values(tmp_path: Path) -> None:
    exact_runs(tmp_path)
    spec = SweepSpec("demo", reps=(1, 5), workers=(1, 2), stoppers=("none", "agree:3"), draws=200)
    df = analyse(plan_runs(spec, load_config("tiny"), tmp_path), spec)
    assert len(df) == 8
    full = df[(df.reps == 5) & (df.stopper == "none")]
    assert list(full.accuracy) == pytest.approx([2 / 3, 2 / 3])  # a and b right, c wrong
    assert list(full.pass_at_n) == pytest.approx([1.0, 1.0])
    assert list(full.rep_accuracy) == pytest.approx([(1 + 0.6 + 0.2) / 3] * 2)
    assert full.runtime_measured_s.notna().all() and full.tokens_per_s.gt(0).all()
    assert df[(df.reps == 1) | (df.stopper != "none")].runtime_measured_s.isna().all()
    single = df[(df.reps == 1) & (df.stopper == "none")]
    assert list(single.accuracy) == pytest.approx([0.6, 0.6], abs=0.06)  # expected = mean single accuracy
    assert list(single.pass_at_n) == pytest.approx([0.6, 0.6])
    stopped = df[(df.reps == 5) & (df.stopper == "agree:3")].set_index("workers")
    assert stopped.loc[1, "reps_used"] < 5 and stopped.loc[1, "accuracy"] == pytest.approx(2 / 3)
    w1, w2 = full.set_index("workers").runtime_s.loc[1], full.set_index("workers").runtime_s.loc[2]
    assert w2 < w1  # two slots beat one even though each repetition ran 30 % slower
    assert ((full.accuracy_low < full.accuracy) & (full.accuracy < full.accuracy_high)).all()
    again = analyse(plan_runs(spec, load_config("tiny"), tmp_path), spec, jobs=2)
    pd.testing.assert_frame_equal(df, again)  # deterministic for a seed, whatever the number of processes


def test_voters_are_a_sweep_dimension(tmp_path: Path) -> None:
    exact_runs(tmp_path)
    spec = SweepSpec("demo", reps=(5,), workers=(1,), voters=("majority", "code_first"), draws=5)
    df = analyse(plan_runs(spec, load_config("tiny"), tmp_path), spec)
    assert list(df.voter) == ["majority", "code_first"]
    assert df.accuracy.notna().all()


def test_outputs_are_written_and_read_back(tmp_path: Path) -> None:
    build_sweep_runs(tmp_path, reps=4)
    spec = SweepSpec("demo", reps=(1, 2, 4), workers=(1, 2), stoppers=("none", "beta"), draws=20)
    df = analyse(plan_runs(spec, load_config("tiny"), tmp_path), spec)
    written = write_outputs(df, spec, tmp_path)
    assert {p.name for p in written} >= {"sweep.csv", "sweep.md", "sweep.yaml", *PLOTS}
    assert all((tmp_path / name).stat().st_size > 10_000 for name in PLOTS)
    back = load_sweep(tmp_path)
    assert list(back.columns) == list(df.columns) and len(back) == len(df) == 12
    markdown = (tmp_path / "sweep.md").read_text()
    assert "![accuracy vs repetitions](accuracy_vs_reps.png)" in markdown and markdown.count("\n| 0.8 |") == 12
    assert spec_from_dict(__import__("yaml").safe_load((tmp_path / "sweep.yaml").read_text())) == spec


def test_reuse_takes_a_run_with_enough_repetitions_and_refuses_other_settings(tmp_path: Path) -> None:
    build_sweep_runs(tmp_path, workers=(1,), reps=4)
    tiny = load_config("tiny")
    (same,) = plan_runs(SweepSpec("demo", reps=(4,), workers=(1,)), tiny, tmp_path)
    assert reusable_config(same) == same.config
    (fewer,) = plan_runs(SweepSpec("demo", reps=(1, 2), workers=(1,)), tiny, tmp_path)
    assert reusable_config(fewer) == same.config  # 4 recorded repetitions serve N = 1, 2
    df = analyse([fewer], SweepSpec("demo", reps=(1, 2), workers=(1,), draws=5))
    assert df.runtime_measured_s.isna().all()  # no row is the recorded run itself
    (more,) = plan_runs(SweepSpec("demo", reps=(8,), workers=(1,)), tiny, tmp_path)
    with pytest.raises(SweepError, match="holds 4 repetitions per problem, the sweep needs 8"):
        reusable_config(more)
    (hotter,) = plan_runs(SweepSpec("demo", reps=(4,), workers=(1,), temperatures=(0.8,)),
                          tiny.replace({"sampling.top_p": 0.5}), tmp_path)
    with pytest.raises(SweepError, match="holds a run with another config"):
        reusable_config(hotter)
    with pytest.raises(SweepError, match="no run at"):
        run_sweep(SweepSpec("demo", reps=(4,), workers=(3,)), tiny, [], tmp_path, solve=None)
    with pytest.raises(SweepError, match="unknown voter 'nosuch'"):
        run_sweep(SweepSpec("demo", reps=(4,), workers=(1,), voters=("nosuch",)), tiny, [], tmp_path, solve=None)


def test_sweep_command_offline_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sweep_runs(tmp_path, reps=4)
    assert main(["sweep", "demo", "--reps", "1,4", "--workers", "1,2", "--stopper", "none,agree:3",
                 "--draws", "10", "--offline", "--out", str(tmp_path)]) == 0
    assert "best majority accuracy" in capsys.readouterr().out
    assert len(load_sweep(tmp_path)) == 8
    for argv, message in [(["--reps", "1,x", "--workers", "1"], "not a number: 'x'"),
                          (["--reps", "1", "--workers", "1", "--stopper", "nosuch"], "unknown stopper 'nosuch'"),
                          (["--reps", "1", "--workers", "5", "--offline"], "no run at"),
                          (["--reps", "1", "--workers", "1", "--set", "solve.reps=-1"], "solve.reps must be > 0")]:
        assert main(["sweep", "demo", *argv, "--draws", "2", "--out", str(tmp_path / "other")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_sweep_generates_through_the_replay_engine_and_reuses_its_runs(tmp_path: Path) -> None:
    """The generation path without vLLM: the replay engine serves a recorded run through the real solve loop
    and sandbox. A second sweep over more problems resumes the same run directories instead of regenerating."""
    args = ["sweep", "demo", "--reps", "1,2", "--workers", "1,2", "--draws", "10", "--engine", "replay",
            "--from", str(ROOT / "tests" / "data" / "replay_run"), "--set", "engine.replay_time_scale=0",
            "--out", str(tmp_path)]
    assert main([*args, "--limit", "2"]) == 0
    logs = {w: tmp_path / "runs" / f"T0.8-tir-w{w}" / "log.jsonl" for w in (1, 2)}
    first = {w: log.read_text() for w, log in logs.items()}
    assert all(text.count('"type": "repetition"') == 4 for text in first.values())
    assert main([*args, "--limit", "3"]) == 0
    for w, log in logs.items():
        text = log.read_text()
        assert text.startswith(first[w])  # kept as it was, only appended to
        assert text.count('"type": "repetition"') == 6 and '"problem_id": "demo-03"' in text
    df = load_sweep(tmp_path)
    assert set(df.problems) == {3} and len(df) == 4
    assert df[df.reps == 2].accuracy.notna().all()


@pytest.mark.engine
def test_small_sweep_with_the_tiny_model(tmp_path: Path, served: str) -> None:
    """Two problems, N in {1, 2}, W = 2: one real run, then the analysis. The tiny model answers through the
    session's ``solver serve`` endpoint (``served``): the sweep's generation is a ``solve_run`` like any other, and
    an engine's start inside a command is the demo's and ``solver solve``'s test. A grid of several worker
    settings is several such runs, one after another: the replay engine's sweep above covers that."""
    proc = subprocess.run(
        [sys.executable, "-m", "solver", "sweep", "demo", "--limit", "2", "--reps", "1,2", "--workers", "2",
         "--draws", "20", "--set", "sampling.max_tokens=48", "--set", "sampling.max_total_tokens=96",
         "--set", "engine.name=openai", "--set", f"engine.endpoints=[{served}]",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = load_sweep(tmp_path)
    assert len(df) == 2 and set(df.problems) == {2}
    measured = df.dropna(subset=["runtime_measured_s"])
    assert list(measured.workers) == [2] and (measured.reps == 2).all()
    assert (measured.runtime_measured_s > 0).all() and (measured.tokens_per_s > 0).all()
    assert (df.tokens > 0).all() and df.accuracy.between(0, 1).all() and not df.accuracy.isna().any()
    log = (tmp_path / "runs" / "T0.8-tir-w2" / "log.jsonl").read_text()
    assert log.count('"type": "repetition"') >= 4
    assert all((tmp_path / name).is_file() for name in PLOTS)
    assert not math.isnan(df.runtime_s.max())


@pytest.mark.parametrize("path", sorted((ROOT / "evaluation" / "sweeps").glob("*.yaml")), ids=lambda p: p.stem)
def test_bundled_sweep_specs_are_valid(path: Path, tmp_path: Path) -> None:
    from solver.offline.sweep import load_spec

    data = load_spec(path)
    spec = spec_from_dict({**data, "data": data["data"] or "demo"}, str(path))
    base = load_config(spec.preset, spec.config_file, spec.overrides)
    runs = plan_runs(spec, base, tmp_path)
    assert len(runs) == len(spec.workers) * max(1, len(spec.temperatures)) * max(1, len(spec.prompts))
    for name in spec.stoppers:
        stopper_for(name, spec.max_reps)
    for name in spec.voters:
        make_voter(base.replace({"vote.voter": name}).vote, base.answers)


def test_analysis_follows_the_data_order_not_the_order_problems_were_logged(tmp_path: Path) -> None:
    """Problems solved at once (or on several engine actors) reach the log in the order they happen to start;
    the draws are keyed by the problem's place in the data, so the rows must not depend on the log's order."""
    import json
    import shutil

    planned = exact_runs(tmp_path / "in-order")
    shutil.copytree(tmp_path / "in-order", tmp_path / "shuffled")
    logged_order = {"c": 0, "a": 1, "b": 2}  # the same records, problem c logged first
    for log in (tmp_path / "shuffled" / "runs").glob("*/log.jsonl"):
        records = [json.loads(line) for line in log.read_text().splitlines()]
        records.sort(key=lambda r: (r["type"] != "problem", logged_order[r.get("id") or r.get("problem_id")]))
        log.write_text("".join(json.dumps(r) + "\n" for r in records))
    spec = SweepSpec("demo", reps=(1, 3), workers=(1, 2), stoppers=("none", "agree:2"), draws=50)
    ids = [p.problem.id for p in planned]
    columns = ["workers", "reps", "stopper", "accuracy", "rep_accuracy", "pass_at_n", "reps_used"]
    first = analyse(plan_runs(spec, load_config("tiny"), tmp_path / "in-order"), spec, ids)[columns]
    second = analyse(plan_runs(spec, load_config("tiny"), tmp_path / "shuffled"), spec, ids)[columns]
    pd.testing.assert_frame_equal(first, second)

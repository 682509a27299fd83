"""Leaderboard simulation: determinism, sanity on known cases, closed forms, budgets, calibration, clear errors."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from solver.cli import main
from solver.config import Config
from solver.runlog import RunLog
from solver.offline.sim import SimulationError
from solver.offline.sim import SimulationRequest, simulate
from solver.types import Answer, Problem, Repetition, Turn

DATA = Path(__file__).parents[1] / "data"


def rep(pid: str, index: int, value: str | None, seconds: float = 1.0, tokens: int = 100) -> Repetition:
    text = f"so \\boxed{{{value}}}" if value is not None else "no answer"
    answers = (Answer(value, value, "boxed"),) if value is not None else ()
    return Repetition(pid, index, index, "done", (Turn(text, 50, tokens, "stop", seconds),), answers,
                      0.0, seconds)


def write_run(run_dir: Path, spec: dict[str, tuple[str, list[str | None]]], *, seconds=None,
              config: Config | None = None) -> Path:
    """A run whose problem ``pid`` has reference ``ref`` and one repetition per listed answer."""
    with RunLog.create(run_dir, config or Config()) as log:
        for pid, (ref, answers) in spec.items():
            log.append_problem(Problem(pid, f"problem {pid}", ref))
            for i, value in enumerate(answers):
                log.append(rep(pid, i, value, seconds(pid, i) if seconds else 1.0))
    return run_dir


def synthetic(run_dir: Path, probabilities: list[float], reps: int, seed: int = 0) -> Path:
    """Each problem's repetitions are right ("1") with its probability, else the one wrong answer "2"."""
    rng = random.Random(seed)
    spec = {f"p{i:02d}": ("1", ["1" if rng.random() < p else "2" for _ in range(reps)])
            for i, p in enumerate(probabilities)}
    return write_run(run_dir, spec, seconds=lambda pid, i: 0.5 + (i % 5) * 0.3)


def request(runs, **kwargs) -> SimulationRequest:
    """A request on ``runs``; exact seconds unless a test asks for the run-time jitter."""
    kwargs.setdefault("calibration_reps", 0)
    kwargs.setdefault("machine_speed", 0.0)
    return SimulationRequest(tuple(runs) if isinstance(runs, (list, tuple)) else (runs,), **kwargs)


def test_same_seed_same_result_whatever_the_jobs(tmp_path: Path):
    run = synthetic(tmp_path / "run", [0.2, 0.5, 0.7, 0.9], reps=12)
    one = simulate(request(run, reps=(1, 4), stoppers=((), ("agree:2",)), trials=120, seed=3))
    again = simulate(request(run, reps=(1, 4), stoppers=((), ("agree:2",)), trials=120, seed=3, jobs=2))
    other = simulate(request(run, reps=(1, 4), stoppers=((), ("agree:2",)), trials=120, seed=4))
    for a, b in zip(one.summaries, again.summaries):
        assert np.array_equal(a.scores, b.scores) and a.tokens == b.tokens and a.seconds == b.seconds
    assert any(not np.array_equal(a.scores, c.scores) for a, c in zip(one.summaries, other.summaries))


def test_always_right_scores_one_and_always_wrong_scores_zero(tmp_path: Path):
    run = write_run(tmp_path / "run", {"right": ("5", ["5"] * 6), "wrong": ("5", ["6"] * 4 + [None] * 2),
                                       "empty": ("0", [None] * 3)})
    report = simulate(request(run, reps=(1, 3, 8), trials=60))
    for s in report.summaries:
        # "empty" answers the default "0", which is its reference: 2 right every time
        assert set(s.scores) == {2.0}
    k1 = simulate(request(run, reps=(3,), trials=200, problems=1))
    assert set(k1.summaries[0].scores) <= {0.0, 1.0}
    assert k1.summaries[0].mean == pytest.approx(2 / 3, abs=0.1)  # a random one of the three problems


def test_majority_matches_the_binomial_closed_form(tmp_path: Path):
    probabilities = [0.1, 0.3, 0.45, 0.55, 0.7, 0.9]
    run = synthetic(tmp_path / "run", probabilities, reps=40, seed=1)
    report = simulate(request(run, reps=(1, 3, 5), trials=1500, workers=(1,), draw="bootstrap"))
    pools = {pid: (ref, answers) for pid, (ref, answers) in
             _spec_back(run).items()}
    empirical = [answers.count("1") / len(answers) for _, answers in pools.values()]
    for s in report.summaries:
        n = s.setting.reps
        # Two answers only and n odd: the right one wins iff it has more than n/2 of the n bootstrap draws.
        expected = sum(binom.sf(n // 2, n, f) for f in empirical)
        se = s.std / np.sqrt(s.trials)
        assert abs(s.mean - expected) < 4 * se + 1e-9, (n, s.mean, expected)
        assert s.finished == n and s.launched == n


def _spec_back(run: Path) -> dict[str, tuple[str, list[str]]]:
    from solver.runlog import read_log

    records = read_log(run)
    refs = {p.id: p.answer for p in records.problems}
    return {pid: (refs[pid], [r.answers[0].value for r in reps]) for pid, reps in records.finished().items()}


def test_stoppers_save_repetitions_and_time(tmp_path: Path):
    run = write_run(tmp_path / "run", {f"p{i}": ("3", ["3"] * 16) for i in range(4)})
    report = simulate(request(run, reps=(16,), stoppers=((), ("agree:2",)), workers=(2,), trials=30))
    full, early = report.summaries
    assert full.finished == 16 and early.finished == 2
    assert early.seconds == pytest.approx(1.0) and full.seconds == pytest.approx(8.0)
    assert early.stops == {"agree:2": 1.0}
    assert early.mean == full.mean == 4


def test_a_tight_budget_cuts_problems_at_their_deadline(tmp_path: Path):
    run = write_run(tmp_path / "run", {f"p{i}": ("3", ["3"] * 8) for i in range(4)},
                    seconds=lambda pid, i: 100.0, config=Config().replace(
                        {"budget.min_s": 0, "budget.max_s": 1000, "budget.reserve_s": 0}))
    free, tight = simulate(request(run, reps=(8,), workers=(1,), budgets=(None, 150.0), trials=20)).summaries
    assert free.seconds == pytest.approx(800.0) and free.mean == 4
    assert tight.total_seconds <= 150.0 + 1e-9
    assert tight.stops.get("deadline", 0) > 0
    assert tight.finished < 1.0  # 150 s shared by 4 problems of 100 s repetitions
    assert tight.mean < 4


def test_calibration_agrees_with_held_out_runs(tmp_path: Path):
    rng = np.random.default_rng(11)
    run = synthetic(tmp_path / "run", list(rng.uniform(0.05, 0.95, size=30)), reps=24, seed=2)
    report = simulate(request(run, reps=(3,), trials=50, calibration_reps=3, workers=(3,)))
    cal = report.calibration
    assert cal is not None and len(cal.held_out) == 20 * 4  # 4 disjoint 3-rep runs per 12-rep half
    assert abs(cal.mean_gap) < 1.0, cal.mean_gap
    assert cal.ks < 0.2, cal.ks
    assert cal.verdict == "agree"


def test_outputs_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "out"
    code = main(["simulate", str(DATA / "replay_run"), "--reps", "1,4,8", "--stopper", "none", "--stopper",
                 "agree:3", "--trials", "40", "--jobs", "1", "--at-least", "3,4", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "# Leaderboard simulation" in printed and "## Calibration" in printed and "P(≥4)" in printed
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 6 and {"mean", "q05", "q95", "p_ge_3", "p_ge_4", "tokens_per_problem"} <= set(summary)
    assert (summary["mean"] <= 6).all() and (summary["p_ge_3"] >= summary["p_ge_4"]).all()
    scores = pd.read_csv(out / "scores.csv")
    assert len(scores) == 6 * 40
    for png in ("scores.png", "accuracy_vs_reps.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_imported_samples_simulate(tmp_path: Path):
    from solver.recordings import import_samples

    import_samples(DATA / "samples_nemo.jsonl", tmp_path / "run", Config())
    report = simulate(request(tmp_path / "run", reps=(1, 3), trials=50))
    assert report.zero_time
    assert 0 <= report.summaries[0].mean <= 2


def test_bad_inputs_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    a = write_run(tmp_path / "a", {"p1": ("1", ["1"]), "p2": ("2", ["2"])})
    b = write_run(tmp_path / "b", {"p1": ("1", ["1"]), "p3": ("2", ["2"])})
    cases = [
        (request([a, b]), "different problem set"),
        (request(tmp_path / "missing"), "no run log"),
        (request(a, problems=3), "exceeds the 2 problems"),
        (request(a, reps=(2,), draw="subset"), "subset draws"),
        (request(a, stoppers=(("nonsense",),)), "unknown stopper"),
        (request(a, trials=0), "--trials"),
    ]
    for req, message in cases:
        with pytest.raises(SimulationError, match=message) as info:
            simulate(req)
        assert "\n" not in str(info.value)
    empty = tmp_path / "empty"
    RunLog.create(empty, Config()).close()
    with pytest.raises(SimulationError, match="is empty"):
        simulate(request(empty))
    no_ref = tmp_path / "noref"
    write_run(no_ref, {"p1": (None, ["1"])})  # type: ignore[dict-item]
    with pytest.raises(SimulationError, match="no reference answer"):
        simulate(request(no_ref))
    old = write_run(tmp_path / "old", {"p1": ("1", ["1"])})
    (old / "meta.json").write_text(json.dumps({"schema": 0}))
    with pytest.raises(SimulationError, match="another version"):
        simulate(request(old))
    assert main(["simulate", str(a), str(b), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "different problem set" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_budget_settings_come_from_the_config_and_overrides(tmp_path: Path):
    from solver.offline.sim import markdown

    run = write_run(tmp_path / "run", {f"p{i}": ("3", ["3"] * 4) for i in range(3)})
    starved = simulate(request(run, reps=(4,), budgets=(100.0,), trials=5))  # default reserve_s is 300 s
    assert starved.summaries[0].mean == 0 and starved.summaries[0].stops == {"deadline": 1.0}
    assert "no problem gets any time" in markdown(starved)
    fed = simulate(request(run, reps=(4,), budgets=(100.0,), trials=5,
                           overrides=(("budget.reserve_s", 0), ("budget.min_s", 1))))
    assert fed.summaries[0].mean == 3 and "reserve_s = 0" in markdown(fed)
    with pytest.raises(SimulationError, match="unknown config key"):
        simulate(request(run, overrides=(("budget.nope", 1),)))


def test_a_run_made_with_workers_auto_is_simulated_with_work_in_flight(tmp_path: Path):
    """Issue 14 §4: `--workers auto` records solve.workers = 0; the simulator took that as zero slots, launched
    nothing and gave every problem the default answer, silently. Auto now means the engine's batch
    (engine.args.max_num_seqs) capped at the repetitions, and 0 slots is refused."""
    auto = Config().replace({"solve.workers": 0, "engine.args.max_num_seqs": 2})
    run = write_run(tmp_path / "run", {f"p{i}": ("3", ["3"] * 4) for i in range(3)}, config=auto)
    report = simulate(request(run, reps=(4,), trials=5))
    s = report.summaries[0]
    assert s.setting.workers == 2 and s.mean == 3 and s.finished == 4
    from solver.offline.sim import markdown

    assert "--workers auto" in markdown(report)
    assert s.seconds == pytest.approx(2.0)  # 4 repetitions of 1 s on 2 slots
    with pytest.raises(SimulationError, match="--workers"):
        simulate(request(run, reps=(4,), workers=(0,)))


def sparse(run_dir: Path, problems: int = 40, reps: int = 24, seed: int = 4) -> Path:
    """Problems whose repetitions mostly give no answer (as in the dev corpus), the answers given mostly right."""
    rng = random.Random(seed)
    spec = {}
    for i in range(problems):
        rate = rng.choice([0.05, 0.1, 0.2, 0.4, 0.9])
        spec[f"p{i:02d}"] = ("1", [None if rng.random() > rate else ("1" if rng.random() < 0.8 else "2")
                                   for _ in range(reps)])
    return write_run(run_dir, spec)


def test_default_draws_calibrate_on_sparse_answers(tmp_path: Path):
    """Issue 17: on the dev corpus the check said differ (KS 0.28, gap -1.45): drawing with replacement from a
    problem's few answers loses all of them more often than a real run does (E[(1 - k/M)^N] > (1 - a)^N), so the
    simulated mean sat below real runs. Draws without replacement (a random subset of independent repetitions is
    itself a real run) are the default wherever a problem has the repetitions."""
    run = sparse(tmp_path / "run")
    default = simulate(request(run, reps=(6,), trials=20, calibration_reps=6)).calibration
    assert default is not None and default.verdict == "agree", (default.ks, default.mean_gap)
    assert abs(default.mean_gap) < 0.5
    boot = simulate(request(run, reps=(6,), trials=20, calibration_reps=6, draw="bootstrap")).calibration
    assert boot is not None and boot.mean_gap < default.mean_gap - 0.5  # the bias this default removes


def test_auto_draws_fall_back_to_replacement_only_where_a_pool_is_short(tmp_path: Path):
    run = write_run(tmp_path / "run", {"long": ("1", ["1", "2", "1", "2"]), "short": ("1", ["1", "2"])})
    report = simulate(request(run, reps=(4,), trials=200, draw="auto"))
    # "long" draws its four repetitions exactly (a 2:2 tie, first-reached wins); "short" draws with replacement
    assert report.summaries[0].finished == 4
    with pytest.raises(SimulationError, match="subset draws"):
        simulate(request(run, reps=(4,), draw="subset"))


def test_calibration_agrees_on_the_dev_corpus(dev_run: Path):
    """Issue 17's acceptance: KS < 0.2 and |mean gap| < 1 problem on the real samples (it said differ, KS 0.28,
    gap -1.45, with draws with replacement)."""
    report = simulate(request(dev_run, reps=(30,), trials=10, calibration_reps=None))
    cal = report.calibration
    assert cal is not None and cal.setting.reps == 7  # 30 recorded: two held-out runs of 7 per half of 15
    assert cal.ks < 0.2 and abs(cal.mean_gap) < 1.0, (cal.ks, cal.mean_gap)


def test_a_setting_draws_its_own_repetitions_whatever_the_grid(tmp_path: Path):
    """reps=4's row is the same alone and beside reps=12 (which bootstraps the problems of fewer than 12): each
    setting draws its own N, exact where a problem has N recorded."""
    run = synthetic(tmp_path / "run", [0.2, 0.5, 0.7, 0.9], reps=6)
    alone = simulate(request(run, reps=(4,), trials=60, seed=2)).summaries[0]
    beside = simulate(request(run, reps=(4, 12), trials=60, seed=2)).summaries
    assert np.array_equal(alone.scores, beside[0].scores) and alone.seconds == beside[0].seconds
    assert alone.bootstrapped == 0 and alone.bootstrap_bias == 0.0
    assert beside[1].bootstrapped == 4 and beside[1].bootstrap_bias is not None


def test_an_engine_time_model_times_the_attempts(tmp_path: Path):
    """With a time model every repetition shares the engine: a problem of four one-request repetitions of 100
    tokens at once takes the request's latency plus 100 steps of four sequences; the engine's start counts once
    in the run's time, and a budget below one problem's time cuts it."""
    import yaml

    model = tmp_path / "engine.yaml"
    model.write_text(yaml.safe_dump({"name": "flat", "step_s": {1: 0.01, 4: 0.02}, "request_s": 0.5,
                                     "start_s": 30.0}))
    run = write_run(tmp_path / "run", {f"p{i}": ("3", ["3"] * 4) for i in range(3)})
    no_reserve = (("budget.reserve_s", 0.0),)
    free, cut = simulate(request(run, reps=(4,), workers=(4,), budgets=(None, 40.0 + 30.0), trials=5,
                                 time_model=str(model), overrides=no_reserve)).summaries
    assert free.seconds == pytest.approx(0.5 + 100 * 0.02)  # the 50 prompt tokens prefill in no time here
    assert free.total_seconds == pytest.approx(30.0 + 3 * 2.5)
    assert free.mean == 3 and free.cut == 0
    assert cut.cut == 0  # 40 s for three problems of 2.5 s
    report = simulate(request(run, reps=(4,), workers=(4,), budgets=(30.0 + 1.0,), trials=5, time_model=str(model),
                              overrides=(("budget.min_s", 0.0), ("budget.reserve_s", 0.0))))
    assert report.summaries[0].cut == 3 and report.time_model is not None and not report.zero_time


def test_budget_none_and_bad_policy_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    run = write_run(tmp_path / "run", {"p": ("3", ["3", "4", "3"])})
    code = main(["simulate", str(run), "--budget", "none", "--budget", "100", "--retry", "0,2", "--trials", "5",
                 "--jobs", "1", "--calibration-reps", "0", "--out", str(tmp_path / "out")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "budget=100s" in printed and "budget=-" in printed and "retry=2" in printed
    for args, message in ((["--time-model", "nosuch"], "unknown time model 'nosuch'"),
                          (["--clamp", "900:300"], "--clamp needs 0 <= MIN <= MAX"),
                          (["--retry", "-1"], "--retry values must be >= 0")):
        code = main(["simulate", str(tmp_path / "missing"), *args, "--out", str(tmp_path / "o2")])
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1, err
        assert not (tmp_path / "o2").exists()

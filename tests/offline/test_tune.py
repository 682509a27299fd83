"""`solver tune`: the frontier is Pareto, the pick follows its stated rule, the chosen config runs, the HTML report
shows in a real headless browser, and bad input is a one-line error with nothing written."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from solver.cli import main
from solver.config import load_config
from solver.offline.tune import PickError, PickRule, cost, pareto
from solver.offline.sim import SimulationRequest
from solver.offline.tune import tune

from offline.test_simulate import synthetic

FIXTURE_RUN = Path(__file__).parents[1] / "data" / "replay_run"
STOPPERS = ((), ("lossless",), ("beta:0.9",), ("margin:2",), ("agree:3",))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    return synthetic(tmp_path_factory.mktemp("tune") / "run", list(rng.uniform(0.1, 0.95, size=24)), reps=16)


def request(run: Path, **kwargs) -> SimulationRequest:
    kwargs.setdefault("stoppers", STOPPERS)
    kwargs.setdefault("reps", (4, 8, 16))
    kwargs.setdefault("trials", 40)
    kwargs.setdefault("workers", (1,))
    kwargs.setdefault("calibration_reps", 0)
    kwargs.setdefault("machine_speed", 0.0)
    return SimulationRequest((run,), **kwargs)


def test_pareto_keeps_exactly_the_undominated_points() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        costs, scores = rng.integers(0, 6, 12).tolist(), rng.integers(0, 6, 12).tolist()
        flags = pareto(costs, scores)
        for i, flag in enumerate(flags):
            dominated = any(costs[j] <= costs[i] and scores[j] >= scores[i] and (costs[j], scores[j]) != (costs[i], scores[i])
                            for j in range(12))
            assert flag == (not dominated)


def test_frontier_is_pareto_and_the_pick_follows_its_rule(run: Path) -> None:
    report = tune(request(run), PickRule("tolerance", 0.5))
    summaries = report.summaries
    assert len(summaries) == 3 * len(STOPPERS) and set(report.frontiers) == {"reps", "tokens", "seconds"}
    front = report.frontiers["reps"]
    for f in front:  # nothing searched beats a frontier point on both counts
        assert not any(cost(s, "reps") <= cost(f, "reps") and s.mean > f.mean + 1e-9 for s in summaries)
    best = max(s.mean for s in summaries)
    chosen = report.choice
    assert 100 * (best - chosen.mean) / chosen.problems <= 0.5 + 1e-9
    assert all(cost(s, "reps") >= cost(chosen, "reps") for s in summaries
               if 100 * (best - s.mean) / s.problems <= 0.5)
    assert any(f is chosen for f in front)  # the cheapest near-best setting is never dominated
    budget = tune(request(run), PickRule("budget", 6.0)).choice
    assert budget.launched <= 6.0 and budget.mean == max(s.mean for s in summaries if s.launched <= 6.0)
    with pytest.raises(PickError, match="no setting costs at most 0.5"):
        tune(request(run), PickRule("budget", 0.5))


def test_the_search_uses_common_draws_whatever_the_jobs(run: Path) -> None:
    one = tune(request(run, seed=5), PickRule())
    two = tune(request(run, seed=5, jobs=2), PickRule())
    assert [s.setting for s in one.summaries] == [s.setting for s in two.summaries]
    for a, b in zip(one.summaries, two.summaries):
        assert np.array_equal(a.scores, b.scores) and a.launched == b.launched
    assert one.choice.setting == two.choice.setting
    # common draws: at the same cap, a lossless stop answers exactly what every repetition answers, trial by trial
    by = {(s.setting.reps, s.setting.stoppers): s for s in one.summaries}
    for n in (4, 8, 16):
        assert np.array_equal(by[(n, ())].scores, by[(n, ("lossless",))].scores)
        assert by[(n, ("lossless",))].launched <= n


def test_cli_writes_frontier_plots_report_and_a_config_solve_takes(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tune"
    code = main(["tune", str(FIXTURE_RUN), "--out", str(out), "--reps", "2,4,6", "--stopper", "none",
                 "--stopper", "agree:2", "--stopper", "lossless", "--trials", "30", "--jobs", "1"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "## Frontier: repetitions launched per problem" in printed and "**Chosen**" in printed
    for name in ("tune.md", "settings.csv", "chosen.yaml", "frontier.png", "accuracy_vs_reps.png", "scores.png",
                 "report.html"):
        assert (out / name).stat().st_size > 0, name
    for png in ("frontier.png", "accuracy_vs_reps.png", "scores.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    with open(out / "settings.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 9 and sum(r["chosen"] == "True" for r in rows) == 1
    chosen = next(r for r in rows if r["chosen"] == "True")
    saved = yaml.safe_load((out / "chosen.yaml").read_text())
    config = load_config("tiny", str(out / "chosen.yaml"))
    assert config.solve.reps == int(chosen["reps"]) == saved["solve"]["reps"]
    assert list(config.stop.stoppers) == [x for x in chosen["stoppers"].split(",") if x]
    assert config.vote.voter == chosen["voter"]
    solved = tmp_path / "solved"
    assert main(["solve", "--engine", "replay", "--from", str(FIXTURE_RUN), "--out", str(solved), "--config",
                 str(out / "chosen.yaml"), "--set", "engine.replay_time_scale=0"]) == 0
    assert yaml.safe_load((solved / "config.yaml").read_text())["stop"]["stoppers"] == saved["stop"]["stoppers"]


@pytest.mark.parametrize(("flags", "message"), [
    (["--tolerance", "-1"], "--tolerance must be >= 0"),
    (["--stopper", "nonsense"], "unknown stopper"),
    (["--max-cost", "0.01", "--reps", "2"], "no setting costs at most 0.01"),
    (["--axis", "seconds", "--reps", "2"], "recorded no seconds"),
    (["--reps", "0"], "--reps values must be >= 1"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  flags: list[str], message: str) -> None:
    from solver.recordings import import_samples
    from solver.config import Config

    run = tmp_path / "imported"  # imported samples: no tokens, no seconds
    import_samples(Path(__file__).parents[1] / "data" / "samples_nemo.jsonl", run, Config())
    out = tmp_path / "out"
    assert main(["tune", str(run), "--out", str(out), "--trials", "5", "--jobs", "1", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_html_report_shows_in_headless_chromium(run: Path, tmp_path: Path) -> None:
    """The report is opened by a real browser: every embedded plot decodes and every table is in the DOM."""
    from solver.offline.tune import write_outputs

    browser = chromium()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing: scripts/setup_browser.sh installs it (make test runs it)")
        pytest.skip("chromium is not installed (scripts/setup_browser.sh installs it)")
    report = tune(request(run, calibration_reps=4, scoring="aimo3-private"), PickRule())
    write_outputs(report, tmp_path)
    html = tmp_path / "report.html"
    assert b"src=\"data:image/png;base64," in html.read_bytes() and b"src=\"http" not in html.read_bytes()
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                           "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'data-images-decoded="3"' in dom, dom[:500]
    tables = int(dom.split('data-tables="')[1].split('"')[0])
    assert tables >= 3  # the frontier, the references and the wrong problems (or more axes)
    assert "Pareto frontier" in dom and "Calibration" in dom and report.choice.setting.label in dom
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                    "--window-size=1200,2400", f"--screenshot={shot}", html.as_uri()], capture_output=True,
                   timeout=120, check=True)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[0] >= 2000 and (pixels[..., :3] < 0.5).mean() > 0.005  # ink on the page, not blank


def test_budgets_and_workers_are_searched_and_written(run: Path, tmp_path: Path) -> None:
    """A budgeted pick writes the budget and the workers it was searched with; an unbudgeted search leaves
    workers to the preset (they are the hardware's)."""
    from solver.offline.tune import chosen_config

    report = tune(request(run, workers=(1, 4), budgets=(None, 40.0), stoppers=((), ("hold:0.9",)),
                          overrides=(("budget.reserve_s", 0.0),)), PickRule("budget", 2.0, "seconds"))
    assert {s.setting.workers for s in report.summaries} == {1, 4}
    assert {s.setting.budget_s for s in report.summaries} == {None, 40.0}
    chosen = report.choice
    assert chosen.seconds <= 2.0
    data = chosen_config(report)
    assert data["solve"] == {"reps": chosen.setting.reps, "retry_reps": 0, "workers": chosen.setting.workers}
    from dataclasses import replace

    budgeted = next(s for s in report.summaries if s.setting.budget_s == 40.0)
    base = report.simulation.config.budget
    assert chosen_config(replace(report, choice=budgeted))["budget"] == {
        "total_s": 40.0, "problems": budgeted.problems, "min_s": base.min_s, "max_s": base.max_s,
        "reserve_s": base.reserve_s, "cutoff_s": base.cutoff_s, "banking": False}
    assert "workers" not in chosen_config(tune(request(run, workers=()), PickRule()))["solve"]


def test_wrong_problem_table_lists_exactly_the_problems_mostly_missed(run: Path) -> None:
    from solver.offline.tune import wrong_problems

    report = tune(request(run), PickRule())
    head, rows = wrong_problems(report)
    shares = {p.problem.id: share for p, share in zip(report.simulation.prepared, report.choice.right_share)}
    assert rows and {r[0] for r in rows} == {pid for pid, share in shares.items() if share < 0.5}
    assert [float(r[2]) for r in rows] == sorted(float(r[2]) for r in rows)  # worst first
    for r in rows:  # the recorded votes: synthetic problems answer "1" (right) or "2"
        assert r[1] == "1" and "2 ×" in r[4]


@pytest.mark.slow
def test_tuning_notebook_runs_on_the_shipped_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    notebooks = Path(__file__).parents[2] / "notebooks"
    monkeypatch.setenv("SOLVER_NOTEBOOK_OUT", str(tmp_path))
    monkeypatch.delenv("SOLVER_RUN_DIR", raising=False)
    notebook = nbformat.read(notebooks / "tuning.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(notebooks)}}).execute()
    cells = [c for c in notebook.cells if c.cell_type == "code"]
    summary = [o["data"]["text/markdown"] for o in cells[1].outputs if "text/markdown" in o.get("data", {})]
    assert summary and "## Frontier: repetitions launched per problem" in summary[0]
    assert any("image/png" in o.get("data", {}) for o in cells[2].outputs)
    assert "stoppers:" in "".join(o.get("text", "") for o in cells[3].outputs)
    assert load_config("tiny", str(tmp_path / "chosen.yaml")).solve.reps in (10, 20, 30)


def test_the_time_policy_is_searched_and_its_pick_runs_in_solve_and_the_kaggle_config(tmp_path: Path) -> None:
    """A search over the winners' levers (attempts, a second round, the clamp, banking) under a budget writes the
    pick whole: solve runs it unchanged on the replay engine, and the Kaggle predictor's config keeps it."""
    from solver.kaggle.competition import competition, competition_config

    out = tmp_path / "tune"
    code = main(["tune", str(FIXTURE_RUN), "--out", str(out), "--reps", "2,4", "--stopper", "agree:2",
                 "--retry", "0,2", "--clamp", "1:50", "--clamp", "2:80", "--banking", "off", "--banking", "on",
                 "--budget", "200", "--trials", "20", "--jobs", "1", "--tolerance", "0",
                 "--set", "budget.reserve_s=0"])
    assert code == 0
    with open(out / "settings.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 2 * 2 * 2
    assert {(r["retry"], r["clamp"], r["banking"]) for r in rows} == {
        (retry, clamp, banking) for retry in ("0", "2") for clamp in ("1-50", "2-80")
        for banking in ("False", "True")}
    saved = yaml.safe_load((out / "chosen.yaml").read_text())
    chosen = next(r for r in rows if r["chosen"] == "True")
    assert saved["solve"]["retry_reps"] == int(chosen["retry"])
    assert saved["budget"]["total_s"] == 200 and saved["budget"]["banking"] == (chosen["banking"] == "True")
    assert f"{saved['budget']['min_s']:g}-{saved['budget']['max_s']:g}" == chosen["clamp"]
    solved = tmp_path / "solved"
    assert main(["solve", "--engine", "replay", "--from", str(FIXTURE_RUN), "--out", str(solved), "--config",
                 str(out / "chosen.yaml"), "--set", "engine.replay_time_scale=0"]) == 0
    ran = yaml.safe_load((solved / "config.yaml").read_text())
    assert ran["solve"]["retry_reps"] == saved["solve"]["retry_reps"] and ran["budget"] == saved["budget"]
    assert (solved / "answers.csv").read_text() != ""
    kaggle = competition_config(load_config("h100-gptoss", str(out / "chosen.yaml")), competition("aimo3"))
    assert (kaggle.solve.retry_reps, kaggle.budget.banking, kaggle.budget.min_s) == (
        saved["solve"]["retry_reps"], saved["budget"]["banking"], saved["budget"]["min_s"])


def test_the_config_written_is_the_config_simulated(run: Path) -> None:
    """chosen.yaml laid over the runs' config gives the sections the pick was simulated with (``Setting.config``):
    the voter, the stoppers, both rounds' repetitions, the workers and the whole budget."""
    from solver.offline.tune import chosen_config

    report = tune(request(run, workers=(1, 4), budgets=(40.0,), stoppers=((), ("hold:0.9",)), retries=(0, 2),
                          clamps=((1.0, 30.0),), banking=(True,), overrides=(("budget.reserve_s", 0.0),)),
                  PickRule("tolerance", 100.0))
    base = report.simulation.config
    written = base.replace({f"{section}.{key}": value for section, keys in chosen_config(report).items()
                            for key, value in keys.items()})
    simulated = report.choice.setting.config(base, report.choice.problems)
    assert (written.vote, written.stop, written.solve, written.budget) == (simulated.vote, simulated.stop,
                                                                           simulated.solve, simulated.budget)
    assert written.budget.banking and written.budget.max_s == 30.0 and written.budget.problems == 24


def test_the_report_shows_the_private_rule_beside_the_public_one_with_the_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tune"
    assert main(["tune", str(FIXTURE_RUN), "--out", str(out), "--reps", "2,4", "--stopper", "none", "--stopper",
                 "agree:2", "--trials", "20", "--jobs", "1", "--scoring", "aimo3-private", "--line", "5",
                 "--compare", "1,2"]) == 0
    printed = capsys.readouterr().out
    for needle in ("Scoring: aimo3-private", "the line 5 (--line); the chosen setting clears it on",
                   "## What the data can tell", "#1 − #2",
                   "| P(≥5) |", "vs the best (score, 95 %)"):
        assert needle in printed, needle
    html = (out / "report.html").read_text()
    assert "Left: one run alone" in html and "right: aimo3-private" in html and "the line 5" in html
    assert "Differences between settings" in html
    width = int.from_bytes((out / "scores.png").read_bytes()[16:20], "big")
    assert width == 2 * 8 * 110  # two panels a setting: one run, and the two-run rule
    with open(out / "settings.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["row"] for r in rows] == ["1", "2", "3", "4"]
    assert {"first_run_p_line", "vs_best", "separable", "beyond_data", "p_line"} <= set(rows[0])
    assert sum(r["vs_best"] == "" for r in rows) == 1  # the best has no difference from itself
    assert "# scoring aimo3-private: P(score >= 5)" in (out / "chosen.yaml").read_text()


def test_without_line_the_report_holds_the_day_to_aimo3s_share_of_its_problems(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log of a few problems is not held to 47 (which it cannot reach): the line is 47/50 of its problems, and
    the report and chosen.yaml say so."""
    from solver.offline.sim.scoring import scaled_line
    from solver.runlog import read_log

    out = tmp_path / "tune"
    assert main(["tune", str(FIXTURE_RUN), "--out", str(out), "--reps", "2", "--stopper", "none", "--trials", "20",
                 "--jobs", "1"]) == 0
    k = len(read_log(FIXTURE_RUN).problems)
    said = f"the line {scaled_line(k):g}: AIMO3's prize line, 47 of 50, scaled to the day's {k} problems"
    assert k < 47 and said in capsys.readouterr().out
    assert f"# {said}" in (out / "chosen.yaml").read_text()


def test_the_default_grid_holds_every_registered_stopping_rule_or_says_why_not() -> None:
    from solver.core.stopping import STOPPERS, parse_stopper
    from solver.offline.tune.search import DEFAULT_STOPPERS, GRID_PARAMETERS, NOT_TUNED

    searched = {spec.split(":")[0] for setting in DEFAULT_STOPPERS for spec in setting}
    for name in STOPPERS.names():
        assert (name in searched) != (name in NOT_TUNED), f"stopping rule {name!r}: searched, or excluded with a reason"
    assert set(NOT_TUNED) <= set(STOPPERS.names()) and set(GRID_PARAMETERS) <= set(STOPPERS.names())
    assert () in DEFAULT_STOPPERS and ("futile:10",) in DEFAULT_STOPPERS
    for setting in DEFAULT_STOPPERS:  # every point is one the registry takes
        for spec in setting:
            parse_stopper(spec)

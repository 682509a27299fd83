"""Fitted and checked apart (issue 45): a time model names the result files it was fitted on and what each fed;
a figure on one of them is printed as the fit's residual, never as a check (``benchmarks/day_check.py``,
``python -m solver.timing.fit --check``); the check of a problem the fit saw is the model refitted without it
(leave one problem out). These pin the rules, not the figures of the day."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.timing.fit import day_fit, fit, held_out, main as fit_main, without_problem
from solver.timing.model import dump, load_time_model, names

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

SLICE = "h100_day-slice.json"


def test_every_shipped_model_names_the_runs_its_numbers_were_fitted_on() -> None:
    for name in names():
        model = load_time_model(name)
        assert model.fitted_on, name
        for entry in model.fitted_on:
            assert entry.numbers, entry
            for number in entry.numbers:  # a number named as fed is one the model has, with a source naming the run
                assert number in model.sources, (name, number)
        for b, _ in model.step_s:  # a fitted step point names its run in fitted_on and in its source alike
            for file in model.fed_by(f"step_s.{b}"):
                assert file in model.sources[f"step_s.{b}"] or "NOTES" in model.sources[f"step_s.{b}"], (name, b)


def test_a_fit_names_what_each_file_fed(results) -> None:
    base = load_time_model("h100-gptoss")
    model = fit(base, days=[results(SLICE)])
    assert set(model.fed(SLICE)) == {"step_s.7", "context_s", "request_s"}
    assert model.fed_by("context_s") == (SLICE,)
    assert model.fed("h100_real-t-36k.json") == ()


def test_the_slice_the_model_was_fitted_on_is_called_in_sample(results, check, capsys, tmp_path) -> None:
    """Any model fitted on a day file, given that file, prints its figures as the residual and checks held out."""
    model = fit(load_time_model("h100-gptoss"), days=[results(SLICE)], name="refit")
    path = tmp_path / "refit.yaml"
    path.write_text(dump(model))
    out = tmp_path / "check.json"
    check.check_day(RESULTS / SLICE, str(path), out)
    text = capsys.readouterr().out
    assert "IN-SAMPLE" in text and "the fit's residual (in-sample, not a check)" in text
    assert "check: problems within 10 % (held out)" in text
    data = json.loads(out.read_text())
    assert data["in_sample"] and data["residual"].startswith("the fit's residual")
    assert all(r["held_out_s"] is not None for r in data["rows"])
    assert all(r["check_gap"] == pytest.approx(r["measured_s"] / r["held_out_s"] - 1) for r in data["rows"])


def test_a_run_the_model_never_saw_is_a_check(check, capsys) -> None:
    """The H100 fault run fed only the rebuild: not a day slice of the fit, yet its problem is one the slice's fit
    saw, so that problem is held out; nothing is called in-sample decode."""
    model = load_time_model("h100-gptoss")
    assert model.fed("h100_day-fault.json") == ("rebuild_s",)
    check.check_day(RESULTS / "h100_day-fault.json")
    text = capsys.readouterr().out
    assert "IN-SAMPLE: h100_day-fault.json fed h100-gptoss's rebuild_s" in text


def test_fit_check_calls_a_fitted_timeline_a_residual(capsys, tmp_path) -> None:
    """The timeline fitted in the call, and one the base was fitted on, are residuals; a run neither saw checks."""
    run = str(RESULTS / "cpu_real-t-8x3000.json")
    assert fit_main(["--base", "tiny", "--timeline", run, "--check", run, "--check",
                     str(RESULTS / "cpu_real-t-4x3000.json"), "--out", str(tmp_path / "m.yaml")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if "on the fitted model" in x]
    assert len(lines) == 3 and all(x.startswith("residual (in-sample, not a check") for x in lines)
    assert "cpu_real-t-4x3000.json fed step_s.4" in lines[2]
    assert fit_main(["--base", "h100-gptoss", "--check", str(RESULTS / "h100_real-a-t-b1-12k.json"),
                     "--out", str(tmp_path / "h.yaml")]) == 0
    assert capsys.readouterr().err.startswith("check (out of sample): the plan of h100_real-a-t-b1-12k.json")


def test_fit_check_refuses_a_day_slice_in_one_line(capsys) -> None:
    assert fit_main(["--base", "h100-gptoss", "--check", str(RESULTS / SLICE)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "benchmarks/day_check.py plays it" in err


def test_a_held_out_refit_never_sees_the_problem(results) -> None:
    """The fold is the fit on the other problems, whatever the left-out problem's timeline says."""
    model = load_time_model("h100-gptoss")
    data = results(SLICE)
    left = data["problems"][0]["id"]
    fold = held_out(model, [data], left)
    assert fold == fit(model, days=[without_problem(data, left)])
    slower = json.loads(json.dumps(data))
    for row in slower["problems"][0]["timeline"]:  # the left-out problem decoding twice as slow
        row["end"] = row["first_token"] + 2 * (row["end"] - row["first_token"]) if row["first_token"] else row["end"]
    slower["_file"] = SLICE
    assert held_out(model, [slower], left) == fold
    assert fit(model, days=[slower]) != fit(model, days=[data])  # while the full fit moves with it
    assert day_fit(without_problem(data, left), model.prefill_tokens_per_s).seconds < \
        day_fit(data, model.prefill_tokens_per_s).seconds


def test_a_fold_leaves_a_problem_out_of_every_slice_that_played_it(results) -> None:
    """The same problem in two runs plays the same attempts: held out of both."""
    data = results(SLICE)
    twice = {**data, "_file": "again.json", "problems": data["problems"][:1],
             "plan": [r for r in data["plan"] if r["problem"] == data["problems"][0]["id"]]}
    assert without_problem(twice, data["problems"][0]["id"]) is None
    model = load_time_model("h100-gptoss")
    assert held_out(model, [data, twice], data["problems"][0]["id"]) == \
        held_out(model, [data], data["problems"][0]["id"])


H200 = ("h200_day-b-warmup.json", "h200_day-c-cache.json")  # the slices h200-gptoss was fitted on
COLD = "h200_day-a-cold.json"  # the same preset without the warm-up: compile holds inside the problems


def test_each_h200_slice_is_checked_on_the_fit_of_the_other(results, check) -> None:
    """Two remedied problems: fit on one, check on the other, both ways; the shipped model is the fit on both."""
    model = load_time_model("h200-gptoss")
    fitted = check.fitted_days(model, RESULTS)
    assert sorted(d["_file"] for d in fitted) == sorted(H200)
    for mine, other in (H200, H200[::-1]):
        (row,) = check.compare(results(mine), model, fitted)
        fold = held_out(model, fitted, row.id)
        assert fold == fit(model, days=[results(other)])
        assert row.held_out_s == next(r.simulated_s for r in check.played(results(mine), fold))
        assert abs(row.check_gap) <= check.PROBLEM_TARGET and row.same_stop, row


def test_the_h200_model_has_no_holds_and_under_predicts_the_cold_run_by_them(results, check) -> None:
    """The cold run (no warm-up) held for its compiles; the model of the warmed-up engine is short by about those
    seconds: the run less its holds is within 10 % of the model on each problem, the run with them is not."""
    model = load_time_model("h200-gptoss")
    rows = check.compare(results(COLD), model, check.fitted_days(model, RESULTS))
    assert model.fed(COLD) == ()
    for r in rows:
        assert r.holds > 0 and r.check_gap > 0.10, r
        assert abs((r.measured_s - r.hold_s) / r.check_s - 1) <= check.PROBLEM_TARGET, r

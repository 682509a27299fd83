"""Fitted and checked apart (issue 45): a time model names the result files it was fitted on and what each fed;
a figure on one of them is printed as the fit's residual, never as a check (``benchmarks/day_check.py``,
``python -m solver.timing.fit --check``); the check of a problem the fit saw is the model refitted without it
(leave one problem out). These pin the rules, not the figures of the day."""

from __future__ import annotations

import json
from dataclasses import replace
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
                source = model.sources[f"step_s.{b}"]
                assert file in source or "no result file kept" in source, (name, b)


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
    assert "check: problems within 10 % (held out, uncapped)" in text
    data = json.loads(out.read_text())
    assert data["in_sample"] and data["residual"].startswith("the fit's residual")
    assert all(r["held_out_s"] is not None and r["held_out_uncapped_s"] is not None for r in data["rows"])
    assert all(r["check_gap"] == pytest.approx(r["measured_s"] / r["held_out_uncapped_s"] - 1) for r in data["rows"])


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


H200 = ("h200_day-b-warmup.json", "h200_day-c-cache.json")  # the slices h200-gptoss was fitted on
COLD = "h200_day-a-cold.json"  # the same preset without the warm-up: compile holds inside the problems
MARLIN = ("h200_day-marlin.json",)  # the slice h200-gptoss-marlin was fitted on: three problems, one run
DAYS = {"h100-gptoss": (SLICE,), "h200-gptoss": H200, "h200-gptoss-marlin": MARLIN}  # each fitted model's slices


def refit(name: str, results, days: list[dict]):
    """The shipped model ``name``'s day fit made again from its base on ``days`` (the commands in
    ``solver/timing/fit.py``): ``h100-gptoss`` refits itself; the H200 models (``h200-gptoss``,
    ``h200-gptoss-marlin``) are ``h100-gptoss`` carried over by the H100 slice (``--like``)."""
    base = load_time_model("h100-gptoss")
    if name.startswith("h200-"):
        return fit(base, days=days, like=results(SLICE), name=name)
    return fit(base, days=days)


def slower(day: dict, problem: str, factor: float) -> dict:
    """``day`` with ``problem``'s requests decoding ``factor`` times as long (from the first token to the end)."""
    out = json.loads(json.dumps(day))
    for p in out["problems"]:
        if p["id"] == problem:
            for r in p["timeline"]:
                if r["first_token"] is not None:
                    r["end"] = r["first_token"] + factor * (r["end"] - r["first_token"])
    return out


def numbers(model) -> tuple:
    return model.step_s, model.context_s, model.request_s


def same_fit(a, b) -> bool:
    """The same numbers, a step point to within 1e-7 s: the shipped points are rounded to 1e-7 s, and a fold that
    moves a point ``--like`` scaled rounds it once more (``fit``'s ``fitted``), so the last digit can differ."""
    return [x for x, _ in a.step_s] == [x for x, _ in b.step_s] and \
        all(abs(s - t) <= 1.0001e-7 for (_, s), (_, t) in zip(a.step_s, b.step_s)) and \
        (a.context_s, a.request_s) == (b.context_s, b.request_s)


FOLDS = [("h100-gptoss", SLICE, i) for i in range(6)] + [("h200-gptoss", name, 0) for name in H200] + \
    [("h200-gptoss-marlin", MARLIN[0], i) for i in range(3)]


def test_every_fitted_model_is_in_the_folds() -> None:
    """Every shipped model fitted on day slices (the ones ``held_out`` refits) has its folds below."""
    fitted = {name for name in names() if any(f.endswith(".json") and "_day-" in f
                                             for f in load_time_model(name).fed_by("context_s"))}
    assert fitted == {name for name, _, _ in FOLDS}


@pytest.mark.parametrize(("name", "file", "index"), FOLDS)
def test_a_fold_never_sees_the_problem_it_leaves_out(name, file, index, results, check) -> None:
    """A fold (``held_out`` of the model fitted on every slice) is the fit from the base on the other problems
    alone, and the left-out problem's recording cannot move it: its requests decoding 1.1 times as long move the
    full fit and its figure on the problem, never its own fold's figure (under the deadline or uncapped)."""
    days = [results(f) for f in DAYS[name]]
    day = results(file)
    problem = day["problems"][index]["id"]
    full = refit(name, results, days)
    assert numbers(full) == numbers(load_time_model(name))  # the shipped model's day fit
    never = refit(name, results, [d for d in (without_problem(x, problem) for x in days) if d is not None])
    fold = held_out(full, days, problem)
    assert same_fit(fold, never)

    perturbed = [slower(d, problem, 1.1) for d in days]
    for d, x in zip(perturbed, days):
        d["_file"] = x["_file"]
    moved = refit(name, results, perturbed)
    assert numbers(moved) != numbers(full)  # the full fit sees the problem
    again = held_out(moved, perturbed, problem)
    assert same_fit(again, fold)

    def figure(model):
        row = next(r for r in check.played(day, model) if r.id == problem)
        return row.simulated, row.uncapped

    a, f, n = figure(again), figure(fold), figure(never)
    for x, y in ((a, f), (f, n)):  # the same plays; a 1e-7 s step point moves the seconds by less than 0.01 s
        assert [replace(r, seconds=0) for r in x] == [replace(r, seconds=0) for r in y]
        assert [r.seconds for r in x] == pytest.approx([r.seconds for r in y], abs=0.01)
    assert figure(moved)[1].seconds > figure(full)[1].seconds


def test_like_scales_the_points_once(results) -> None:
    """``--like``: the H100's step points at the batches the H200 slices cannot tell, times the hold-free step
    at batch 7 the two machines measured (the H200's over the H100's), once; a point the fitted batch-7 step
    contradicts (the points keep rising) is dropped, not bent."""
    h100 = load_time_model("h100-gptoss")
    days = [results(f) for f in H200]
    ratio = day_fit(days, h100.prefill_tokens_per_s).decode.step_s / \
        day_fit(results(SLICE), h100.prefill_tokens_per_s).decode.step_s
    model = refit("h200-gptoss", results, days)
    step = dict(model.step_s)
    for b, s in h100.step_s:
        if b == 7:
            continue
        if s * ratio > step[7] and b < 7:
            assert b not in step
        else:
            assert step[b] == pytest.approx(s * ratio, abs=1e-7), b
    assert f"times {ratio:.4f}" in model.sources["step_s.1"]


def test_a_fold_leaves_a_problem_out_of_every_slice_that_played_it(results) -> None:
    """The same problem in two runs plays the same attempts: held out of both."""
    data = results(SLICE)
    twice = {**data, "_file": "again.json", "problems": data["problems"][:1],
             "plan": [r for r in data["plan"] if r["problem"] == data["problems"][0]["id"]]}
    assert without_problem(twice, data["problems"][0]["id"]) is None
    model = load_time_model("h100-gptoss")
    assert held_out(model, [data, twice], data["problems"][0]["id"]) == \
        held_out(model, [data], data["problems"][0]["id"])


def test_each_h200_slice_is_checked_on_the_fit_of_the_other(results, check) -> None:
    """Two remedied problems: fit on one, check on the other, both ways; each fold is the fit from the base on the
    other slice alone, and the check's figures are that model's plays."""
    model = load_time_model("h200-gptoss")
    fitted = check.fitted_days(model, RESULTS)
    assert sorted(d["_file"] for d in fitted) == sorted(H200)
    for mine, other in (H200, H200[::-1]):
        (row,) = check.compare(results(mine), model, fitted)
        never = refit("h200-gptoss", results, [results(other)])
        assert numbers(held_out(model, fitted, row.id)) == numbers(never)
        (alone,) = check.played(results(mine), never)
        assert (row.held_out, row.held_out_uncapped) == (alone.simulated, alone.uncapped)
        assert row.check_s == alone.uncapped.seconds


def test_the_check_is_judged_uncapped_and_its_stops_held_out(results, check) -> None:
    """aimo3-q10-g4M (run c) on the fit on b alone is slower than the run: under the deadline it is cut at the
    slot's end, which reads as a small error, and stops otherwise than the run (its agree:4); uncapped it runs
    to the run's own stop, and that is the figure the targets are judged on. The model fitted on both stops as
    the run did (in-sample): the stops are judged on the fold."""
    model = load_time_model("h200-gptoss")
    day = results(H200[1])
    (row,) = check.compare(day, model, check.fitted_days(model, RESULTS))
    assert row.stop_m == "agree:4" and row.same_stop  # the in-sample model
    assert row.held_out.stop == "deadline" and row.held_out.seconds == pytest.approx(row.allotted_s, abs=0.05)
    assert row.held_out_uncapped.stop == "agree:4" and row.held_out_uncapped.seconds > row.allotted_s
    assert not row.check_same_stop and row.check_same_stop_uncapped
    assert row.check_s == row.held_out_uncapped.seconds
    assert abs(row.check_gap) > abs(row.check_capped_gap)
    ok, lines = check.verdict([row])
    assert not ok and lines[2] == "same stops (held out): 0/1 under the deadline, 1/1 uncapped"
    assert f"({row.check_gap:+.1%})".replace("%", " %") in lines[1]


def test_the_h200_model_has_no_holds_and_under_predicts_the_cold_run_by_them(results, check) -> None:
    """The cold run (no warm-up) held for its compiles; the model of the warmed-up engine is short by about those
    seconds: the run less its holds is within 10 % of the model on each problem, the run with them is not."""
    model = load_time_model("h200-gptoss")
    rows = check.compare(results(COLD), model, check.fitted_days(model, RESULTS))
    assert model.fed(COLD) == ()
    for r in rows:
        assert r.holds > 0 and r.check_gap > 0.10, r
        assert abs((r.measured_s - r.hold_s) / r.check_s - 1) <= check.PROBLEM_TARGET, r

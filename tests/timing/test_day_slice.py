"""The simulator held to the H100 day slice (``benchmarks/day_check.py`` on ``benchmarks/results/h100_day-slice.json``:
6 dev problems x 8 real attempts uncapped through the Kaggle path, 1,642.5 s): the simulator's own day, fed the
slice's plan, config, budget, rules and launch order, timed by the shipped ``h100-gptoss`` model, makes the run's
stop decisions. The model was fitted on this slice, so its figures on it are the fit's residual; the check is each
problem on the model refitted without it (``tests/timing/test_fitted_apart.py`` pins that rule). The holds and the
fit's numbers are what the time model's sources say."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.timing.measured import HOLD_S, day_fit, holds
from solver.timing.model import load_time_model

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

HELD_MOST = "aimo3-21818"


@pytest.fixture(scope="module")
def rows(results, check):
    return check.compare(results("h100_day-slice.json"), load_time_model("h100-gptoss"))


def test_the_simulator_makes_the_runs_stops(results, rows) -> None:
    assert [r.id for r in rows] == results("h100_day-slice.json")["identity"]["problems"]
    for r in rows:
        assert r.same_stop, r
        assert (r.stop_s, r.launched_s) == ("agree:4", 8)


def test_every_problem_of_the_slice_is_checked_held_out(results, check) -> None:
    """The slice fed the model: no problem of it is checked on the model that saw it."""
    model = load_time_model("h100-gptoss")
    rows = check.compare(results("h100_day-slice.json"), model, check.fitted_days(model, RESULTS))
    assert all(r.held_out_s is not None and r.check_s == r.held_out_s for r in rows)
    assert sum(r.measured_s for r in rows) == pytest.approx(1642.456, abs=0.01)


def test_the_same_problem_after_the_rebuild_is_held_out_of_the_fit(results, check) -> None:
    """The fault run played aimo3-21818 again (the same 8 attempts) after the engine's rebuild: 112.6 s. The slice's
    run of it fed the fit, so the fault's figure is checked on the model refitted without it."""
    model = load_time_model("h100-gptoss")
    killed, again = check.compare(results("h100_day-fault.json"), model, check.fitted_days(model, RESULTS))
    assert killed.killed and killed.answer_m == "0" and killed.held_out_s is None  # not compared
    assert again.id == HELD_MOST and again.same_stop and again.held_out_s is not None, again
    assert check.verdict([killed, again])[1][2] == "same stops (held out): 1/1 under the deadline, 1/1 uncapped"


def test_the_holds_the_model_pays(results, rows) -> None:
    """42 holds of the engine (a first token more than HOLD_S after the send, every decoding sequence waiting with
    it: the KV usage frozen), 105.3 s of the slice's 1,642.5 s; the fit divides its decode by 1 - 6.4 %."""
    found = day_fit(results("h100_day-slice.json"), load_time_model("h100-gptoss").prefill_tokens_per_s)
    assert (found.holds, round(found.hold_s, 1), round(found.seconds, 1)) == (42, 105.3, 1642.5)
    assert sum(r.holds for r in rows) == found.holds
    assert found.decode.sequences == 7 and found.decode.requests == 496
    assert found.request_s == pytest.approx(0.154, abs=0.001)
    model = load_time_model("h100-gptoss")
    assert model.context_s == pytest.approx(found.decode.context_s / (1 - found.hold_share), rel=1e-3)
    assert dict(model.step_s)[7] == pytest.approx(found.decode.step_s / (1 - found.hold_share), rel=1e-6)


def test_a_hold_is_a_long_wait_for_a_first_token(results) -> None:
    """None of the slice's later requests waited between 0.9 and 1.6 s for its first token: HOLD_S parts the two."""
    waits = [r["first_token"] - r["start"] for p in results("h100_day-slice.json")["problems"] for r in p["timeline"]
             if r["turn"] > 0 and r["first_token"] is not None]
    assert not [w for w in waits if 0.9 < w < 1.6]
    assert 0.9 < HOLD_S < 1.6
    assert holds([{"turn": 1, "start": 0.0, "first_token": 2.0}, {"turn": 1, "start": 1.0, "first_token": 3.5}]) == \
        [(0.0, 3.5)]


def test_the_rebuild_is_the_faults(rows) -> None:
    model = load_time_model("h100-gptoss")
    assert model.rebuild_s == 61.6 and "h100_day-fault.json" in model.sources["rebuild_s"]

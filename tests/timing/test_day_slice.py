"""The simulator held to the H100 day slice (``benchmarks/day_check.py`` on ``benchmarks/results/h100_day-slice.json``:
6 dev problems x 8 real attempts uncapped through the Kaggle path, 1,642.5 s): the simulator's own day, fed the
slice's plan, config, budget, rules and launch order, timed by the shipped ``h100-gptoss`` model, makes the run's
stop decisions, predicts the slice's total within 3 % and each problem within 10 %, all but the one whose engine
held most (aimo3-21818: 9 holds, 22.0 s of its 128.0 s, against 6.4 % of the slice's time; its second run, after
the fault's rebuild, had 6 holds, 11.3 s of 112.6 s, and is within 10 %). The holds and the fit's numbers are what
the time model's sources say."""

from __future__ import annotations

import doctest
import importlib
import json
import sys
from pathlib import Path

import pytest

from solver.timing.fit import HOLD_S, day_fit, holds
from solver.timing.model import load_time_model

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))  # the benchmarks import each other as top-level modules

HELD_MOST = "aimo3-21818"


def day(name: str) -> dict:
    data = json.loads((RESULTS / name).read_text())
    data["_file"] = name
    return data


@pytest.fixture(scope="module")
def check():
    return importlib.import_module("day_check")


@pytest.fixture(scope="module")
def rows(check):
    return check.compare(day("h100_day-slice.json"), load_time_model("h100-gptoss"))


def test_the_check_module_doctests_pass(check) -> None:
    assert doctest.testmod(check).failed == 0


def test_the_simulator_makes_the_runs_stops(rows) -> None:
    assert [r.id for r in rows] == day("h100_day-slice.json")["identity"]["problems"]
    for r in rows:
        assert r.same_stop, r
        assert (r.stop_s, r.launched_s) == ("agree:4", 8)


def test_the_slice_total_within_three_per_cent(rows) -> None:
    measured = sum(r.measured_s for r in rows)
    assert measured == pytest.approx(1642.456, abs=0.01)
    assert abs(measured / sum(r.simulated_s for r in rows) - 1) <= 0.03


def test_each_problem_within_ten_per_cent_but_the_one_the_engine_held_most(rows) -> None:
    for r in rows:
        if r.id == HELD_MOST:
            assert 0.10 < r.gap < 0.20 and r.holds == 9 and r.hold_s / r.measured_s > 0.15, r
            assert r.hold_s == max(x.hold_s for x in rows)
        else:
            assert abs(r.gap) <= 0.10, r


def test_the_same_problem_after_the_rebuild_within_ten_per_cent(check) -> None:
    """The fault run played aimo3-21818 again (the same 8 attempts) after the engine's rebuild: 112.6 s."""
    rows = check.compare(day("h100_day-fault.json"), load_time_model("h100-gptoss"))
    killed, again = rows
    assert killed.killed and killed.answer_m == "0"  # answered the default after the kill, not compared
    assert again.id == HELD_MOST and again.same_stop and abs(again.gap) <= 0.10, again
    assert check.verdict(rows)[1][2] == "same stops: 1/1"


def test_the_holds_the_model_pays(rows) -> None:
    """42 holds of the engine (a first token more than HOLD_S after the send, every decoding sequence waiting with
    it: the KV usage frozen), 105.3 s of the slice's 1,642.5 s; the fit divides its decode by 1 - 6.4 %."""
    found = day_fit(day("h100_day-slice.json"), load_time_model("h100-gptoss").prefill_tokens_per_s)
    assert (found.holds, round(found.hold_s, 1), round(found.seconds, 1)) == (42, 105.3, 1642.5)
    assert sum(r.holds for r in rows) == found.holds
    assert found.decode.sequences == 7 and found.decode.requests == 496
    assert found.request_s == pytest.approx(0.154, abs=0.001)
    model = load_time_model("h100-gptoss")
    assert model.context_s == pytest.approx(found.decode.context_s / (1 - found.hold_share), rel=1e-3)
    assert dict(model.step_s)[7] == pytest.approx(found.decode.step_s / (1 - found.hold_share), rel=1e-6)


def test_a_hold_is_a_long_wait_for_a_first_token() -> None:
    """None of the slice's later requests waited between 0.9 and 1.6 s for its first token: HOLD_S parts the two."""
    waits = [r["first_token"] - r["start"] for p in day("h100_day-slice.json")["problems"] for r in p["timeline"]
             if r["turn"] > 0 and r["first_token"] is not None]
    assert not [w for w in waits if 0.9 < w < 1.6]
    assert 0.9 < HOLD_S < 1.6
    assert holds([{"turn": 1, "start": 0.0, "first_token": 2.0}, {"turn": 1, "start": 1.0, "first_token": 3.5}]) == \
        [(0.0, 3.5)]


def test_the_rebuild_is_the_faults(rows) -> None:
    model = load_time_model("h100-gptoss")
    assert model.rebuild_s == 61.6 and "h100_day-fault.json" in model.sources["rebuild_s"]

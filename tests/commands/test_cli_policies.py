"""`solver solve --voter NAME --stopper NAME[,NAME]` works with every policy, through the replay engine (the
same pipeline as a live run: repetition loop, sandbox, voting, stopping; recorded generations, no model)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from solver.cli import main
from solver.core.stopping import STOPPERS
from solver.core.voting import VOTERS

FIXTURE_RUN = Path(__file__).parents[1] / "data" / "replay_run"


def solve(tmp_path: Path, *flags: str) -> tuple[list[dict], list[dict]]:
    # Three of the recording's six problems: every policy still votes on several, each with its own tally.
    out = tmp_path / "run"
    code = main(["solve", "--engine", "replay", "--from", str(FIXTURE_RUN), "--out", str(out), "--reps", "6",
                 "--workers", "3", "--limit", "3", "--set", "engine.replay_time_scale=0", *flags])
    assert code == 0
    lines = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    with open(out / "answers.csv") as handle:
        return lines, list(csv.DictReader(handle))


@pytest.mark.parametrize("voter", VOTERS.names())
def test_every_voter_runs_from_the_command_line(tmp_path, voter):
    lines, answers = solve(tmp_path, "--voter", voter)
    problems = [line for line in lines if line["type"] == "problem"]
    assert [a["id"] for a in answers] == [p["id"] for p in problems]
    assert all(a["answer"].isdigit() for a in answers)


@pytest.mark.parametrize("stopper", [name for name in STOPPERS.names()] + ["agree:2,beta:0.8"])
def test_every_stopper_runs_from_the_command_line(tmp_path, stopper):
    lines, answers = solve(tmp_path, "--stopper", stopper)
    results = [line for line in lines if line["type"] == "result"]
    assert len(results) == len(answers) > 0
    for result in results:
        assert result["repetitions"] <= 6
        assert result["stopped_by"] == "max_reps" or any(
            part.split(":")[0] in result["stopped_by"] for part in stopper.split(","))


def test_an_agreement_stop_cuts_the_run_short(tmp_path):
    lines, _ = solve(tmp_path, "--stopper", "agree:2")
    results = [line for line in lines if line["type"] == "result"]
    assert all(r["stopped_by"] == "agree:2" for r in results)
    assert sum(r["repetitions"] for r in results) < 6 * len(results)

"""The day slice (``solver day``, which ``benchmarks/day.py`` runs; ``solver.measure.day.kaggle_day``): recorded attempts
through the Kaggle path (``KagglePredictor``, its budget and its engine supervisor), problem after problem, across
device calls. The plan's live limits and carried tool seconds are checked against the recording; one run on the
real engine (the tiny harmony model) plays a slice over two "calls" with the preset's rules acting and the engine
killed mid-problem: the one test of the supervisor's engine start and rebuild here. Timing is never asserted.
"""

from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from solver.cli import main as solver_main

ROOT = Path(__file__).resolve().parents[1]

# Three dev problems: aimo3-15245's first attempt calls python within its first 300 tokens (the others answer
# in one request), so with 3 s calls agree:4 cancels it; the last two answer 5 (8 of 8) and 13 (7 of 8).
SLICE = ("aimo3-15245", "aimo3-q10-g0-g4M", "aimo3-q10-g4M")


def run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def write_extract(source: Path, out: Path, problems: tuple[str, ...], attempts: int, seconds: float) -> Path:
    """The first ``attempts`` attempts of ``problems`` (as extract_attempts.py picks them), each line carrying
    ``seconds`` per request as its measured tool seconds."""
    picked: dict[str, list[dict]] = {p: [] for p in problems}
    with lzma.open(source, "rt") as handle:
        for line in handle:
            record = json.loads(line)
            if record["problem_id"] in picked and len(picked[record["problem_id"]]) < attempts:
                picked[record["problem_id"]].append(record)
    with lzma.open(out, "wt") as handle:
        for pid in problems:
            for record in picked[pid]:
                handle.write(json.dumps({**record, "tool_seconds": [seconds] * 400}) + "\n")
    return out


@pytest.fixture(scope="module")
def extract(real_attempts_path, tmp_path_factory):
    """The slice's 3 problems x 8 attempts, each call carrying 0.5 s."""
    return write_extract(real_attempts_path, tmp_path_factory.mktemp("day") / "x.jsonl.xz", SLICE, 8, 0.5)


@pytest.fixture(scope="module")
def gptoss_config():
    from solver.config import load_config

    return load_config("h100-gptoss")


def main(argv: list[str]) -> int:
    """``solver day`` in this process (``benchmarks/day.py`` is that command)."""
    return solver_main(["day", *argv])


def test_carried_tool_seconds_reach_the_plan_without_reading_the_code(extract, gptoss_config):
    from solver.measure.workload import Caps, plan
    from solver.replay import read_attempts

    seconds = [attempt.tool_seconds for attempt in read_attempts(extract)]
    assert seconds == [(0.5,) * 400] * 24
    replays = plan(read_attempts(extract), Caps(problems=1, attempts=8, only=(SLICE[2],)), gptoss_config,
                   carried=True)[0]
    calls = [s for r in replays for s in r.steps if s.call]
    assert calls and all(s.tool_s == 0.5 and s.code is None for s in calls)


def test_live_limits_end_attempts_where_the_loop_and_the_engine_end_them(real_attempts, gptoss_config):
    """Uncapped, the preset's own limits (60k tokens per attempt as the loop counts them, 32k per request, 65k
    context) end an attempt in the request where one bites: it decodes up to the limit, with no answer."""
    from solver.measure.workload import Caps, plan
    from solver.measure.workload import ReplayLimits

    limits = ReplayLimits.of(gptoss_config)
    problems = plan(real_attempts, Caps(problems=3, attempts=8, at_limit="length"), gptoss_config)
    recorded = {}
    for attempt in real_attempts:
        recorded.setdefault(attempt.problem_id, []).append(attempt)
    ended = whole = 0
    for replays in problems:
        for replay in replays:
            attempt = recorded[replay.problem.id][replay.index]
            counted = 0
            for step in replay.steps:
                assert step.prompt_tokens + step.tokens <= limits.max_model_len
                assert step.tokens <= min(limits.max_tokens, limits.max_total_tokens - counted)
                counted += step.tokens + len(step.ending)
            last = replay.steps[-1]
            if last.limit or last.call:  # a limit ended it: no answer, fewer requests or tokens than recorded
                ended += 1
                assert not replay.answered and not last.ending
                assert len(replay.steps) < len(attempt.requests) or last.tokens < last.recorded_tokens
            else:
                whole += 1
                assert replay.answered and len(replay.steps) == len(attempt.requests)
                assert [s.tokens for s in replay.steps] == [len(r.generated) for r in attempt.requests]
    assert ended >= 1 and whole >= 15


def test_bad_input_is_one_line_and_exit_2_before_anything_starts(extract, tmp_path, capsys):
    out = tmp_path / "day.json"
    common = ["--attempts-file", str(extract), "--problems", "3", "--json", str(out)]
    for args, message in ((["--kill-engine-at", "2"], "--kill-engine-at: PROBLEM:SECONDS"),
                          (["--kill-engine-at", "3:5"], "not the slice's last problem"),
                          (["--kill-engine-at", "aimo3-x:5"], "is no problem of the slice"),
                          (["--label", "a"], "--label and --table go together"),
                          (["--until", "100", "--hard-stop", "50"], "--hard-stop must be >= --until"),
                          (["--attempts", "9"], "0 problems have at least 9 attempts"),
                          (["--tool-time", "soon"], "--tool-time: 'auto', 'carried', 'measure' or seconds")):
        assert main([*common, *args]) == 2, args
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err, (args, captured)
        assert not out.exists()
    out.write_text("{}")
    assert main(common) == 2 and "exists: pass --resume" in capsys.readouterr().err


def test_the_estimate_plays_the_slice_on_the_time_model_and_splits_it_into_calls(extract, tmp_path, capsys):
    assert main(["--gpu", "--attempts-file", str(extract), "--problems", "3", "--estimate", "--until", "540"]) == 0
    printed = capsys.readouterr().out
    assert "estimate on time model h100-gptoss (start 131 s), rules kaggle" in printed
    rows = [line for line in printed.splitlines() if line.startswith(SLICE)]
    assert len(rows) == 3 and all(("agree:4" in r) or ("deadline" in r) or ("max_reps" in r) for r in rows)
    assert "call 1: problems 1" in printed
    # with a shipped compile cache the gate counts the start an engine makes from it (the model's rebuild_s)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "manifest.json").write_text("{}")
    assert main(["--gpu", "--attempts-file", str(extract), "--problems", "3", "--estimate", "--until", "540",
                 "--set", f"engine.compile_cache={cache}"]) == 0
    assert "estimate on time model h100-gptoss (start 62 s, from the compile cache)" in capsys.readouterr().out


def test_the_attempts_file_defaults_to_the_setting(extract, tmp_path, monkeypatch, capsys):
    """Without ``--attempts-file`` the day reads ``$SOLVER_ATTEMPTS`` (``solver.replay.attempts_path``)."""
    estimate = ["--gpu", "--problems", "3", "--estimate", "--until", "540"]
    assert main(["--attempts-file", str(extract), *estimate]) == 0
    given = capsys.readouterr().out
    monkeypatch.setenv("SOLVER_ATTEMPTS", str(extract))
    assert main(estimate) == 0
    assert capsys.readouterr().out == given
    missing = tmp_path / "none.jsonl.xz"
    monkeypatch.setenv("SOLVER_ATTEMPTS", str(missing))
    assert main(estimate) == 2
    assert capsys.readouterr().err == f"solver: error: --attempts-file: no file {missing}\n"


def test_a_day_file_without_its_answers_gets_them_from_its_extract(extract, tmp_path):
    """``day_check.py FILE --add-answers EXTRACT``: the flags the file was run with (its identity) go through the
    options and the plan ``solver day`` makes (``day_options``), and each attempt of the stored plan gets its answer
    back; another extract is refused."""
    from solver.cli import build_parser
    from solver.commands.day import options
    from solver.errors import BadInput
    from solver.measure.day.held_out import add_answers as add_day_answers
    from solver.measure.day.call import identity
    from solver.measure.day.options import day_config, load_plan, plan_rows

    out = tmp_path / "day.json"
    parsed = build_parser().parse_args(["day", "--attempts-file", str(extract), "--problems", "3", "--json", str(out)])
    day = options(parsed, None)
    problems, _ = load_plan(day)
    rows = plan_rows(problems)
    ident = identity(day, day_config(day, len(problems)), [rs[0].problem.id for rs in problems])
    out.write_text(json.dumps({"identity": ident, "plan": [{**r, "answer": None} for r in rows]}))
    assert add_day_answers(out, extract) == 24
    assert json.loads(out.read_text())["plan"] == rows and any(r["answer"] is not None for r in rows)
    other = write_extract(extract, tmp_path / "other.jsonl.xz", SLICE, 8, 1.0)
    with pytest.raises(BadInput, match="is not the extract day.json was run from"):
        add_day_answers(out, other)


@pytest.mark.slow
def test_measured_tool_seconds_travel_with_the_extract(real_attempts_path, tmp_path):
    from solver.replay import read_attempts

    out = tmp_path / "measured.jsonl.xz"
    done = run("benchmarks/extract_attempts.py", str(out), "--source", str(real_attempts_path), "--problem-ids",
               "aimo3-21818", "--attempts", "2", "--measure-tools", timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    attempts = read_attempts(out)
    seconds = [attempt.tool_seconds for attempt in attempts]
    for attempt, times in zip(attempts, seconds, strict=True):
        assert times is not None and len(times) == len(attempt.requests)
        assert all(0.0 <= t <= 6.0 for t in times)  # cut at the preset's sandbox timeout
        ran = [t for t, r in zip(times, attempt.requests) if r.tool_output is not None]
        assert ran and all(t > 0 for t in ran)
    source = json.loads(lzma.open(out, "rt").readline())["tool_seconds_source"]
    assert "measure_calls" in source and "h100-gptoss" in source


@pytest.mark.slow
@pytest.mark.engine
def test_a_slice_resumes_across_calls_with_the_rules_acting_and_survives_a_killed_engine(real_attempts_path,
                                                                                        tmp_path):
    """Call 1 plays aimo3-15245 (agree:4 cancels the attempt still in its 3 s call); call 2 continues with the
    engine core killed 1 s into the next problem: the supervisor rebuilds it at the last problem, the problem in
    flight gets an answer, the run log keeps every attempt, nothing is left running."""
    extract = write_extract(real_attempts_path, tmp_path / "x.jsonl.xz", SLICE, 8, 3.0)
    out = tmp_path / "day.json"
    common = ["benchmarks/day.py", "--attempts-file", str(extract), "--problems", "3", "--attempts", "8",
              "--attempt-tokens", "300", "--json", str(out), "--resume"]
    first = run(*common, "--max-problems", "1", timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    state = json.loads(out.read_text())
    assert [p["id"] for p in state["problems"]] == ["aimo3-15245"]
    one = state["problems"][0]
    assert one["stopped_by"] == "agree:4" and one["cancelled"] >= 1 and one["correct"] is True
    assert one["finished"] + one["cancelled"] == 8 and one["allotted_s"] > 0 and not one["deadline_cut"]
    assert one["timeline"] and one["prefix_hit_rate"] is not None and one["kv_peak"] is not None
    assert state["calls"][0]["ended"] == "max-problems" and state["calls"][0]["log"]["ok"]
    assert state["calls"][0]["left_running"] == [] and state["identity"]["rules"] == "kaggle"

    second = run(*common, "--kill-engine-at", "2:1", timeout=1200)
    assert second.returncode == 0, second.stderr[-3000:]
    state = json.loads(out.read_text())
    assert [p["id"] for p in state["problems"]] == list(SLICE) and len(state["calls"]) == 2
    killed, after = state["problems"][1], state["problems"][2]
    fault = state["fault"]
    assert fault["problem"] == SLICE[1] and fault["killed"] and fault["pids"]
    assert fault["answered"]["status"] in ("solved", "partial", "default") and killed["statuses"].get("error")
    assert fault["rebuild"]["problem"] == SLICE[2] and fault["rebuild"]["rebuild_s"] > 0
    assert fault["rebuild"]["engine_builds"] == 2 and fault["log_complete"] is True
    assert after["stopped_by"] == "agree:4" and after["answer"] == 13 and after["correct"] is True
    # The day's clock goes on from call 1 (its engine start counted once); the budget gave every problem a deadline.
    assert state["problems"][0]["day_end_s"] <= killed["day_start_s"] <= killed["day_end_s"] <= after["day_start_s"]
    assert all(p["allotted_s"] > 0 and p["deadline_cut"] == (p["stopped_by"] == "deadline")
               for p in state["problems"])
    call = state["calls"][1]
    assert call["ended"] == "done" and call["log"]["ok"] and call["left_running"] == []
    assert [e["what"] for e in call["engine"]] == ["open", "close", "open", "close"]

    table = tmp_path / "variants.json"
    again = run(*common, "--label", "preset", "--table", str(table), timeout=300)
    assert again.returncode == 0 and "the slice is complete" in again.stderr
    assert len(json.loads(out.read_text())["calls"]) == 2
    row, = json.loads(table.read_text())["rows"]  # the finished run, a labelled row of the variants' table
    assert row["label"] == "preset" and row["complete"] and [p["id"] for p in row["problems"]] == list(SLICE)
    assert "preset" in again.stdout and row["decoded_tokens"] == sum(p["decoded_tokens"] for p in state["problems"])
    other = run(*[a if a != "8" else "4" for a in common], timeout=300)
    assert other.returncode == 2 and "--resume:" in other.stderr and "attempts = 8" in other.stderr


def test_day_rules_are_one_closed_set_and_the_tool_time_words_another():
    from typing import get_args

    from solver.commands.day import RULES
    from solver.measure.day.options import DAY_RULES, DayRules
    from solver.measure.tool_seconds import TOOL_TIME_MODES, ToolTimeMode, tool_time_seconds

    assert RULES == DAY_RULES == get_args(DayRules)  # --rules offers exactly what the day acts on
    assert TOOL_TIME_MODES == get_args(ToolTimeMode) == ("auto", "carried", "measure")
    with pytest.raises(Exception, match="'auto', 'carried', 'measure' or seconds"):
        tool_time_seconds("soon")  # any other word is not seconds either

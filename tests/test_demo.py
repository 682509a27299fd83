"""`solver demo`: what it prints and the files it writes (never its timing), and the recorded programs it replays
giving, through the real sandbox, the answers the corpus recorded."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, solver_cmd

from solver.cli import main
from solver.demo.corpus import option_values, read_corpus, write_corpus_run
from solver.demo.run import replay_config
from solver.runlog import read_log


def demo(out: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The command as `make demo` runs it; stdout is a pipe here, so the screen is one line per problem."""
    return subprocess.run(solver_cmd("demo", "--out", str(out), *extra), capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def number(pattern: str, text: str) -> tuple[str, ...]:
    found = re.search(pattern, text)
    assert found, f"no {pattern!r} in:\n{text}"
    return found.groups()


def recorded_answers(run_dir: Path) -> dict[tuple[str, int], tuple[str, ...]]:
    """The corpus's own answer per program, as the demo recorded it."""
    return {(r.problem_id, r.index): tuple(a.value for a in r.answers) for r in read_log(run_dir).repetitions}


def code_answers(reps) -> dict[tuple[str, int], tuple[str, ...]]:
    """What each replayed program printed in the sandbox, as an answer (none when it printed no option)."""
    return {(r.problem_id, r.index): tuple(a.value for a in r.answers if a.source == "code") for r in reps}


def same_as_recorded(reps, recorded: Path) -> None:
    """Each replayed program printed the option the corpus recorded for it (none where it recorded none). A
    program the sandbox stopped at its 5 s limit (a loaded machine) is left out; they must stay rare."""
    ran = [r for r in reps if r.executions[0].status != "timeout"]
    assert len(ran) >= 0.98 * len(reps)
    want = recorded_answers(recorded)
    got = code_answers(ran)
    assert got == {key: want[key] for key in got} and sum(map(bool, got.values())) > 0


def check_replayed_part(out: Path, screen: str, questions: int) -> None:
    """The replayed part's lines say what its run directory holds, and the leaderboard's files are there."""
    records = read_log(out / "replayed")
    results = records.results
    right = sum(bool(r.correct) for r in results)
    launched = sum(r.launched for r in results)
    assert len(results) == questions
    assert "2/2 REPLAYED" in screen and f"{30 * questions:,} recorded programs" in screen
    assert number(r"replayed: (\d+)/(\d+) right", screen) == (str(right), str(questions))
    assert number(r"ran ([\d,]+) of ([\d,]+) programs: hold:0\.9 ended (\d+)", screen) == (
        f"{launched:,}", f"{30 * questions:,}", str(sum(r.launched < 30 for r in results)))
    # Early stopping fired and saved programs; each program ran in the sandbox and voted with what it printed.
    assert any(r.stopped_by == "hold:0.9" for r in results) and launched < 30 * questions
    reps = [r for r in records.repetitions if r.status == "done"]
    assert reps and all(len(r.executions) == 1 for r in reps)
    same_as_recorded(reps, out / "recorded")
    # One line per replayed question on a pipe, each with its tally and what ended it.
    assert len(re.findall(r"^\[\d+/\d+\] aqua-\d+: \d ", screen, re.M)) == questions
    for name in ("answers.csv", "report.md", "log.jsonl", "config.yaml"):
        assert (out / "replayed" / name).is_file()
    config = yaml.safe_load((out / "replayed" / "config.yaml").read_text())
    assert config["engine"]["name"] == "replay" and config["stop"]["stoppers"] == ["hold:0.9"]
    # The leaderboard simulation: its table, the calibration line and the report's path, which exists.
    assert "LEADERBOARD SIMULATION" in screen
    for policy in ("every program", "lossless", "beta:0.95", "margin:3", "hold:0.9"):
        assert re.search(rf"^{re.escape(policy)}\b.* \d+\.\d %", screen, re.M), policy
    assert "calibration:" in screen
    pick = number(r"tune's pick: (\S+) at cap (\d+), ([\d.]+) % expected", screen)
    chosen = yaml.safe_load((out / "leaderboard" / "chosen.yaml").read_text())
    assert [pick[0]] == (chosen["stop"]["stoppers"] or ["none"]) and int(pick[1]) == chosen["solve"]["reps"]
    html = Path(number(r"report \(frontier, score spread, chosen\.yaml\): (\S+)", screen)[0])
    assert html == (out / "leaderboard" / "report.html").resolve() and html.stat().st_size > 10_000
    for name in ("frontier.png", "accuracy_vs_reps.png", "scores.png", "chosen.yaml", "settings.csv", "tune.md"):
        assert (out / "leaderboard" / name).stat().st_size > 0
    assert "solver kaggle-local" in screen and "--model PATH" in screen


def test_replayed_part_and_leaderboard(tmp_path: Path):
    out = tmp_path / "demo"
    done = demo(out, "--skip-live", "--questions", "12", "--trials", "20")
    assert done.returncode == 0, done.stderr
    check_replayed_part(out, done.stdout, 12)
    assert "LIVE" not in done.stdout and not (out / "live").exists()


def demo_here(out: Path, *extra: str) -> int:
    """The command in this process (``solver.cli.main``): for input it refuses before anything runs."""
    try:
        return main(["demo", "--out", str(out), *extra])
    except SystemExit as exit_:  # argparse's usage errors
        return int(exit_.code or 0)


@pytest.mark.parametrize("args, needle", [
    (("--questions", "0"), "--questions"),
    (("--trials", "1"), "--trials"),
])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               args: tuple[str, ...], needle: str):
    assert demo_here(tmp_path / "demo", "--skip-live", *args) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "demo").exists()


def test_an_out_directory_that_holds_files_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    (tmp_path / "keep.txt").write_text("mine")
    assert demo_here(tmp_path, "--skip-live") == 2
    assert "already holds files" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_every_question_of_the_corpus_has_five_options():
    questions = {s.problem_id: s.problem for s in read_corpus()}
    assert len(questions) == 88
    assert {len(option_values(text or "")) for text in questions.values()} == {5}


def test_recorded_programs_print_the_recorded_answers_in_the_sandbox(tmp_path: Path):
    # The first 6 questions' 180 programs, replayed with stopping off: each prints the option the corpus
    # recorded for it (the whole corpus agrees too: 1,170 of 1,170 answers, 1,470 of 1,470 without one).
    from solver.replay.replay_engine import problems_from_log
    from solver.loop.run import solve_run

    recorded = write_corpus_run(tmp_path / "recorded", replay_config(None, 1), problems=6)
    assert (recorded.problems, recorded.samples) == (6, 180)
    config = replay_config(recorded.run_dir, 6).replace({"stop.stoppers": []})
    asyncio.run(solve_run(config, problems_from_log(recorded.run_dir), tmp_path / "replayed"))
    reps = read_log(tmp_path / "replayed").repetitions
    assert len(reps) == 180
    same_as_recorded(reps, recorded.run_dir)


@pytest.mark.engine
def test_the_live_part_on_the_real_engine_then_a_short_replay(tmp_path: Path):
    # The live part as `make demo` runs it (the embedded model on the real engine, its own start), then the replay
    # and the simulation on 12 questions: their whole-corpus run is the same code, test_replayed_part_and_leaderboard's.
    out = tmp_path / "demo"
    done = demo(out, "--questions", "12", "--trials", "20", timeout=1200)
    assert done.returncode == 0, done.stderr
    screen = done.stdout
    assert "1/2 LIVE" in screen and "embedded SmolLM2-135M" in screen
    live = read_log(out / "live").results
    assert len(live) == 8
    assert number(r"live: (\d+)/8 right", screen) == (str(sum(bool(r.correct) for r in live)),)
    if any(r.executions for r in read_log(out / "live").repetitions):
        assert "as logged: the model's code, then what the sandbox gave back" in screen
    assert (out / "live" / "engine.log").stat().st_size > 0  # vLLM's start-up output, kept off the screen
    assert "Loading safetensors" not in screen and "Loading safetensors" not in done.stderr
    check_replayed_part(out, screen, 12)
    assert screen.index("1/2 LIVE") < screen.index("2/2 REPLAYED") < screen.index("LEADERBOARD SIMULATION")

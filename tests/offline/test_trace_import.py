"""Real gpt-oss attempts (harmony token traces) imported as runs and replayed through the whole pipeline.

The attempts are read from ../shared at run time (skipped with one line without it); a small extract of them is
written to a temporary file, never into the repository: four attempts at three problems, one to three tool calls
each, so the real sandbox replays them in seconds."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from solver.cli import main
from solver.config import load_config
from solver.core.voting import text_answer
from solver.dialects.harmony import load_encoding
from solver.dialects.output import OutputStyle, describe_execution
from solver.recordings import import_samples
from solver.recordings.trace_import import turn_seconds
from solver.replay import read_attempts
from solver.runlog import read_log
from solver.types import Turn

# aimo3-32951: 1 attempt, 1 tool call; aimo3-50: 2 attempts; imo-2017-sl-c2-n82: 1 attempt, 3 calls, a wrong answer.
PROBLEMS = ("aimo3-32951", "aimo3-50", "imo-2017-sl-c2-n82")
RATE = 100.0  # tokens per second the import times turns with


@pytest.fixture(scope="module")
def extract(real_attempts_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("traces") / "extract.jsonl.xz"
    with lzma.open(real_attempts_path, "rt") as source, lzma.open(path, "wt") as target:
        for line in source:
            if json.loads(line)["problem_id"] in PROBLEMS:
                target.write(line)
    return path


@pytest.fixture(scope="module")
def imported(extract: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("imported") / "run"
    summary = import_samples(extract, run, load_config("h100-gptoss"), tokens_per_s=RATE)
    assert (summary.kind, summary.problems, summary.samples, summary.shortened) == ("attempts", 3, 4, 0)
    return run


def test_each_attempt_is_a_repetition_logged_turn_by_turn(extract: Path, imported: Path):
    enc = load_encoding()
    style = OutputStyle.from_config(load_config("h100-gptoss").prompt)
    records = read_log(imported)
    assert [(p.id, p.answer) for p in records.problems] == [("aimo3-32951", "32951"), ("aimo3-50", "50"),
                                                             ("imo-2017-sl-c2-n82", "10086")]
    reps = {pid: list(r) for pid, r in records.finished().items()}
    for attempt in read_attempts(extract):
        rep = reps[attempt.problem_id].pop(0)
        assert rep.status == "done" and len(rep.turns) == len(attempt.requests)
        assert [t.token_ids for t in rep.turns] == [r.generated for r in attempt.requests]
        assert [t.prompt_tokens for t in rep.turns] == [len(attempt.prompt_of(k)) for k in range(len(rep.turns))]
        # The log's text is the recorded context exactly: the prompt, then each turn and what followed it.
        whole = enc.decode(list(attempt.prompt_of(len(attempt.requests) - 1) + attempt.requests[-1].generated))
        assert enc.decode(list(attempt.prompt_ids)) + rep.text == whole
        for turn, request in zip(rep.turns, attempt.requests):
            if request.tool_output is None:
                assert turn.execution is None
            else:
                assert turn.execution.code.strip() and describe_execution(turn.execution, style) == \
                    request.tool_output
            assert turn.duration_s == pytest.approx(len(request.generated) / RATE)
        assert rep.duration_s == pytest.approx(attempt.generated_tokens / RATE)
        assert text_answer(rep).value == attempt.trace_answer  # the harness's own extraction agrees


def test_turn_seconds_without_a_rate_are_zero():
    assert turn_seconds(Turn("", 10, 500, "stop", 3.0), None) == 0.0


def test_the_cli_reads_traces_with_the_gptoss_preset_and_refuses_other_texts(extract: Path, tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]):
    assert main(["import-samples", str(extract), "--out", str(tmp_path / "a")]) == 0
    assert "imported 4 attempts (10 turns) of 3 problems" in capsys.readouterr().out
    for extra, message in ((["--set", "prompt.template=aimo3"], "request 0's prompt differs from the recorded one"),
                           (["--preset", "tiny"], "token traces are read with the harmony dialect"),
                           (["--tokens-per-s", "0"], "--tokens-per-s must be > 0")):
        assert main(["import-samples", str(extract), "--out", str(tmp_path / "b"), *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def replay(imported: Path, out: Path, *sets: str) -> dict:
    args = ["solve", "--engine", "replay", "--from", str(imported), "--preset", "h100-gptoss", "--out", str(out),
            "--reps", "2", "--set", "engine.replay_time_scale=0", "--set", "budget.total_s=null",
            "--set", "budget.cutoff_s=null"]
    for item in sets:
        args += ["--set", item]
    assert main(args) == 0
    return read_log(out).finished()


def test_replay_with_recorded_outputs_gives_each_call_its_recorded_output(imported: Path, tmp_path: Path):
    recorded = read_log(imported).finished()
    replayed = replay(imported, tmp_path / "run", "engine.replay_outputs=true")
    for pid, reps in recorded.items():
        for old, new in zip(reps, replayed[pid]):
            # The watch cut each attempt's last turn at the token the harness cut it: the same turns come back.
            assert new.status == "done" and [t.token_ids for t in new.turns] == [t.token_ids for t in old.turns]
            assert [t.execution for t in new.turns] == [t.execution for t in old.turns]
            assert [t.appended for t in new.turns] == [t.appended for t in old.turns]
            assert new.answers == old.answers
        # --reps 2 asks for more attempts than one problem recorded: the missing one is an error, not a vote.
        assert [r.status for r in replayed[pid][len(reps):]] == ["error"] * (2 - len(reps))


@pytest.mark.slow  # ~7 s: the recorded code run again in the real sandbox (the fast tier reads it back only)
def test_replay_with_the_real_sandbox_runs_the_recorded_code(imported: Path, tmp_path: Path):
    style = OutputStyle.from_config(load_config("h100-gptoss").prompt)
    recorded = read_log(imported).finished()
    replayed = replay(imported, tmp_path / "run", "sandbox.timeout_s=30")
    same = calls = 0
    for pid, reps in recorded.items():
        for old, new in zip(reps, replayed[pid]):
            assert [t.token_ids for t in new.turns] == [t.token_ids for t in old.turns]
            assert text_answer(new) == text_answer(old)
            for a, b in zip(old.turns, new.turns):
                if a.execution is not None:
                    calls += 1
                    assert b.execution.code == a.execution.code and b.execution.duration_s > 0
                    same += describe_execution(b.execution, style) == describe_execution(a.execution, style)
    assert calls == 6 and same >= 4, (same, calls)

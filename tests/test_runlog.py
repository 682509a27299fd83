"""Run log: exact round trips, durable appends, torn-line tolerance, resume semantics and clear errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from solver.config import Config
from solver.runlog import (
    LOG_NAME,
    SCHEMA,
    LogError,
    RunLog,
    decode,
    encode,
    problem_from_json,
    problem_to_json,
    read_log,
    repetition_from_json,
    repetition_to_json,
    result_from_json,
    result_to_json,
)
from solver.types import Answer, Execution, Problem, ProblemResult, Repetition, Turn


def make_rep(pid: str = "p1", index: int = 0, status: str = "done", answer: str = "42") -> Repetition:
    turns = (
        Turn("Let me compute.\n```python\nprint(6*7)\n```", 120, 18, "stop", 0.8125,
             Execution("print(6*7)", "ok", "42\n", "", 0.0375), "```output\n42\n```\n", 0.31, 0.12),
        Turn(f"So the answer is \\boxed{{{answer}}} — ünïcode ✓", 160, 12, "stop", 0.4, None, "", None, None,
             cached_tokens=128),
    )
    return Repetition(pid, index, 1000 + index, status, turns, (Answer(answer, answer, "code"),
                                                                 Answer(answer, f"\\boxed{{{answer}}}", "boxed")),
                      1_763_800_000.123456, 1.2125, None if status != "error" else "engine failed")


def make_result(pid: str = "p1") -> ProblemResult:
    return ProblemResult(pid, "42", {"42": 2.0, "7": 0.6}, 3, 4, "beta>=0.95", 3.5, 90, True)


def test_repetition_round_trip_is_exact_through_json_text():
    rep = make_rep()
    back = repetition_from_json(json.loads(json.dumps(repetition_to_json(rep))))
    assert back == rep
    assert back.text == rep.text and back.generated_tokens == 30


def _every_field_set() -> list[object]:
    """One record of every type the log holds (nested ones included), each field away from its default."""
    execution = Execution("print(6*7)", "timeout", "42\n", "Traceback ...", 0.0375, state_lost=True)
    turn = Turn("Let me compute.\n```python\nprint(6*7)\n```", 120, 18, "length", 0.8125, execution,
                "```output\n42\n```\n", 0.31, 0.12, cached_tokens=96, token_ids=(200005, 17, 0))
    answer = Answer("42", "\\boxed{42}", "boxed")
    rep = Repetition("p1", 3, 1003, "error", (turn, replace(turn, execution=None)), (answer,), 1_763_800_000.5,
                     1.25, error="engine failed")
    return [execution, turn, answer, rep, Problem("p1", "What is $6 \\times 7$?", "42", {"level": "1"}),
            ProblemResult("p1", "42", {"42": 2.0, "7": 0.6}, 3, 4, "margin:2", 3.5, 90, False)]


@pytest.mark.parametrize("record", _every_field_set(), ids=lambda r: type(r).__name__)
def test_every_field_of_every_record_round_trips_through_json_text(record):
    import dataclasses

    for f in dataclasses.fields(record):
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        assert getattr(record, f.name) != default, f"{type(record).__name__}.{f.name} is left at its default"
    back = decode(type(record), json.loads(json.dumps(encode(record))))
    assert back == record and type(back) is type(record)


def test_a_line_written_before_a_field_existed_reads_with_its_default():
    old = {"code": "x", "status": "ok", "stdout": "", "stderr": "", "duration_s": 0.1}  # no state_lost
    assert decode(Execution, old) == Execution("x", "ok", "", "", 0.1)
    line = repetition_to_json(make_rep())
    for turn in line["turns"]:
        del turn["token_ids"], turn["cached_tokens"]
    assert repetition_from_json(line).turns[0].token_ids == ()


def test_result_and_problem_round_trip():
    result = make_result()
    assert result_from_json(json.loads(json.dumps(result_to_json(result)))) == result
    assert list(result_from_json(result_to_json(result)).votes) == ["42", "7"]  # first-seen order kept
    problem = Problem("p1", "What is $6 \\times 7$?\nAnswer:", None, {"level": "1"})
    assert problem_from_json(json.loads(json.dumps(problem_to_json(problem)))) == problem


def test_create_writes_config_meta_and_refuses_an_existing_log(tmp_path: Path):
    config = Config().replace({"solve.reps": 5})
    log = RunLog.create(tmp_path / "run", config)
    log.close()
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["schema"] == SCHEMA and meta["python"] and "torch" in meta and "vllm" in meta
    assert (tmp_path / "run" / LOG_NAME).exists()
    with pytest.raises(LogError, match="already holds a run log"):
        RunLog.create(tmp_path / "run", config)
    _, saved = RunLog.resume(tmp_path / "run")
    assert saved == config


def test_appends_are_read_back_in_order(tmp_path: Path):
    log = RunLog.create(tmp_path, Config())
    log.append_problem(Problem("p1", "text", "42"))
    reps = [make_rep(index=i) for i in range(3)]
    for rep in reps:
        log.append(rep)
    log.append_result(make_result())
    log.close()
    records = read_log(tmp_path)
    assert records.repetitions == reps
    assert records.results == [make_result()]
    assert records.problems == [Problem("p1", "text", "42")]
    assert records.config == Config()
    lines = (tmp_path / LOG_NAME).read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["problem"] + ["repetition"] * 3 + ["result"]
    assert all(json.loads(line)["schema"] == SCHEMA for line in lines)


def _log_with_torn_tail(tmp_path: Path, tail: bytes) -> Path:
    log = RunLog.create(tmp_path, Config())
    log.append(make_rep(index=0))
    log.append(make_rep(index=1))
    log.close()
    with open(tmp_path / LOG_NAME, "ab") as f:
        f.write(tail)
    return tmp_path


def test_torn_last_line_is_ignored_by_readers(tmp_path: Path):
    whole = json.dumps({"type": "repetition", "schema": 1, **repetition_to_json(make_rep(index=2))}).encode()
    run = _log_with_torn_tail(tmp_path, whole[: len(whole) // 2])
    records = read_log(run)
    assert [r.index for r in records.repetitions] == [0, 1]


def test_torn_line_before_the_end_is_an_error(tmp_path: Path):
    path = tmp_path / LOG_NAME
    run = _log_with_torn_tail(tmp_path, b'{"type": "repeti\n')
    with open(path, "ab") as f:
        f.write(json.dumps({"type": "result", "schema": 1, **result_to_json(make_result())}).encode() + b"\n")
    with pytest.raises(LogError, match="line 3 is not valid JSON"):
        read_log(run)
    with pytest.raises(LogError, match="line 3"):
        RunLog.resume(run)


def test_resume_cuts_the_torn_line_then_appends_cleanly(tmp_path: Path):
    run = _log_with_torn_tail(tmp_path, b'{"type": "repetition", "schema": 1, "problem_id": "p1", "ind')
    log, _ = RunLog.resume(run)
    log.append(make_rep(index=2))
    log.close()
    lines = (run / LOG_NAME).read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])
    assert [r.index for r in read_log(run).repetitions] == [0, 1, 2]


def test_resume_keeps_a_whole_last_line_that_lost_only_its_newline(tmp_path: Path):
    whole = json.dumps({"type": "repetition", "schema": 1, **repetition_to_json(make_rep(index=2))}).encode()
    run = _log_with_torn_tail(tmp_path, whole)
    log, _ = RunLog.resume(run)
    assert [r.index for r in log.completed()["p1"]] == [0, 1, 2]
    log.append(make_rep(index=3))
    log.close()
    assert [r.index for r in read_log(run).repetitions] == [0, 1, 2, 3]


def test_resume_counts_finished_only_and_never_writes_duplicates(tmp_path: Path):
    log = RunLog.create(tmp_path, Config())
    log.append(make_rep("p1", 0))
    log.append(make_rep("p1", 1, status="cancelled"))
    log.append(make_rep("p1", 2, status="length"))
    log.append(make_rep("p2", 0, status="error"))
    log.append_result(make_result("p2"))
    log.close()
    log, _ = RunLog.resume(tmp_path)
    assert {pid: [r.index for r in reps] for pid, reps in log.completed().items()} == {"p1": [0, 2], "p2": [0]}
    assert set(log.results()) == {"p2"}
    log.append(make_rep("p1", 1))  # the cancelled one reruns
    log.append(make_rep("p1", 0))  # already on disk: not written again
    log.append_result(make_result("p2"))  # already decided: not written again
    log.close()
    records = read_log(tmp_path)
    finished = [(r.problem_id, r.index) for r in records.repetitions if r.status != "cancelled"]
    assert sorted(finished) == [("p1", 0), ("p1", 1), ("p1", 2), ("p2", 0)]
    assert len(records.results) == 1
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert len(meta["resumed_at"]) == 1


@pytest.mark.parametrize("content, message", [
    (None, "no run log"),
    (b"", "is empty"),
    (b'{"type": "problem", "sch', "holds only a torn line"),
    (b'{"type": "repetition", "schema": 2}\n', "schema 2"),
    (b'{"type": "banana", "schema": 1}\n', "unknown record type"),
    (b'{"type": "repetition", "schema": 1, "problem_id": "p"}\n', "not a valid repetition record"),
])
def test_bad_logs_give_one_line_errors(tmp_path: Path, content: bytes | None, message: str):
    if content is not None:
        (tmp_path / LOG_NAME).write_bytes(content)
    with pytest.raises(LogError, match=message) as info:
        read_log(tmp_path)
    assert "\n" not in str(info.value)


def test_a_run_from_another_schema_is_refused(tmp_path: Path):
    RunLog.create(tmp_path, Config()).close()
    (tmp_path / "meta.json").write_text(json.dumps({"schema": 99}))
    with pytest.raises(LogError, match="schema 99"):
        RunLog.resume(tmp_path)


def test_resume_of_a_directory_without_config_fails(tmp_path: Path):
    with pytest.raises(LogError, match="not a run directory"):
        RunLog.resume(tmp_path)


def test_an_empty_log_reads_when_allowed(tmp_path: Path):
    RunLog.create(tmp_path, Config()).close()  # killed before its first record
    records = read_log(tmp_path, allow_empty=True)
    assert records.repetitions == [] and records.config == Config()
    log, _ = RunLog.resume(tmp_path)
    assert log.completed() == {} and log.results() == {}
    log.close()


def test_a_second_create_on_the_same_directory_leaves_the_first_runs_files_alone(tmp_path: Path):
    first = Config().replace({"solve.reps": 5})
    RunLog.create(tmp_path, first).close()
    config_before = (tmp_path / "config.yaml").read_bytes()
    meta_before = (tmp_path / "meta.json").read_bytes()
    with pytest.raises(LogError, match="already holds a run log"):
        RunLog.create(tmp_path, Config().replace({"solve.reps": 9}))
    assert (tmp_path / "config.yaml").read_bytes() == config_before
    assert (tmp_path / "meta.json").read_bytes() == meta_before
    _, saved = RunLog.resume(tmp_path)
    assert saved.solve.reps == 5


def test_config_and_meta_are_fsynced_under_a_temporary_name_before_they_replace_the_real_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import os

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: object, dst: object) -> None:
        events.append(("replace", f"{src}->{dst}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    RunLog.create(tmp_path, Config()).close()
    for name in ("config.yaml", "meta.json"):
        final = str(tmp_path / name)
        renames = [i for i, (kind, what) in enumerate(events) if kind == "replace" and what.endswith("->" + final)]
        assert len(renames) == 1, (name, events)
        source = events[renames[0]][1].split("->")[0]
        assert source != final
        assert ("fsync", source) in events[: renames[0]], (name, events)  # the bytes are durable first
        assert ("fsync", str(tmp_path)) in events[renames[0]:], (name, events)  # then the rename


@pytest.mark.parametrize("content", ["", "# nothing\n", "- a list\n"])
def test_an_empty_or_damaged_config_is_never_read_as_the_default(tmp_path: Path, content: str):
    RunLog.create(tmp_path, Config().replace({"solve.reps": 5})).close()
    (tmp_path / "config.yaml").write_text(content)  # what a crash during an unsynced write can leave
    with pytest.raises(LogError, match="config.yaml is empty or damaged"):
        RunLog.resume(tmp_path)
    with pytest.raises(LogError, match="config.yaml is empty or damaged"):
        read_log(tmp_path, allow_empty=True)


def test_two_creates_racing_on_one_directory_leave_the_winners_files_alone(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    # Two runs started at once both see no log yet; only the exclusive create may decide who writes.
    RunLog.create(tmp_path, Config().replace({"solve.reps": 5})).close()
    config_before = (tmp_path / "config.yaml").read_bytes()
    meta_before = (tmp_path / "meta.json").read_bytes()
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self, *a, **k: False if self.name == LOG_NAME else real_exists(self))
    with pytest.raises(LogError, match="already holds a run log"):
        RunLog.create(tmp_path, Config().replace({"solve.reps": 9}))
    monkeypatch.undo()
    assert (tmp_path / "config.yaml").read_bytes() == config_before
    assert (tmp_path / "meta.json").read_bytes() == meta_before


def test_the_stall_benchmark_runs_in_its_quick_mode():
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "benchmarks/runlog_stall.py", "--quick"], cwd=root, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "on the loop" in done.stdout and "off the loop" in done.stdout and "ratio on/off" in done.stdout

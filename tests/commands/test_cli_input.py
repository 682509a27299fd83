"""Bad input to `solver solve`: one clear line on stderr, exit code 2, nothing left in RUN_DIR. No engine starts.

The command runs in this process (``solver.cli.main``, what the ``solver`` script calls), its stderr captured:
what is under test is its argument and input handling. One case runs it as a process, for the exit code and the
stderr a shell sees."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import pytest
from conftest import solver_cmd

from solver.cli import main


@dataclass(frozen=True)
class Ran:
    """What a run of the command left: its exit code and what it wrote to stderr."""

    returncode: int
    stderr: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]):
    """``run_cli(*args)``: the command with ``args``, in this process."""
    def run(*args: str) -> Ran:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors
            code = int(exit_.code or 0)
        return Ran(code, capsys.readouterr().err)

    return run


def one_error_line(done: Ran | subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "error" in lines[0]
    return lines[0]


@pytest.mark.parametrize("content, needle", [
    ("id,question_text\n1,hi\n", "problem"),                     # missing column
    ("id,problem,answer\n1,,3\n", "empty"),                      # empty problem text
    ('{"problem": "x"\n', "line 1"),                            # malformed JSONL
])
def test_bad_data_files(tmp_path, run_cli, content, needle):
    suffix = ".jsonl" if content.startswith("{") else ".csv"
    data = tmp_path / f"data{suffix}"
    data.write_text(content)
    out = tmp_path / "run"
    done = run_cli("solve", str(data), "--out", str(out))
    assert done.returncode == 2
    assert needle in one_error_line(done).lower()
    assert not out.exists()


def test_missing_file_and_missing_model(tmp_path, run_cli):
    out = tmp_path / "run"
    done = run_cli("solve", str(tmp_path / "nope.csv"), "--out", str(out))
    assert done.returncode == 2 and "nope.csv" in one_error_line(done)
    data = tmp_path / "d.csv"
    data.write_text("id,problem\n1,What is 1+1?\n")
    done = run_cli("solve", str(data), "--out", str(out), "--model", str(tmp_path / "no-model"))
    assert done.returncode == 2 and "no-model" in one_error_line(done)
    assert not out.exists()


def test_unknown_flag_and_config_key(tmp_path, run_cli):
    data = tmp_path / "d.csv"
    data.write_text("id,problem\n1,What is 1+1?\n")
    done = run_cli("solve", str(data), "--out", str(tmp_path / "r"), "--frobnicate")
    assert done.returncode == 2 and "frobnicate" in one_error_line(done)
    done = run_cli("solve", str(data), "--out", str(tmp_path / "r"), "--set", "solve.nonsense=3")
    assert done.returncode == 2 and "solve.nonsense" in one_error_line(done)
    done = run_cli("solve", str(data), "--out", str(tmp_path / "r"), "--reps", "0")
    assert done.returncode == 2 and "reps" in one_error_line(done)
    done = run_cli("solve", str(data), "--out", str(tmp_path / "r"), "--stopper", "bogus")
    assert done.returncode == 2 and "bogus" in one_error_line(done)
    done = run_cli("solve", str(data), "--out", str(tmp_path / "r"), "--set", "sampling.extra.temperature=0.1")
    assert done.returncode == 2 and "sampling.extra.temperature" in one_error_line(done)
    assert not (tmp_path / "r").exists()


def test_existing_run_dir_is_refused_by_the_command_as_a_process(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("id,problem\n1,What is 1+1?\n")
    out = tmp_path / "run"
    out.mkdir()
    (out / "log.jsonl").write_text("")
    done = subprocess.run(solver_cmd("solve", str(data), "--out", str(out)), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "--resume" in one_error_line(done)
    assert (out / "log.jsonl").read_text() == ""


def test_sampling_extra_that_vllm_refuses_is_one_line_before_the_engine_starts(tmp_path, run_cli):
    pytest.importorskip("vllm")  # vLLM's SamplingParams is what refuses
    data = tmp_path / "d.csv"
    data.write_text("id,problem\n1,What is 1+1?\n")
    for item, needle in (("sampling.extra.bogus_knob=1", "bogus_knob"), ("sampling.extra.min_p=5", "min_p")):
        done = run_cli("solve", str(data), "--out", str(tmp_path / "r"), "--set", item)
        assert done.returncode == 2 and needle in one_error_line(done)
    assert not (tmp_path / "r").exists()


def test_resume_with_an_empty_config_is_refused_not_run_with_defaults(tmp_path, run_cli):
    from solver.config import Config
    from solver.runlog import RunLog
    from solver.types import Problem

    run = tmp_path / "run"
    with RunLog.create(run, Config().replace({"solve.reps": 3})) as log:
        log.append_problem(Problem("1", "What is 1+1?", "2"))
    (run / "config.yaml").write_text("")  # left by a crash during an unsynced write
    done = run_cli("solve", "--resume", str(run))
    assert done.returncode == 2 and "config.yaml" in one_error_line(done)
    assert (run / "config.yaml").read_text() == ""

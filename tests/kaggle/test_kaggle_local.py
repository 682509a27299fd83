"""``solver kaggle-local``: bad input is one line and exit 2 before any model loads; the command runs the
competition's real gateway when given one (``--gateway DIR``), else the rehearsal gateway."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from kaggle_doubles import FaultyScriptedEngine, columns, fast_config, scripted_factory

from solver.kaggle.predictor import KagglePredictor, PredictorOptions

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
GATEWAYS = HERE / "gateways"


def _solver(argv: list[str], cwd: Path, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, "-m", "solver", *argv], capture_output=True, text=True,
                          timeout=timeout_s, cwd=cwd, env=env)


@pytest.mark.parametrize("argv, message", [
    (["kaggle-local", "no-such-file.csv"], "no such file"),
    (["kaggle-local", "demo", "--competition", "aimo9"], "invalid choice"),
    (["kaggle-local", "demo", "--time-limit", "0"], "--time-limit"),
    (["kaggle-local", "demo", "--set", "solve.reps=0"], "solve.reps"),
    (["kaggle-local", "demo", "--voter", "no-such-voter"], "no-such-voter"),
    (["kaggle-local", "demo", "--stopper", "no-such-stopper"], "no-such-stopper"),
    (["kaggle-local", "demo", "--set", "prompt.template=no-such-prompt"], "no-such-prompt"),
    (["kaggle-local", "demo", "--engine", "no-such-engine"], "no-such-engine"),
    (["kaggle-local", "demo", "--gateway", "."], "holds no kaggle_evaluation"),
    (["kaggle-local", "demo", "--competition", "aimo3", "--gateway", str(GATEWAYS / "aimo2")],
     "cannot import kaggle_evaluation.aimo_3_inference_server"),
])
def test_kaggle_local_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, tmp_path: Path) -> None:
    done = _solver([*argv, "--out", str(tmp_path / "out")], cwd=tmp_path, timeout_s=120)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A problem file and a run the scripted engine double recorded for it (replayed by the commands below)."""
    root = tmp_path_factory.mktemp("recorded")
    data = root / "test.csv"
    pl.DataFrame({"id": ["a", "b", "c"], "problem": ["x?", "y?", "z?"], "answer": ["42", "42", "7"]}
                 ).write_csv(data)
    factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    recorder = KagglePredictor(fast_config(), "aimo3", PredictorOptions(open_session=factory, run_dir=root / "run"))
    try:
        for row_id in ("a", "b", "c"):
            recorder(*columns(row_id))
    finally:
        recorder.close()
    return data, root / "run"


@pytest.mark.parametrize("gateway", ["kaggle_evaluation", "rehearsal"])
def test_kaggle_local_replays_a_recorded_run_through_either_gateway(gateway: str, recorded: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    """The whole command (config, predictor, gateway, outputs), generation replayed from a recorded run."""
    data, run = recorded
    argv = ["kaggle-local", str(data), "--competition", "aimo2", "--engine", "replay", "--from", str(run),
            "--set", "engine.replay_time_scale=0", "--seed", "5", "--out", "out"]
    if gateway == "kaggle_evaluation":
        argv += ["--gateway", str(GATEWAYS / "aimo2")]
    done = _solver(argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    submission = pl.read_parquet(out / "submission.parquet")
    assert sorted(submission.rows()) == [("a", 42), ("b", 42), ("c", 42)]
    assert submission.schema["answer"] == pl.Int64
    report = (out / "report.md").read_text()
    assert f"{gateway} gateway" in report and "score: 2/3" in report and "faults: 0" in report
    calls = (out / "run" / "calls.jsonl").read_text().splitlines()
    assert len(calls) == 3 and all('"status": "solved"' in line for line in calls)
    if gateway == "kaggle_evaluation":
        assert pl.read_csv(out / "test.csv").columns == ["id", "question"], "the AIMO2 layout"

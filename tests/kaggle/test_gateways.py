"""The notebook's code path (``KagglePredictor`` + ``solver.kaggle.serve``) through Kaggle's real gateways
(tests/kaggle/gateways: AIMO2 and AIMO3, unchanged), each in its own process: the gRPC relay, its argument and
response checks, its submission.parquet. Scripted-engine runs check the control flow through both gateways; the
real engine's start through a real gateway is the submission notebook's test (tests/test_notebooks.py, AIMO3), one
start for the kind. Every run checks that no process it started outlives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import psutil
import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
GATEWAYS = HERE / "gateways"
DRIVER = HERE / "gateway_driver.py"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KAGGLE_IS_COMPETITION_RERUN"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    return {**env, **extra}


def still_running(pids: list[int], wait_s: float = 30.0) -> list[int]:
    """Of ``pids``, those alive (not zombies) after up to ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        left = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    left.append(pid)
            except psutil.Error:
                continue
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def drive(comp: str, engine: str, cwd: Path, timeout_s: float, *extra: str) -> dict[str, Any]:
    """The driver over the competition's own local gateway and test.csv (``extra``: more of its arguments); its
    report. Every process started under it is gone once it has exited."""
    report = cwd / "report.json"
    done = subprocess.run([sys.executable, str(DRIVER), comp, str(GATEWAYS / comp), str(GATEWAYS / comp / "test.csv"),
                           str(report), "--engine", engine, *extra], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout_s)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert still_running(result["children_seen"]) == []
    return result


def check_submission(path: Path, comp: str) -> pl.DataFrame:
    """One row per test.csv id, ids unchanged, Int64 answers inside the competition's range."""
    from solver.kaggle.competition import competition

    c = competition(comp)
    expected = pl.read_csv(GATEWAYS / comp / "test.csv", schema_overrides={"id": pl.String})["id"].to_list()
    submission = pl.read_parquet(path)
    assert submission.columns == ["id", "answer"]
    assert submission.schema["answer"] == pl.Int64 and submission.schema["id"] == pl.String
    assert sorted(submission["id"].to_list()) == sorted(expected) and submission.height == len(expected)
    assert all(c.low <= a <= c.high for a in submission["answer"].to_list())
    return submission


def test_the_relay_accepts_the_endpoint_serve_hands_it_and_refuses_the_predictor_object() -> None:
    """Kaggle's relay takes plain named functions only and routes by ``__name__``."""
    probe = ("import sys; sys.path.insert(0, sys.argv[1])\n"
             "from kaggle_evaluation.core.relay import define_server\n"
             "from solver.kaggle.serve import endpoint\n"
             "class Predictor:\n"
             "    def __call__(self, *args): return None\n"
             "server = define_server(endpoint(Predictor())); server.stop(0)\n"
             "try:\n"
             "    define_server(Predictor())\n"
             "except ValueError as exc:\n"
             "    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(GATEWAYS / "aimo3")], env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "refused: Endpoint listeners passed to `serve` must be functions" in done.stdout


@pytest.mark.parametrize("comp, answer", [("aimo2", 42), ("aimo3", 2042)])
def test_scripted_engine_through_the_real_gateway(comp: str, answer: int, tmp_path: Path) -> None:
    report = drive(comp, "scripted", tmp_path, timeout_s=300)
    submission = check_submission(tmp_path / "submission.parquet", comp)
    assert set(submission["answer"].to_list()) == {answer}, "2042, taken mod 1000 for AIMO2"
    assert [c["status"] for c in report["calls"]] == ["solved"] * 3
    assert sorted(c["id"] for c in report["calls"]) == sorted(submission["id"].to_list())
    assert report["left"] == [], report["left"]


TUNED = ROOT / "evaluation" / "results" / "tune-aimo3" / "chosen.yaml"  # what solver tune wrote for gpt-oss


def test_the_notebooks_config_file_reaches_the_real_gateway_under_its_overrides(tmp_path: Path) -> None:
    """The shipped notebook's cells with ``CONFIG`` set to a policy ``solver tune`` wrote and a key added to
    ``OVERRIDES``: the policy is what the gateway's calls run (its stopper fires), the added key wins over the file,
    and what the file does not set stays the preset's."""
    import yaml

    tuned = yaml.safe_load(TUNED.read_text())
    assert tuned["stop"]["stoppers"] == ["agree:4"] and tuned["solve"]["reps"] == 8  # the tiny preset differs
    settings = tmp_path / "settings.py"
    settings.write_text('PRESET = "tiny"\nMODEL = None\n'
                        f'CONFIG = {str(TUNED)!r}\n'
                        'OVERRIDES["solve.reps"] = 6\n')
    report = drive("aimo3", "scripted", tmp_path, 300, "--notebook", str(settings))
    check_submission(tmp_path / "submission.parquet", "aimo3")
    assert [(c["status"], c["stopped_by"], c["repetitions"]) for c in report["calls"]] == [("solved", "agree:4", 4)] * 3
    ran = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert ran["preset"] == "tiny" and ran["stop"]["stoppers"] == ["agree:4"] and ran["vote"]["voter"] == "majority"
    assert ran["solve"]["reps"] == 6, "OVERRIDES win over CONFIG"
    assert ran["prompt"]["dialect"] == "fences" and ran["engine"]["compile_cache"] is None, "the rest: the preset's"
    assert report["left"] == [], report["left"]


def _descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


def test_scripted_rerun_serves_in_one_process_and_the_gateway_runs_in_another(tmp_path: Path) -> None:
    """A competition rerun: the notebook's ``serve`` blocks in ``.serve()`` with KAGGLE_IS_COMPETITION_RERUN set;
    the gateway's ``run()`` is another process (here on localhost; Kaggle's names the host inference_server)."""
    server_dir, gateway_dir = tmp_path / "server", tmp_path / "gateway"
    server_dir.mkdir()
    gateway_dir.mkdir()
    report = server_dir / "report.json"
    test_csv = GATEWAYS / "aimo3" / "test.csv"
    server = subprocess.Popen([sys.executable, str(DRIVER), "aimo3", str(GATEWAYS / "aimo3"), str(test_csv),
                               str(report), "--engine", "scripted"], cwd=server_dir,
                              env=_env(KAGGLE_IS_COMPETITION_RERUN="1"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        gateway = ("import sys; sys.path.insert(0, sys.argv[1])\n"
                   "import kaggle_evaluation.aimo_3_gateway as g\n"
                   "g.AIMO3Gateway((sys.argv[2],)).run()\n")
        done = subprocess.run([sys.executable, "-c", gateway, str(GATEWAYS / "aimo3"), str(test_csv)],
                              cwd=gateway_dir, env=_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert server.poll() is None, "serve() keeps serving on a rerun until the process is stopped"
        children = _descendants(server.pid)
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0, stderr[-3000:]
    check_submission(gateway_dir / "submission.parquet", "aimo3")
    result = json.loads(report.read_text())
    assert result["rerun"] and result["interrupted"]
    assert [c["status"] for c in result["calls"]] == ["solved"] * 3
    assert result["left"] == []
    assert still_running(sorted(children | set(result["children_seen"]))) == []


def test_serve_without_kaggle_evaluation_is_a_one_line_error_and_closes_the_predictor(tmp_path: Path) -> None:
    from kaggle_doubles import FaultyScriptedEngine, columns, fast_config, scripted_factory

    from solver.config import ConfigError
    from solver.kaggle import KagglePredictor, PredictorOptions, serve

    assert "kaggle_evaluation" not in sys.modules, "the gateways run in subprocesses only"
    factory, built = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predictor = KagglePredictor(fast_config(), "aimo3", PredictorOptions(open_session=factory))
    predictor(*columns("warm"))  # an engine exists, so closing has something to close
    with pytest.raises(ConfigError, match="kaggle_evaluation not found") as caught:
        serve(predictor, tmp_path / "test.csv")
    assert len(str(caught.value).splitlines()) == 1
    assert built[0].closed, "serve closed the predictor on the way out"


def test_a_frame_the_real_gateway_refuses_is_the_rehearsals_failure(tmp_path: Path) -> None:
    """kaggle-local's real-gateway path reports the gateway's own verdict (here INVALID_SUBMISSION: two rows
    for one) instead of raising it."""
    script = ("import sys, json; from pathlib import Path\n"
              "import polars as pl\n"
              "from solver.kaggle import competition, find_server\n"
              "from solver.measure.rehearsal import run_gateway\n"
              "class TwoRows:\n"
              "    calls = []\n"
              "    def __call__(self, id_, problem):\n"
              "        return pl.DataFrame({'id': [id_.item(0)] * 2, 'answer': [1, 2]})\n"
              "comp = competition('aimo3')\n"
              "server = find_server(comp, sys.argv[1])\n"
              "r = run_gateway(TwoRows(), server, sys.argv[2], Path('out'), comp=comp)\n"
              "print(json.dumps(r.faults))\n")
    done = subprocess.run([sys.executable, "-c", script, str(GATEWAYS / "aimo3"), str(GATEWAYS / "aimo3" / "test.csv")],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (fault,) = json.loads(done.stdout.strip().splitlines()[-1])
    assert fault.startswith("gateway: INVALID_SUBMISSION") and "expected 1 rows but received 2" in fault
    assert "INVALID_SUBMISSION" in (tmp_path / "out" / "report.md").read_text()

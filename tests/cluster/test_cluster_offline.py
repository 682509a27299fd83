"""``solver simulate`` and ``solver tune`` with ``--cluster``: the trials run as Ray tasks (joblib's Ray backend, as
many jobs as the cluster's CPUs) and write the same CSVs as joblib's own processes; bad cluster input and a missing
Ray are one line and exit 2, as for ``solve`` and ``sweep``, before anything starts and writing nothing."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from solver.cli import main

REPLAY_RUN = ROOT / "tests" / "data" / "replay_run"
SIMULATE = ["simulate", str(REPLAY_RUN), "--reps", "1,4", "--stopper", "none", "--stopper", "agree:2", "--trials",
            "120", "--seed", "3", "--calibration-reps", "0"]
TUNE = ["tune", str(REPLAY_RUN), "--reps", "2,4", "--stopper", "none", "--stopper", "agree:2", "--trials", "120",
        "--seed", "3"]


@pytest.mark.parametrize("command", [SIMULATE, TUNE], ids=["simulate", "tune"])
@pytest.mark.parametrize(("flags", "needle"), [
    (["--cluster", "10.0.0.1:6379"], "local:N, auto or ray://HOST:PORT"),
    (["--cluster", "local:0"], "N >= 1"),
])
def test_bad_cluster_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          command: list[str], flags: list[str], needle: str) -> None:
    out = tmp_path / "out"
    assert main([*command, "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("solver: error:") and needle in err, err
    assert not out.exists()


@pytest.mark.parametrize("command", [SIMULATE, TUNE], ids=["simulate", "tune"])
def test_offline_commands_have_no_engine_actors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                command: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--out", str(tmp_path / "out"), "--cluster", "local:2", "--actors", "2"])
    assert exited.value.code == 2 and "unrecognized arguments: --actors 2" in capsys.readouterr().err


@pytest.mark.parametrize("command", [SIMULATE, TUNE], ids=["simulate", "tune"])
def test_a_missing_run_fails_before_any_cluster_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    from solver.cluster.connect import RayConnection

    def no_cluster(self):  # a control-flow double: entering it means Ray would start
        raise AssertionError("a cluster was started for input that cannot run")

    monkeypatch.setattr(RayConnection, "__enter__", no_cluster)
    missing = tmp_path / "no-such-run"
    out = tmp_path / "out"
    assert main([command[0], str(missing), *command[2:], "--out", str(out), "--cluster", "local:2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("solver: error:") and "no-such-run" in err, err
    assert not out.exists()


@pytest.mark.parametrize("command", [
    SIMULATE, TUNE,
    ["sweep", "demo", "--reps", "1,2", "--workers", "1", "--offline"],
    ["solve", "--engine", "replay", "--from", str(REPLAY_RUN)],
], ids=["simulate", "tune", "sweep", "solve"])
def test_without_ray_every_command_says_the_same_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # ``import ray`` raises ImportError
    out = tmp_path / "out"
    assert main([*command, "--out", str(out), "--cluster", "local:2"]) == 2
    err = capsys.readouterr().err
    assert err == "solver: error: --cluster needs Ray: pip install 'solver[cluster]' (or: pip install ray)\n"
    assert not out.exists()


@pytest.fixture()
def seen_jobs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """(jobs, joblib backend) of every ``run_trials`` call the commands make."""
    import joblib

    simulate_module = importlib.import_module("solver.offline.sim.simulate")  # the face's simulate is the function

    seen: list[tuple[int, str]] = []
    original = simulate_module.run_trials

    def recording(plan, trials, seed, jobs=1):  # type: ignore[no-untyped-def]
        backend, _ = joblib.parallel.get_active_backend()
        seen.append((jobs, type(backend).__name__))
        return original(plan, trials, seed, jobs)

    monkeypatch.setattr(simulate_module, "run_trials", recording)
    return seen


@pytest.mark.parametrize(("command", "files"), [
    (SIMULATE, ("summary.csv", "scores.csv")),
    (TUNE, ("settings.csv", "chosen.yaml")),
], ids=["simulate", "tune"])
def test_outputs_are_identical_with_and_without_a_cluster(tmp_path: Path, local_ray: int,
                                                          seen_jobs: list[tuple[int, str]], command: list[str],
                                                          files: tuple[str, ...]) -> None:
    assert main([*command, "--out", str(tmp_path / "local"), "--jobs", "2"]) == 0
    assert main([*command, "--out", str(tmp_path / "cluster"), "--cluster", "local:2"]) == 0
    assert seen_jobs[0][0] == 2 and seen_jobs[0][1] != "RayBackend"  # joblib's own processes
    assert seen_jobs[1] == (local_ray, "RayBackend")  # --jobs defaulted to the cluster's CPUs, the work on Ray
    for name in files:
        assert (tmp_path / "local" / name).read_text() == (tmp_path / "cluster" / name).read_text(), name


@pytest.mark.parametrize("command", [SIMULATE, TUNE], ids=["simulate", "tune"])
def test_ray_failing_under_the_trials_is_one_line_and_exit_1(tmp_path: Path, local_ray: int,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             command: list[str]) -> None:
    from ray.exceptions import RaySystemError

    simulate_module = importlib.import_module("solver.offline.sim.simulate")  # the face's simulate is the function

    def lost(plan, trials, seed, jobs=1):  # type: ignore[no-untyped-def]  # a control-flow double: a node lost
        raise RaySystemError("the node running trial chunk 3 died")

    monkeypatch.setattr(simulate_module, "run_trials", lost)
    out = tmp_path / "out"
    assert main([*command, "--out", str(out), "--cluster", "local:2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("solver: error: RaySystemError:") and "died" in err, err
    assert not out.exists()

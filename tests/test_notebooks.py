"""The notebooks run headless, top to bottom: the analysis notebooks on the small recorded sweep in
tests/data/eval_sweep, the Kaggle submission notebook through the real AIMO3 gateway with the tiny model."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SWEEP = ROOT / "tests" / "data" / "eval_sweep"


def execute(name: str) -> list[dict]:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def outputs(cell: dict, mime: str) -> list[str]:
    return [o["data"][mime] for o in cell.get("outputs", []) if mime in o.get("data", {})]


@pytest.fixture
def sweep_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("SOLVER_SWEEP_DIR", str(SWEEP))
    monkeypatch.setenv("SOLVER_RUN_DIR", str(SWEEP / "runs" / "T0.8-tir-w2"))
    monkeypatch.setenv("SOLVER_NOTEBOOK_OUT", str(tmp_path))
    return tmp_path


@pytest.mark.slow
def test_sweep_analysis_notebook_shows_table_plots_and_report(sweep_env: Path) -> None:
    cells = execute("sweep_analysis.ipynb")
    table = outputs(cells[1], "text/html")
    assert table and "accuracy" in table[0] and "agree:3" in table[0]
    plots = [cell for cell in cells if outputs(cell, "image/png")]
    assert len(plots) == 3  # accuracy, runtime, cost
    (report,) = outputs(cells[-1], "text/markdown")
    assert report.startswith("# Run report: T0.8-tir-w2") and "## By topic" in report


@pytest.mark.slow
def test_leaderboard_notebook_simulates_the_recorded_run(sweep_env: Path) -> None:
    cells = execute("leaderboard_simulation.ipynb")
    (summary,) = outputs(cells[1], "text/markdown")
    assert summary.startswith("# Leaderboard simulation") and "## Calibration" in summary
    assert len([cell for cell in cells if outputs(cell, "image/png")]) == 2
    assert (sweep_env / "scores.png").is_file() and (sweep_env / "summary.csv").is_file()


# ---- the Kaggle submission notebook, headless, through the real AIMO3 gateway --------------------------------

KAGGLE_NOTEBOOK = ROOT / "kaggle" / "submission.ipynb"
AIMO3_GATEWAY = ROOT / "tests" / "kaggle" / "gateways" / "aimo3"


@pytest.mark.slow
@pytest.mark.engine
def test_kaggle_submission_notebook_serves_the_real_aimo3_gateway_with_the_tiny_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The notebook as shipped, except: its install cell is skipped (the package is the checkout's) and a cell
    after its settings points them at the tiny model, a config file, the vendored AIMO3 gateway and a temporary run
    folder."""
    import polars as pl

    from solver.cli import main as solver_main

    # a compile cache packed for this machine and the tiny engine, as `solver compile-cache pack` ships one: filled at
    # the fixed root (vLLM's artefacts keep its path), which the notebook's start puts the copy back into
    from solver.engines.compile_cache import build_root

    root = build_root(f"test-notebook-{os.getpid()}")
    (root / "vllm" / "torch_compile_cache").mkdir(parents=True)
    (root / "vllm" / "torch_compile_cache" / "graph.py").write_text("# compiled\n")
    try:
        assert solver_main(["compile-cache", "pack", str(root / "vllm"), "--out", str(tmp_path / "cache")]) == 0
    finally:
        shutil.rmtree(root)  # as the build removes its root: only the shipped folder is left
    notebook = nbformat.read(KAGGLE_NOTEBOOK, as_version=4)
    tags = [cell.metadata.get("tags", []) for cell in notebook.cells]
    settings = next(i for i, t in enumerate(tags) if "settings" in t)
    # short generations in a config file (CONFIG, as a tuned chosen.yaml is attached), the problems added to
    # OVERRIDES as the settings cell says to
    (tmp_path / "short.yaml").write_text("sampling: {max_tokens: 16, max_total_tokens: 32, max_turns: 1}\n"
                                         "solve: {reps: 2, workers: 2}\n")
    test_settings = nbformat.v4.new_code_cell(
        'PRESET = "tiny"\n'
        'MODEL = None\n'
        f'COMPILE_CACHE = {str(tmp_path / "cache")!r}\n'
        f'CONFIG = {str(tmp_path / "short.yaml")!r}\n'
        'OVERRIDES.update({"budget.problems": 3, "budget.max_s": 120.0})\n'
        f'RUN_DIR = {str(tmp_path / "run")!r}\n'
        f'GATEWAY = {str(AIMO3_GATEWAY)!r}\n')
    cells = [c for c in notebook.cells if "install" not in c.metadata.get("tags", [])]
    cells.insert(settings + 1, test_settings)
    notebook.cells = cells
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"))
    monkeypatch.delenv("KAGGLE_IS_COMPETITION_RERUN", raising=False)
    try:
        NotebookClient(notebook, timeout=900, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the start's copy at the fixed root
    printed = "".join(out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", []))
    assert f"the compile cache {tmp_path / 'cache'}: used (built for vLLM" in printed  # found, used, and said so
    assert "; at start: graphs loaded, 0 Triton kernels compiled" in printed  # the rehearsal's check printed it
    expected = pl.read_csv(AIMO3_GATEWAY / "test.csv")["id"].to_list()
    submission = pl.read_parquet(tmp_path / "submission.parquet")  # written by the gateway in the kernel's cwd
    assert sorted(submission["id"].to_list()) == sorted(expected) and submission.height == len(expected)
    assert submission.schema["answer"] == pl.Int64
    assert all(0 <= a <= 99999 for a in submission["answer"].to_list())
    calls = [json.loads(line) for line in (tmp_path / "run" / "calls.jsonl").read_text().splitlines()]
    assert [c["id"] for c in calls] == submission["id"].to_list()
    assert all(c["generated_tokens"] > 0 for c in calls), "the tiny model generated tokens"
    assert all(c["repetitions"] <= 2 for c in calls), "CONFIG's solve.reps (the preset's is 4)"

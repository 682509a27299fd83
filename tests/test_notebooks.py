"""The analysis notebooks run headless, top to bottom, on the small recorded sweep in tests/data/eval_sweep."""

from __future__ import annotations

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


def test_sweep_analysis_notebook_shows_table_plots_and_report(sweep_env: Path) -> None:
    cells = execute("sweep_analysis.ipynb")
    table = outputs(cells[1], "text/html")
    assert table and "accuracy" in table[0] and "agree:3" in table[0]
    plots = [cell for cell in cells if outputs(cell, "image/png")]
    assert len(plots) == 3  # accuracy, runtime, cost
    (report,) = outputs(cells[-1], "text/markdown")
    assert report.startswith("# Run report: T0.8-tir-w2") and "## By topic" in report


def test_leaderboard_notebook_simulates_the_recorded_run(sweep_env: Path) -> None:
    cells = execute("leaderboard_simulation.ipynb")
    (summary,) = outputs(cells[1], "text/markdown")
    assert summary.startswith("# Leaderboard simulation") and "## Calibration" in summary
    assert len([cell for cell in cells if outputs(cell, "image/png")]) == 2
    assert (sweep_env / "scores.png").is_file() and (sweep_env / "summary.csv").is_file()

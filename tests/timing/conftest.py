"""What the timing tests share: the day results under ``benchmarks/results/`` and the day check's core."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


@pytest.fixture(scope="session")
def results() -> Callable[[str], dict]:
    """A results JSON by file name, with the name kept under ``_file`` (as the day check and the fit read it)."""

    def read(name: str) -> dict:
        data = json.loads((RESULTS / name).read_text())
        data["_file"] = name
        return data

    return read


@pytest.fixture(scope="module")
def check():
    return importlib.import_module("solver.measure.day.held_out")  # benchmarks/day_check.py's core

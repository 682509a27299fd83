"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/doubles.py

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_config():
    """The CPU preset with small token limits: the real engine makes ~30 tokens/s on these machines."""
    from solver.config import load_config

    return load_config("tiny", overrides={"sampling.max_tokens": 48, "sampling.max_total_tokens": 96,
                                          "sampling.max_turns": 2, "solve.reps": 2, "solve.workers": 2})


def solver_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "solver", *args]

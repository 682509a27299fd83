"""The dev corpus as a recorded run: 88 AQuA-RAT questions x 30 executed programs (benchmarks/data/README.md)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from solver.config import Config

DEV_CORPUS = Path(__file__).parents[2] / "benchmarks" / "data" / "pot_aqua_dev.jsonl.gz"


@pytest.fixture(scope="session")
def dev_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev corpus imported once per test session through the sample importer."""
    from solver.recordings import import_samples

    root = tmp_path_factory.mktemp("dev")
    plain = root / "pot_aqua_dev.jsonl"
    with gzip.open(DEV_CORPUS, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    import_samples(plain, root / "run", Config())
    return root / "run"

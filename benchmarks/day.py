"""A Kaggle day at full length on one engine: ``solver day`` (``solver/commands/day.py``; what it does:
``solver/measure/day/kaggle_day.py``), kept here under its benchmark name with the same flags and output.

    python benchmarks/day.py --attempts-file X --problems 2 --attempts 4 --attempt-tokens 300 --json /tmp/day.json --resume
    python benchmarks/day.py --gpu --model M --attempts-file X --problems 6 --until 520 --json .gpu/day/slice.json --resume
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the solver package, run from a checkout

from solver.cli import main as solver_main  # noqa: E402 - after the path set-up above


def main(argv: list[str] | None = None) -> int:
    return solver_main(["day", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

"""The simulator's interval against a known truth (solver/offline/sim/coverage.py): coverage, width and the
variance ratio under AIMO3's public and private rules, for the unbiased estimate and the jackknife it replaced.

    python evaluation/interval_coverage.py --out evaluation/results/interval_coverage.json   # ~1.5 min on 2 cores
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from solver.offline.sim import coverage_check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args(argv)
    if args.cases < 2:
        print("interval_coverage: --cases must be >= 2", file=sys.stderr)
        return 2
    rows = []
    for private in (False, True):
        for unbiased in (True, False):
            found = coverage_check(private, cases=args.cases, seed=args.seed, unbiased=unbiased)
            row = {"estimator": "pairs (unbiased)" if unbiased else "jackknife (before)", **dataclasses.asdict(found)}
            rows.append(row)
            print(f"{row['rule']:8} {row['estimator']:19} coverage {found.coverage:.3f} of {found.cases}, "
                  f"half-width {found.half_width:.3f}, width ratio {found.width_ratio:.3f}")
    design = {"problems": 20, "recorded": 24, "accuracy": "0.2..0.9 evenly", "a": "majority of 3", "b": "one",
              "trials": 300, "nominal": 0.95, "seed": args.seed}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"design": design, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

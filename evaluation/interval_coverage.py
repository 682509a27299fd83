"""The simulator's interval against a known truth, on its own path (solver/offline/sim/coverage.py: ``run_trials``,
``SecondDraws``, ``used_repetitions``, ``Comparer``): coverage per scoring rule, seed policy and variance path, and
pooled per rule, each with its standard error.

    python evaluation/interval_coverage.py --out evaluation/results/interval_coverage.json --jobs 2   # 14 min here

14 minutes on two cores shared with other work (the result file's ``seconds``, 848): every recording is 60 simulated
days of two settings, through the simulator's own trials. Per design the file also holds each case's seed and its
cases' outcomes in chunks of ``coverage.CHUNK`` (``coverage.chunks``), so a sample of them replayed must give the same
(tests/offline/test_intervals.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from solver.offline.sim import coverage

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scale", type=float, default=1.0, help="the cases, as a share of the full check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--rows", type=Path, help="also write every case's row here (.npz)")
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1 or args.jobs < 1:
        print("interval_coverage: --scale must be in (0, 1] and --jobs >= 1", file=sys.stderr)
        return 2
    start = time.perf_counter()
    found, saved = [], {}
    for design, cases in coverage.cells(args.scale):
        rows = coverage.case_rows(design, cases, args.seed, args.jobs)
        saved[design.label.replace(" ", "_")] = rows
        check = coverage.checked(design, rows)
        found.append(check)
        print(f"{design.label:34} m={design.recorded:2} coverage {check.coverage:.4f} ± {check.se:.4f} of {cases}, "
              f"needs x{check.needed:.3f}, width ratio {check.width_ratio:.3f}, bounded {check.conservative:.2f}",
              flush=True)
    out = {"design": {"problems": found[0].design.problems, "accuracy": "0.2..0.9 evenly", "a": "majority of 3",
                      "b": "one", "trials": found[0].design.trials, "nominal": coverage.NOMINAL, "seed": args.seed,
                      "seconds": round(time.perf_counter() - start, 1), "jobs": args.jobs,
                      "case seed": "a cell's case_seed, then the case's number from 0",
                      "chunks": "per chunk of the cell's cases from case 0, their outcomes summed (coverage.Chunk)"},
           "cells": [{**dataclasses.asdict(c.design), "recorded": c.design.recorded,
                      **{k: v for k, v in dataclasses.asdict(c).items() if k != "design"},
                      "coverage": c.coverage, "se": c.se, "case_seed": coverage.case_seed(c.design, args.seed, 0)[:-1],
                      "chunk": coverage.CHUNK, "chunks": [dataclasses.asdict(k) for k in coverage.chunks(c.design, r)]}
                     for c, r in zip(found, saved.values())],
           "pooled": {}}
    for rule in ("aimo3-public", "aimo3-private"):
        for paths, name in ((("unbiased",), "unbiased"), (("jackknife", "one day"), "bounded"),
                            (coverage.PATHS, "all")):
            mine = [c for c in found if c.design.rule == rule and c.design.path in paths]
            share, se, cases = coverage.pooled(mine)
            out["pooled"][f"{rule} {name}"] = {"coverage": share, "se": se, "cases": cases}
            print(f"{rule:13} {name:9} coverage {share:.4f} ± {se:.4f} of {cases}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    if args.rows is not None:
        np.savez(args.rows, **saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())

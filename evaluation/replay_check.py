"""The simulator against the running pipeline on an imported run (``solver.measure.check_replay``).

    python evaluation/replay_check.py RUN_DIR [--problems 6] [--attempts 8] [--scale 0.05] [--seed 0] [--set K=V]

Takes the first ``--problems`` problems (in id order) with at least ``--attempts`` recorded, one random order of
their first ``--attempts`` repetitions each, the run's config (its solve, stop and budget sections; the budget's
total, reserve and cutoff scaled from the competition's 50 problems to these), and replays them through the whole
pipeline on the replay engine timed by the run's engine time model (``--scale``: real seconds per model second)
against the simulator's prediction of the same run. Prints the per-problem table and the worst time gap.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--problems", type=int, default=6)
    parser.add_argument("--attempts", type=int, default=8)
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-model", default=None, help="default: the run's engine.time_model, else h100-gptoss")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key after the budget is scaled, e.g. --set budget.max_s=400")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from dataclasses import replace

    from solver.offline.sim import load_pools
    from solver.measure.sim_fidelity import check_replay
    from solver.timing.model import load_time_model

    pools, config = load_pools([args.run])
    chosen = [p for p in pools if len(p.repetitions) >= args.attempts][: args.problems]
    if not chosen:
        print(f"replay_check: no problem has {args.attempts} repetitions", file=sys.stderr)
        return 2
    share = len(chosen) / config.budget.problems
    b = config.budget
    budget = replace(b, problems=len(chosen), total_s=None if b.total_s is None else b.total_s * share,
                     reserve_s=b.reserve_s * share, cutoff_s=None if b.cutoff_s is None else b.cutoff_s * share)
    import yaml

    overrides = {k: yaml.safe_load(v) for k, _, v in (item.partition("=") for item in args.overrides)}
    config = replace(config, budget=budget).replace({"solve.reps": args.attempts, **overrides})
    budget = config.budget
    rng = np.random.default_rng(args.seed)
    draws = {p.problem.id: rng.permutation(args.attempts).tolist() for p in chosen}
    model = load_time_model(args.time_model or config.engine.time_model or "h100-gptoss")
    started = time.perf_counter()
    check = check_replay(chosen, config, model, draws, time_scale=args.scale)
    print(f"{len(chosen)} problems x {args.attempts} attempts, model {model.name}, scale {args.scale:g}, budget "
          f"total {budget.total_s or 0:g} s, clamp {budget.min_s:g}-{budget.max_s:g} s, reserve "
          f"{budget.reserve_s:g} s ({time.perf_counter() - started:.0f} s wall)\n")
    print("\n".join(check.table()))
    print(f"\nworst time gap {check.worst_gap:.1%}; stopped alike: {sum(p.same for p in check.problems)} of "
          f"{len(check.problems)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

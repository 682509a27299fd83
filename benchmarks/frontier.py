"""Which stopping policy to run? The tuning search on the dev corpus, against issue 17's targets.

Imports the dev corpus (benchmarks/data/pot_aqua_dev.jsonl.gz: 88 questions x 30 executed programs) through the
sample importer, runs `solver tune`'s search (every default stopping rule x 5 repetition caps, one repetition
in flight so that a stop wastes nothing, common random draws) and prints, measured side by side in one run:

- the calibration check (simulated against held-out real runs);
- the references: every repetition at N = 30 and Adaptive-Consistency (beta:0.95, its published setting);
- the cheapest setting within 0.5 accuracy points of all 30 (target: >= 3x fewer repetitions), overall and per
  rule family;
- whether the other rules' frontier dominates Adaptive-Consistency's (target: at each of its costs, at least its
  accuracy);
- the floor this corpus puts under any policy that keeps the rare right answers of sparse problems.

    python benchmarks/frontier.py [--trials 200] [--jobs 2] [--out DIR]    # DIR: tune's report, plots, config
    python benchmarks/frontier.py --quick                                  # CI: a small grid, few trials
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
import time
from pathlib import Path

CORPUS = Path(__file__).parent / "data" / "pot_aqua_dev.jsonl.gz"


def import_corpus(folder: Path) -> Path:
    from solver.config import Config
    from solver.recordings import import_samples

    plain = folder / "corpus.jsonl"
    with gzip.open(CORPUS, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    import_samples(plain, folder / "run", Config())
    return folder / "run"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="3 caps, 6 rules, 10 trials")
    parser.add_argument("--out", type=Path, default=None, help="also write tune's outputs here")
    args = parser.parse_args(argv)

    from solver.offline.tune import PickRule, best_at, frontier
    from solver.offline.sim import SimulationRequest
    from solver.offline.tune import tune, stoppers_label
    from solver.offline.tune import write_outputs

    with tempfile.TemporaryDirectory() as tmp:
        run = import_corpus(Path(tmp))
        stoppers = ((), ("lossless",), ("beta:0.95",), ("beta:0.8",), ("hold:0.9",), ("margin:3",)) if args.quick \
            else ()
        reps = (10, 20, 30) if args.quick else ()
        trials = 10 if args.quick else args.trials
        t0 = time.perf_counter()
        report = tune(SimulationRequest((run,), reps=reps, stoppers=stoppers, workers=(1,), trials=trials,
                                        jobs=args.jobs), PickRule("tolerance", 0.5))
        seconds = time.perf_counter() - t0
        if args.out is not None:
            write_outputs(report, args.out)
        prepared = report.simulation.prepared

    summaries = report.summaries
    k = summaries[0].problems
    full = max(report.full, key=lambda s: s.setting.reps)
    acc = lambda s: 100 * s.mean / k  # noqa: E731

    def row(name: str, s) -> str:  # type: ignore[no-untyped-def]
        lo, hi = 100 * s.quantiles[0.05] / k, 100 * s.quantiles[0.95] / k
        return (f"{name:<34}{s.setting.reps:>4}{s.launched:>9.2f}{full.launched / s.launched:>8.2f}x"
                f"{acc(s):>9.2f}{acc(s) - acc(full):>+9.2f}   {lo:.1f}-{hi:.1f}")

    cal = report.simulation.calibration
    print(f"dev corpus: {report.simulation.pools} problems x {report.simulation.recorded[1]} samples; "
          f"{len(summaries)} settings x {trials} trials, 1 repetition in flight ({seconds:.0f} s)")
    if cal is not None:
        print(f"calibration ({cal.setting.reps} repetitions, {cal.splits} splits): KS {cal.ks:.3f}, mean gap "
              f"{cal.mean_gap:+.2f} problems -> {cal.verdict}")
    print(f"\n{'policy':<34}{'N':>4}{'reps':>9}{'saving':>9}{'acc %':>9}{'vs all':>9}   5-95 %")
    print(row("every repetition", full))
    by = {(s.setting.reps, s.setting.stoppers): s for s in summaries}
    ac = by.get((full.setting.reps, ("beta:0.95",)))
    if ac is not None:
        print(row("Adaptive-Consistency (beta:0.95)", ac))
    print(row(f"chosen: {stoppers_label(report.choice)}", report.choice))
    families: dict[str, list] = {}
    for s in summaries:
        if s.setting.stoppers:
            families.setdefault(s.setting.stoppers[0].split(":")[0], []).append(s)
    for family, group in sorted(families.items()):
        near = [s for s in group if acc(full) - acc(s) <= 0.5 + 1e-9]
        if near:
            best = min(near, key=lambda s: s.launched)
            print(row(f"cheapest {family} within 0.5", best) + f"   ({stoppers_label(best)})")
    ratio = full.launched / report.choice.launched
    print(f"\ntarget >= 3x fewer repetitions at <= 0.5 points lower: best {ratio:.2f}x "
          f"({'met' if ratio >= 3 else 'not met'})")
    if report.adaptive:
        others = [s for s in summaries if all(s is not a for a in report.adaptive)]
        gaps = []
        for a in frontier(report.adaptive, "reps"):
            b = best_at(others, "reps", a.launched)
            if b is not None:
                gaps.append((acc(b) - acc(a), a, b))
        worst = min(gaps, key=lambda g: g[0]) if gaps else None
        union = frontier(summaries, "reps")
        print(f"frontier of every rule: dominates Adaptive-Consistency's by construction ({len(union)} points, "
              f"{sum(1 for s in union if all(s is not a for a in report.adaptive))} of them other rules)")
        if worst is not None:
            print(f"other rules alone, at Adaptive-Consistency's frontier costs: worst gap {worst[0]:+.2f} points "
                  f"(beta N={worst[1].setting.reps} {stoppers_label(worst[1])} at {worst[1].launched:.2f} reps vs "
                  f"N={worst[2].setting.reps} {stoppers_label(worst[2])} at {worst[2].launched:.2f})")
    sparse = []  # problems with at most 5 answers among their samples: whether their recorded majority is right
    for prep in prepared:
        ballots = prep.ballots[full.setting.voter]
        answers = [b.answer for b in ballots if b is not None]
        if len(answers) <= 5:
            top = max(set(answers), key=answers.count) if answers else None
            sparse.append(top == prep.problem.answer)
    floor = full.setting.reps * len(sparse) / k
    print(f"floor: {len(sparse)} problems have 0-5 answers among {full.setting.reps} samples ({sum(sparse)} of them "
          "a right majority); a rule cannot tell them apart early, so keeping those rare right answers means "
          f"running all of them to ~{full.setting.reps}: {floor:.1f} repetitions per problem of all {k} before any "
          f"other problem is counted (3x needs <= {full.launched / 3:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

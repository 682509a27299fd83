"""How much does each stopping rule save, and what does it cost in accuracy? Replayed on recorded runs.

For every stopping policy, through the leaderboard simulator (the same solve-loop decisions, replayed on
recorded repetitions with common random draws): mean repetitions finished and launched per problem, tokens per
problem, accuracy, and the savings against running all N repetitions.

    python benchmarks/stopping.py RUN_DIR [RUN_DIR ...]     # recorded runs (a real model's, or imported)
    python benchmarks/stopping.py --synthetic               # a synthetic recorded run, written first

The synthetic run stands in for a real model's log where none is at hand: per problem, the right answer's
share is drawn from a difficulty mix (a third easy, a third medium, a third hard, about 60 % majority accuracy
at N = 32, like AIMO-level public notebooks), wrong answers spread over a few distinct values, one repetition in
ten without an answer, and token counts from a log-normal around 3,000. It is labelled as synthetic wherever it
is reported.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from solver.config import load_config
from solver.runlog import RunLog
from solver.offline.sim import SimulationRequest, simulate
from solver.types import Answer, Problem, Repetition, Turn

POLICIES: list[tuple[str, ...]] = [
    (), ("agree_rules",), ("agree:4",), ("beta",), ("beta:0.9",), ("ztest",), ("esc:5",), ("esc:4",),
    ("agree:4", "beta:0.9"),
]


def synthetic_run(out: Path, problems: int = 50, reps: int = 64, seed: int = 0) -> Path:
    """Write a recorded run with known answer distributions through the run log (see the module docstring)."""
    rng = np.random.default_rng(seed)
    # Limits that hold every synthetic repetition whole: the simulator cuts repetitions to the run config's limits,
    # and the tiny preset's (96 tokens, a 2,048-token context) would cut them before their answers.
    config = load_config("tiny", overrides={"solve.reps": reps, "sampling.max_tokens": 65536,
                                            "sampling.max_total_tokens": 65536, "engine.args.max_model_len": 65536})
    log = RunLog.create(out, config)
    try:
        for i in range(problems):
            truth = int(rng.integers(0, 1000))
            tier = i % 3
            share = float(rng.beta(*[(9, 1.5), (3, 3), (1.2, 5)][tier]))  # easy, medium, hard
            wrong = [int(v) for v in rng.choice(1000, size=int(rng.integers(2, 8)), replace=False) if v != truth]
            weights = rng.dirichlet(np.full(len(wrong), 0.6))
            problem = Problem(f"syn-{i:03d}", f"synthetic problem {i}", answer=str(truth))
            log.append_problem(problem)
            for index in range(reps):
                roll = rng.random()
                if roll < 0.1:
                    value = None
                elif roll < 0.1 + 0.9 * share:
                    value = truth
                else:
                    value = wrong[int(rng.choice(len(wrong), p=weights))]
                tokens = int(rng.lognormal(np.log(3000), 0.5))
                answers = (Answer(str(value), f"\\boxed{{{value}}}", "boxed"),) if value is not None else ()
                turn = Turn(text="", prompt_tokens=200, generated_tokens=tokens, finish_reason="stop",
                            duration_s=tokens / 25.0)  # 25 tokens/s per sequence, a GPU-like rate
                log.append(Repetition(problem.id, index, index, "done", (turn,), answers, 0.0, tokens / 25.0))
    finally:
        log.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--reps", type=int, default=32, help="N: the most repetitions per problem")
    parser.add_argument("--workers", type=int, default=1, help="repetitions in flight (1 = sequential)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--policies", default=None,
                        help="policies to compare, ';' between policies and ',' inside one (e.g. 'beta;agree:4,esc:5')")
    args = parser.parse_args(argv)
    if not args.runs and not args.synthetic:
        parser.error("give RUN_DIRs or --synthetic")
    policies = POLICIES if args.policies is None else [()] + [tuple(p.split(",")) for p in args.policies.split(";")]
    with tempfile.TemporaryDirectory() as tmp:
        runs = tuple(args.runs) or (synthetic_run(Path(tmp) / "synthetic"),)
        t0 = time.perf_counter()
        report = simulate(SimulationRequest(run_dirs=runs, reps=(args.reps,), voters=("majority",),
                                            stoppers=tuple(policies), workers=(args.workers,),
                                            trials=args.trials, jobs=args.jobs, calibration_reps=0))
        seconds = time.perf_counter() - t0
    label = "synthetic" if args.synthetic and not args.runs else ", ".join(map(str, args.runs))
    full = next(s for s in report.summaries if not s.setting.stoppers)
    print(f"runs: {label}; {report.pools} problems; N = {args.reps}; workers = {args.workers}; "
          f"{args.trials} trials ({seconds:.1f} s)")
    print(f"{'policy':<22}{'accuracy':>9}{'loss pts':>9}{'finished':>9}{'launched':>9}{'tokens':>9}"
          f"{'saving x':>9}")
    for s in report.summaries:
        name = ",".join(s.setting.stoppers) or f"none (all {args.reps})"
        acc = 100 * s.mean / s.problems
        loss = 100 * (full.mean - s.mean) / s.problems
        print(f"{name:<22}{acc:>8.1f}%{loss:>9.2f}{s.finished:>9.2f}{s.launched:>9.2f}{s.tokens:>9.0f}"
              f"{full.launched / s.launched:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

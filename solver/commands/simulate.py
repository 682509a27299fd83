"""``solver simulate RUN_DIR... --out DIR``: expected leaderboard score and its spread per setting, from logs."""

from __future__ import annotations

import argparse
import sys

from solver.commands.grid import add_grid_arguments, grid_request, int_list, play_grid


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "simulate", help="estimate leaderboard scores of settings by resampling recorded repetitions",
        description="Resample the finished repetitions of one or more runs (of the same problem set) to estimate, "
                    "per setting, the expected score out of K problems as a leaderboard scores it (--scoring), its "
                    "quantiles, P(score >= the line) and P(score >= X), the repetitions launched and finished, "
                    "tokens and seconds per problem, the run's time and the problems its budget cut, timing attempts "
                    "on an engine time model where one is named, and, as a stress test, each run at its own machine speed (--machine-speed); each "
                    "setting against the best, and --compare pairs, with what the recordings can tell them apart "
                    "by. Writes summary.csv, scores.csv, report.md and PNG plots into --out.")
    add_grid_arguments(parser, trials=500, defaults={"reps": ", e.g. 8,16,32 (default: the runs' solve.reps)",
                                                     "voter": "; default: the runs' vote.voter",
                                                     "stopper": "; default: the runs' stop.stoppers",
                                                     "workers": " (default: the runs' solve.workers)"})
    parser.add_argument("--at-least", type=int_list, default=(), metavar="X,...",
                        help="scores to report P(score >= X) for (default: quartiles of the scores)")
    parser.add_argument("--calibration-reps", type=int, default=None, metavar="N",
                        help="repetitions for the calibration check (default: the smallest that fits; 0 = skip)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.offline.sim import simulate_pools, write_outputs

    request = grid_request(args, thresholds=args.at_least, calibration_reps=args.calibration_reps)
    report = play_grid(args, request, lambda request, loaded: simulate_pools(request, *loaded))
    written = write_outputs(report, args.out)
    sys.stdout.write((args.out / "report.md").read_text())
    print("wrote " + ", ".join(str(p) for p in written))
    return 0

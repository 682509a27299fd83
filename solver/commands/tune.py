"""``solver tune RUN_DIR... --out DIR``: search stopping rules, voters and repetition caps on recorded runs, show the
Pareto frontier and write the chosen policy as a config file (see solver/offline/tune/search.py)."""

from __future__ import annotations

import argparse
import sys

from solver.commands.common import fail
from solver.commands.grid import add_grid_arguments, grid_request, play_grid


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "tune", help="search stopping rule x parameters x voter x repetitions; frontier, pick, config file",
        description="Play every setting of a grid on recorded runs with common random draws, report the Pareto "
                    "frontier of expected score (5-95 %% band) against repetitions, tokens and seconds per problem, "
                    "pick one setting by a stated rule (default: the cheapest within 0.5 accuracy points of the "
                    "best) and write tune.md, settings.csv, chosen.yaml (for solve --config), PNG plots and a "
                    "self-contained report.html into --out. Days are scored as --scoring says (AIMO3's private "
                    "rule draws two runs, shown beside one run's), with P(score >= --line) and each setting against "
                    "the best.")
    add_grid_arguments(parser, trials=200, defaults={
        "reps": " (default: 1/4, 1/3, 1/2, 2/3 and all of the median problem's recorded repetitions, and the run's "
                "solve.reps)",
        "voter": "; default: the run's", "stopper": "; default: every rule at a few parameters",
        "workers": " (default: the run's)"})
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument("--tolerance", type=float, default=None, metavar="POINTS",
                      help="pick the cheapest setting within POINTS accuracy points of the best (default 0.5)")
    pick.add_argument("--max-cost", type=float, default=None, metavar="COST",
                      help="pick the best expected score costing at most COST on --axis per problem")
    pick.add_argument("--at-least", type=float, default=None, metavar="X",
                      help="pick the highest P(score >= X), the cheapest among equals")
    parser.add_argument("--axis", choices=("reps", "tokens", "seconds"), default="reps",
                        help="the cost the pick rule counts (default: repetitions launched per problem)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.offline.tune import PickRule, markdown, tune, write_outputs

    if args.tolerance is not None and args.tolerance < 0:
        return fail("--tolerance must be >= 0")
    if args.max_cost is not None and args.max_cost <= 0:
        return fail("--max-cost must be > 0")
    if args.jobs is not None and args.jobs < 1:
        return fail("--jobs must be >= 1")
    if args.max_cost is not None:
        rule = PickRule("budget", args.max_cost, args.axis)
    elif args.at_least is not None:
        rule = PickRule("at_least", args.at_least, args.axis)
    else:
        rule = PickRule("tolerance", 0.5 if args.tolerance is None else args.tolerance, args.axis)
    report = play_grid(args, grid_request(args), lambda request, loaded: tune(request, rule, loaded))
    written = write_outputs(report, args.out)
    sys.stdout.write(markdown(report))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0

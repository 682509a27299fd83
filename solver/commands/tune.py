"""``solver tune RUN_DIR... --out DIR``: search stopping rules, voters and repetition caps on recorded runs, show the
Pareto frontier and write the chosen policy as a config file (see solver/offline/tune/search.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from solver.commands.common import add_cluster_arguments, cluster_spec, fail
from solver.config import parse_overrides
from solver.commands.simulate import add_policy_arguments, default_jobs, int_list, policy_fields, stopper_sets


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "tune", help="search stopping rule x parameters x voter x repetitions; frontier, pick, config file",
        description="Play every setting of a grid on recorded runs with common random draws, report the Pareto "
                    "frontier of expected score (5-95 %% band) against repetitions, tokens and seconds per problem, "
                    "pick one setting by a stated rule (default: the cheapest within 0.5 accuracy points of the "
                    "best) and write tune.md, settings.csv, chosen.yaml (for solve --config), PNG plots and a "
                    "self-contained report.html into --out.")
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories to pool")
    parser.add_argument("--out", type=Path, required=True, help="directory for the outputs")
    parser.add_argument("--reps", type=int_list, default=(),
                        help="repetition caps (default: 1/4, 1/3, 1/2, 2/3 and all of the median problem's recorded "
                             "repetitions, and the run's solve.reps)")
    parser.add_argument("--voter", action="append", default=[], help="voter name (repeat; default: the run's)")
    parser.add_argument("--stopper", action="append", default=[],
                        help="a stopper set, comma separated; 'none' = every repetition (repeat; default: every "
                             "rule at a few parameters)")
    parser.add_argument("--workers", type=int_list, default=(),
                        help="repetitions in flight (default: the run's; auto, the engine's batch up to N: --set "
                             "solve.workers=0)")
    add_policy_arguments(parser)
    parser.add_argument("--problems", type=int, default=None, metavar="K",
                        help="problems per leaderboard run (default: budget.problems under a budget, else every "
                             "recorded problem)")
    parser.add_argument("--trials", type=int, default=200, help="simulated leaderboard runs per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draw", choices=("auto", "bootstrap", "subset"), default="auto")
    parser.add_argument("--tokens-per-s", type=float, default=None,
                        help="time repetitions as tokens / rate plus code time instead of recorded durations")
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument("--tolerance", type=float, default=None, metavar="POINTS",
                      help="pick the cheapest setting within POINTS accuracy points of the best (default 0.5)")
    pick.add_argument("--max-cost", type=float, default=None, metavar="COST",
                      help="pick the best expected score costing at most COST on --axis per problem")
    pick.add_argument("--at-least", type=float, default=None, metavar="X",
                      help="pick the highest P(score >= X), the cheapest among equals")
    parser.add_argument("--axis", choices=("reps", "tokens", "seconds"), default="reps",
                        help="the cost the pick rule counts (default: repetitions launched per problem)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the runs' config, e.g. --set budget.reserve_s=0 (value parsed as "
                             "YAML)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="parallel processes (default: usable cores, at most 4; with --cluster, its CPUs)")
    add_cluster_arguments(parser, engines=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from solver.commands.cluster import offline_on_cluster
    from solver.offline.tune import PickRule
    from solver.offline.sim import SimulationRequest, load, validate
    from solver.offline.tune import TuneReport, tune
    from solver.offline.tune import markdown, write_outputs

    if args.tolerance is not None and args.tolerance < 0:
        return fail("--tolerance must be >= 0")
    if args.max_cost is not None and args.max_cost <= 0:
        return fail("--max-cost must be > 0")
    if args.jobs is not None and args.jobs < 1:
        return fail("--jobs must be >= 1")
    cluster = cluster_spec(args)
    if args.max_cost is not None:
        rule = PickRule("budget", args.max_cost, args.axis)
    elif args.at_least is not None:
        rule = PickRule("at_least", args.at_least, args.axis)
    else:
        rule = PickRule("tolerance", 0.5 if args.tolerance is None else args.tolerance, args.axis)
    stoppers = stopper_sets(args.stopper)
    jobs = default_jobs() if args.jobs is None else args.jobs
    request = SimulationRequest(
        run_dirs=tuple(args.runs), reps=args.reps, voters=tuple(args.voter), stoppers=stoppers,
        workers=args.workers, problems=args.problems, trials=args.trials, seed=args.seed, draw=args.draw,
        tokens_per_s=args.tokens_per_s, jobs=jobs, overrides=tuple(parse_overrides(args.overrides).items()),
        **policy_fields(args))  # type: ignore[arg-type]

    validate(request)
    if cluster is None:
        report = tune(request, rule)
    else:
        loaded = load(request)  # missing or bad runs fail here, before a cluster starts

        def search(jobs: int) -> TuneReport:
            return tune(replace(request, jobs=jobs), rule, loaded)

        report = offline_on_cluster(cluster, search, args.jobs)  # Ray failing under the trials: ClusterFailed
    written = write_outputs(report, args.out)
    sys.stdout.write(markdown(report))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0

"""``solver kaggle-local DATA.csv``: rehearse a Kaggle submission locally, through the same ``predict``.

The competition's own gateway runs when ``kaggle_evaluation`` is importable (``--gateway DIR``, the competition's
Kaggle input folder, or ``sys.path``); otherwise the rehearsal gateway calls ``predict`` as that gateway does
(:mod:`solver.measure.rehearsal`). OUT holds ``test.csv`` (the problems in the competition's layout, real gateway
only), ``submission.parquet`` and ``submission.csv`` (what Kaggle would score), ``report.md`` (per call: order,
id, answer, reference, seconds, faults) and ``run/`` (the solver's log, replayable). Exit 1 when a fault was
recorded, 2 on bad input (before any model loads and before OUT exists).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from solver.commands.common import EXIT_FAILED, add_config_arguments, config_from_args, dry_run_args

# Light imports only at module level: the CLI imports every command to build its parser.


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "kaggle-local", help="rehearse a Kaggle submission: the notebook's predict behind the competition's gateway",
        description="Serve DATA one problem at a time, shuffled, to the same predict the notebook uses, through "
                    "the competition's kaggle_evaluation gateway when importable; write submission.parquet, "
                    "submission.csv and report.md to OUT.")
    parser.add_argument("data", metavar="DATA.csv", help="problems: CSV (id, problem[, answer]) or JSONL")
    parser.add_argument("--competition", choices=("aimo2", "aimo3"), default="aimo3",
                        help="answer range, modulus, test.csv layout and time limits (default aimo3)")
    parser.add_argument("--gateway", type=Path, default=None, metavar="DIR",
                        help="folder holding the competition's kaggle_evaluation package (default: its Kaggle "
                             "input folder, else the rehearsal gateway)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default runs/kaggle-local-TIME)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="total time for the set (default: the competition's 5 h)")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check everything (config, names, problems, gateway), then exit: no "
                             "engine starts, nothing is written (solver/dryrun/plan.py)")
    add_config_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.config import ConfigError
    from solver.datasets import load_problems
    from solver.kaggle import competition
    from solver.kaggle import KagglePredictor, PredictorOptions
    from solver.measure.rehearsal import rehearse, report_markdown, run_gateway
    from solver.kaggle import find_server

    out = args.out or Path("runs") / time.strftime("kaggle-local-%Y%m%d-%H%M%S")
    if args.time_limit is not None and args.time_limit <= 0:
        raise ConfigError("--time-limit must be > 0")
    comp = competition(args.competition)
    dry = None
    if args.dry_run:
        from solver.dryrun import DryRun

        dry = DryRun("solver kaggle-local")
        args = dry_run_args(args, dry)
    config = config_from_args(args)
    problems = load_problems(args.data, limit=args.limit)
    if not problems:
        raise ConfigError("no problems to serve")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty; choose another --out")
    server_class = find_server(comp, args.gateway)
    config = config.replace({"budget.problems": len(problems)})
    if dry is not None:
        from solver.loop.parts import prepare_run

        dry.engine_args(config, ConfigError)
        prepare_run(config, find_model=lambda model: dry.model(model, ConfigError))
        dry.gpus(config.engine.args, ConfigError)
        dry.add(f"{len(problems)} problems one at a time through the "
                f"{'competition' if server_class is not None else 'rehearsal'} gateway ({comp.name}), the set in "
                + (f"{args.time_limit:.0f} s" if args.time_limit else "the competition's time") + f"; output {out}")
        return dry.print()
    # Checks every name and the model path (prepare_run) before OUT exists or anything loads.
    # Absolute: the real gateway runs with OUT as its working directory.
    predictor = KagglePredictor(config, comp,
                                PredictorOptions(run_dir=out.resolve() / "run", total_s=args.time_limit))

    total = predictor.config.budget.total_s
    try:
        if server_class is not None:
            rehearsal = run_gateway(predictor, server_class, args.data, out, comp=comp, limit=args.limit,
                                    total_limit_s=total)
        else:
            rehearsal = rehearse(predictor, args.data, out, comp=comp, seed=config.sampling.seed,
                                 limit=args.limit, total_limit_s=total)
    finally:
        predictor.close()
    print(report_markdown(rehearsal), end="")
    print(f"output: {out}")
    return EXIT_FAILED if rehearsal.faults else 0

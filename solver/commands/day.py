"""``solver day``: rehearse a Kaggle day at full length on one engine, recorded attempts through the Kaggle path
(``solver.measure.day.kaggle_day`` says how), one device call after another; ``benchmarks/day.py`` is this command.

    solver day --attempts-file X --problems 2 --attempts 4 --attempt-tokens 300 --json /tmp/day.json --resume
    solver day --gpu --model M --attempts-file X --problems 6 --until 520 --json .gpu/day/slice.json --resume
    solver day --attempts-file X --estimate          # the time model's prediction; starts nothing

Exit 2 on bad input (before anything heavy starts), 3 when ``--hard-stop`` abandons a problem.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from solver.measure.day import DayOptions
    from solver.dryrun import DryRun

# Light imports only at module level: the CLI imports every command to build its parser.

# --rules's choices: solver.measure.day.options.DayRules's closed set, written out here to keep the CLI's imports
# light (tests/test_benchmarks_day.py holds the two equal)
RULES = ("kaggle", "stop", "none")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "day", help="rehearse a Kaggle day: recorded attempts through the Kaggle predictor on one engine",
        description="A Kaggle day at full length on one engine: recorded attempts through the Kaggle path, "
                    "problem after problem, one device call after another (solver/measure/day/kaggle_day.py).")
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The day's flags (``benchmarks/day.py``'s, unchanged)."""
    from solver.commands.common import preset_list
    from solver.config import GPU_PRESET, add_gpu_arguments

    parser.add_argument("--attempts-file", type=Path, default=None,
                        help="recorded attempts (default $SOLVER_ATTEMPTS, else the recorded gpt-oss-120b "
                             "attempts beside the checkout, not shipped: pass your own; an extract from "
                             "benchmarks/extract_attempts.py --measure-tools)")
    parser.add_argument("--problems", type=int, default=6, help="the slice: the first N problems with at least "
                        "--attempts attempts (default 6)")
    parser.add_argument("--problem-ids", default="", help="the slice: these problems, comma-separated, in order")
    parser.add_argument("--attempts", type=int, default=8, help="attempts per problem, all at once (default 8)")
    parser.add_argument("--attempt-tokens", type=int, default=None, help="cap: decoded tokens per attempt "
                        "(default: none, only the config's limits)")
    parser.add_argument("--rules", choices=RULES, default="kaggle",
                        help="what acts: kaggle (the preset's rules as on Kaggle: the first-answer cut, the stopper, "
                             "the deadlines), stop (the same without deadlines), none (every attempt to its end)")
    parser.add_argument("--tool-time", default="auto", help="'carried' (default when the file carries them), "
                        "'measure' (here, first), or fixed seconds per call")
    parser.add_argument("--json", type=Path, default=None, help="the slice's results, written as each problem ends "
                        "(required but with --estimate)")
    parser.add_argument("--resume", action="store_true", help="continue --json where the last call stopped (a new "
                        "file when there is none)")
    parser.add_argument("--until", type=float, default=None, help="seconds after this process started: start no "
                        "problem the time model says would end later")
    parser.add_argument("--hard-stop", type=float, default=None, help="seconds after this process started: abandon "
                        f"the problem in flight and exit 3 (default --until + 30)")
    parser.add_argument("--safety", type=float, default=1.1, help="the estimate times this (default 1.1)")
    parser.add_argument("--max-problems", type=int, default=None, help="problems this call plays at most")
    parser.add_argument("--kill-engine-at", default=None, metavar="PROBLEM:SECONDS",
                        help="kill the engine core SECONDS into PROBLEM (an id or a position in the slice)")
    parser.add_argument("--log-engine", action="store_true", help="vLLM's and the solver's engine log at INFO on "
                        "stderr, each line stamped with epoch seconds (to the ms), for benchmarks/holds.py: add "
                        "--set engine.args.enable_logging_iteration_details=true (every step's tokens and ms) and "
                        "--set engine.args.jit_monitor_verbose=true (every Triton compile)")
    parser.add_argument("--label", default=None, help="this run's label in --table")
    parser.add_argument("--table", type=Path, default=None, help="a table JSON of labelled runs (variants)")
    parser.add_argument("--estimate", action="store_true", help="print the time model's prediction; start nothing")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check (solver/dryrun/plan.py); start nothing, measure nothing")
    parser.add_argument("--time-model", default=None, help="for the estimates (default: the config's, else tiny)")
    parser.add_argument("--run-dir", type=Path, default=None, help="the predictor's run directory for this call "
                        "(default: beside --json, one per call)")
    add_gpu_arguments(parser, gpu_help="the preset's own engine (default: the tiny harmony model on the tiny preset's "
                                       "CPU engine, the preset's prompt, sampling, sandbox and rules)",
                      preset_default=GPU_PRESET,
                      preset_help=f"config preset: {preset_list()} (default {GPU_PRESET}; its engine replaced by "
                                  "the tiny CPU one without --gpu)")


def options(args: argparse.Namespace, dry: DryRun | None) -> DayOptions:
    """The parsed flags as the day's typed options, checked once (``day_options``: a one-line ``BadInput``, exit 2,
    before anything heavy starts); ``dry``: the ``--dry-run``'s ``DryRun``, which skips a file only the GPU machine
    has."""
    from solver.measure.day import day_options

    return day_options(attempts_file=args.attempts_file, problems=args.problems, problem_ids=args.problem_ids,
                       attempts=args.attempts, attempt_tokens=args.attempt_tokens, rules=args.rules,
                       tool_time=args.tool_time, json=args.json, resume=args.resume, until=args.until,
                       hard_stop=args.hard_stop, safety=args.safety, max_problems=args.max_problems,
                       kill_engine_at=args.kill_engine_at, log_engine=args.log_engine, label=args.label,
                       table=args.table, estimate=args.estimate, time_model=args.time_model, run_dir=args.run_dir,
                       gpu=args.gpu, preset=args.preset, model=args.model, overrides=args.overrides, dry=dry)


def run(args: argparse.Namespace) -> int:
    from solver.measure.day import rehearse_day
    from solver.dryrun import DryRun

    dry = DryRun("solver day") if args.dry_run else None
    return rehearse_day(options(args, dry), dry)

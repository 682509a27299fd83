"""``solver solve DATA --out RUN_DIR``: solve a problem set and write a run directory.

The command parses and prints: the choices on the command line, layered over the preset here and nowhere else, and
the problems go to ``solver.loop.run.make_run`` (the config's run-level edits, the checks, the folder, the budget), the run to this machine's runner or the
cluster's, and the report it wrote to stdout."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from solver.commands.common import (EXIT_INTERRUPTED, add_cluster_arguments, add_config_arguments, cluster_spec,
                                    dry_run_args, fail, print_report, read_choices)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("solve", help="solve a problem set (CSV or JSONL)",
                                   description="Solve every problem in DATA and write RUN_DIR.")
    parser.add_argument("data", nargs="?", metavar="DATA",
                        help="CSV (id, problem[, answer]) or JSONL; omit with --resume")
    where = parser.add_mutually_exclusive_group(required=True)  # one of the two, shown as required
    where.add_argument("--out", type=Path, default=None, metavar="RUN_DIR", help="run directory to create")
    where.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                       help="continue a stopped run: keep its finished repetitions, complete the rest")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check everything (config, names, problems, model, GPUs), then exit: "
                             "no engine starts, nothing is written (solver/dryrun/plan.py)")
    add_config_arguments(parser)
    add_cluster_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.loop.run import make_run

    records, dry, share_budget = None, None, False
    if args.dry_run:
        from solver.dryrun import DryRun

        dry = DryRun("solver solve")
        args = dry_run_args(args, dry)
    if args.resume is not None:
        from solver.runlog import read_log

        records = read_log(args.resume, allow_empty=True)  # killed before its first record; read once
        if records.config is None:
            return fail(f"{args.resume} has no config.yaml to resume with")
        run_dir, config = args.resume, records.config
        problems = _problems(args, config) if args.data else list(records.problems)
        if not problems and records.torn:
            return fail(f"no problems to solve: the only line of {records.path} is torn (the run was killed while "
                        "writing its first record); give DATA to resume it with")
    else:
        from solver.runlog import LOG_NAME

        choices = read_choices(args)
        run_dir = args.out
        if (run_dir / LOG_NAME).exists():
            return fail(f"{run_dir} already holds a run; use --resume {run_dir} or another --out")
        config = choices.config()  # the one layering of the user's choices; a bad config is the first error reported
        share_budget = not choices.sets("budget.problems")  # the budget's count is this data set's, unless chosen
        problems = _problems(args, config)
        if problems is None:
            return fail("DATA is required (a CSV or JSONL problem file)")
    if not problems:
        return fail("no problems to solve")
    if dry is not None:
        return _dry_run(dry, config, len(problems), run_dir, records is not None)
    cluster = cluster_spec(args)
    # make_run checks every name and path, then creates RUN_DIR, or resumes it with the config it saved
    made = make_run(None if records is not None else config, problems, run_dir, resume=records is not None,
                    records=records, share_budget=share_budget, cluster=cluster is not None)
    session = made.session
    assert session is not None  # made with a run_dir
    if cluster is not None:
        from solver.commands.cluster import solve_cluster_command

        return solve_cluster_command(cluster, made)

    from solver.commands.progress import LiveProgress

    with LiveProgress(len(problems)) as progress:
        try:
            asyncio.run(_solve(made, progress))
        except KeyboardInterrupt:
            print(f"solver: interrupted; continue with: solver solve --resume {run_dir}", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BaseException:
            session.discard_if_empty()  # a run that failed before its first repetition leaves nothing behind
            raise
    print_report(session.run_dir)
    return 0


def _dry_run(dry: Any, config: Any, problems: int, run_dir: Path, resume: bool) -> int:
    """``--dry-run``: what the run would check before it writes anything (``prepare_run``: every name, the
    dialect, the model, ``sampling.extra``; a model only the GPU machine has is skipped and named), the engine's
    arguments against the vLLM it is written for and its GPUs (``solver.measure.DryRun``), then the plan."""
    from solver.config import ConfigError
    from solver.loop.parts import prepare_run

    if config.engine.name == "vllm":
        dry.engine_args(config, ConfigError)
    prepare_run(config, find_model=lambda model: dry.model(model, ConfigError))
    if config.engine.name == "vllm":
        dry.gpus(config.engine.args, ConfigError)
    dry.add(f"{problems} problems, at most {config.solve.reps} repetitions each, stopped by "
            f"{', '.join(config.stop.stoppers) or 'none (every repetition runs)'}, on the {config.engine.name} "
            "engine; " + (f"resume {run_dir}" if resume else f"output {run_dir}"))
    return dry.print()


def _problems(args: argparse.Namespace, config: Any) -> Any:
    """The problems DATA names (the first ``--limit``), or without DATA a replay's recorded ones; None when
    there are none to read."""
    from solver.datasets import load_problems

    if args.data:
        return load_problems(args.data, limit=args.limit)
    if config.engine.name == "replay" and config.engine.replay_from:
        from solver.replay import problems_from_log

        return problems_from_log(Path(config.engine.replay_from[0]))[: args.limit]
    return None


async def _solve(made: Any, progress: Any) -> Any:
    from solver.engines.vllm_metrics import engine_usage
    from solver.loop.run import solve_locally

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        # SIGTERM ends the run like Ctrl-C: cancellation runs every cleanup (engine shutdown, sandbox kill).
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        # The engine's KV cache peak and preemptions over the run, on stderr (in-process vLLM only).
        async with engine_usage(made.config.engine.name, lambda line: print(line, file=sys.stderr)):
            return await solve_locally(made, on_event=progress)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None

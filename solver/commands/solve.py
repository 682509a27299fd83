"""``solver solve DATA --out RUN_DIR``: solve a problem set and write a run directory."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from solver.commands.common import (EXIT_INTERRUPTED, add_cluster_arguments, add_config_arguments, cluster_spec,
                                    fail, print_report, read_choices)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("solve", help="solve a problem set (CSV or JSONL)",
                                   description="Solve every problem in DATA and write RUN_DIR.")
    parser.add_argument("data", nargs="?", help="CSV (id, problem[, answer]) or JSONL; omit with --resume")
    parser.add_argument("--out", type=Path, default=None, help="run directory to create")
    parser.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                        help="continue a stopped run: keep its finished repetitions, complete the rest")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    add_config_arguments(parser)
    add_cluster_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.datasets import load_problems
    from solver.loop.parts import prepare_run
    from solver.loop.rundir import RunSession
    from solver.runlog import LOG_NAME, read_log

    records = None
    if args.resume is not None:
        if args.out is not None:
            return fail("--resume continues RUN_DIR in place; drop --out")
        records = read_log(args.resume, allow_empty=True)  # killed before its first record; read once
        if records.config is None:
            return fail(f"{args.resume} has no config.yaml to resume with")
        config = records.config
        run_dir = args.resume
        problems = load_problems(args.data, limit=args.limit) if args.data else list(records.problems)
    else:
        if args.out is None:
            return fail("--out RUN_DIR is required")
        choices = read_choices(args)
        config = choices.config()
        run_dir = args.out
        if (run_dir / LOG_NAME).exists():
            return fail(f"{run_dir} already holds a run; use --resume {run_dir} or another --out")
        if args.data:
            problems = load_problems(args.data, limit=args.limit)
        elif config.engine.name == "replay" and config.engine.replay_from:
            from solver.engines.replay import problems_from_log

            problems = problems_from_log(Path(config.engine.replay_from[0]))[: args.limit]
        else:
            return fail("DATA is required (a CSV or JSONL problem file)")
        if not choices.sets("budget.problems"):
            # The time budget shares its hours among the problems of this data set, not the preset's count.
            config = config.replace({"budget.problems": len(problems)})
    if not problems:
        return fail("no problems to solve")
    parts = prepare_run(config)  # before RUN_DIR exists: a bad name or path writes nothing
    cluster = cluster_spec(args)
    if cluster is not None:
        from solver.cluster.spec import without_budget

        if without_budget(config) != config:
            print("solver: note: a time budget is for one engine; the cluster run has none", file=sys.stderr)
            config = without_budget(config)
    session = RunSession.open(run_dir, config, resume=records is not None, records=records)
    if cluster is not None:
        from solver.commands.cluster import solve_cluster_command

        return solve_cluster_command(cluster, config, problems, session)

    from solver.commands.progress import LiveProgress

    with LiveProgress(len(problems)) as progress:
        try:
            asyncio.run(_solve(parts, problems, session, progress))
        except KeyboardInterrupt:
            print(f"solver: interrupted; continue with: solver solve --resume {run_dir}", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BaseException:
            session.discard_if_empty()  # a run that failed before its first repetition leaves nothing behind
            raise
    print_report(session.run_dir)
    return 0


async def _solve(parts: Any, problems: Any, session: Any, progress: Any) -> Any:
    from solver.engines.vllm_metrics import engine_usage
    from solver.loop.run import solve_run

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        # SIGTERM ends the run like Ctrl-C: cancellation runs every cleanup (engine shutdown, sandbox kill).
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        # The engine's KV cache peak and preemptions over the run, on stderr (in-process vLLM only).
        async with engine_usage(parts.config.engine.name, lambda line: print(line, file=sys.stderr)):
            return await solve_run(parts.config, problems, session.run_dir, session=session, on_event=progress,
                                   parts=parts)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None

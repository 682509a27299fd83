"""``solver solve DATA --out RUN_DIR``: solve a problem set and write a run directory."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from solver.commands.common import (EXIT_FAILED, add_cluster_arguments, add_config_arguments, cluster_spec,
                                    config_from_args, fail, user_sets)


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
    from solver.cluster.spec import ClusterError
    from solver.config import ConfigError
    from solver.datasets import DatasetError, load_problems
    from solver.runlog import LogError, read_log
    from solver.tiny_model import ModelError

    try:
        if args.resume is not None:
            if args.out is not None:
                return fail("--resume continues RUN_DIR in place; drop --out")
            records = read_log(args.resume, allow_empty=True)  # killed before its first record
            if records.config is None:
                return fail(f"{args.resume} has no config.yaml to resume with")
            config = records.config
            run_dir = args.resume
            problems = load_problems(args.data, limit=args.limit) if args.data else list(records.problems)
        else:
            if args.out is None:
                return fail("--out RUN_DIR is required")
            config = config_from_args(args)
            run_dir = args.out
            if (run_dir / "log.jsonl").exists():
                return fail(f"{run_dir} already holds a run; use --resume {run_dir} or another --out")
            if args.data:
                problems = load_problems(args.data, limit=args.limit)
            elif config.engine.name == "replay" and config.engine.replay_from:
                from solver.engines.replay import problems_from_log

                problems = problems_from_log(Path(config.engine.replay_from[0]))[: args.limit]
            else:
                return fail("DATA is required (a CSV or JSONL problem file)")
        if not problems:
            return fail("no problems to solve")
        if args.resume is None and not user_sets(args, "budget.problems"):
            # The time budget shares its hours among the problems of this data set, not the preset's count.
            config = config.replace({"budget.problems": len(problems)})
        from solver.loop.run import check_runnable

        check_runnable(config)  # before RUN_DIR exists: a bad name or path writes nothing
        cluster = cluster_spec(args)
        if cluster is not None:
            from solver.cluster.spec import without_budget

            if without_budget(config) != config:
                print("solver: note: a time budget is for one engine; the cluster run has none", file=sys.stderr)
                config = without_budget(config)
    except (ClusterError, ConfigError, DatasetError, LogError, ModelError) as exc:
        return fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if cluster is not None:
        from solver.commands.cluster import solve_cluster_command

        return solve_cluster_command(cluster, config, problems, run_dir, args.resume is not None)

    from solver.progress import LiveProgress
    from solver.loop.run import summary_markdown

    created = not run_dir.exists()
    with LiveProgress(len(problems)) as progress:
        try:
            results = asyncio.run(_solve(config, problems, run_dir, args.resume is not None, progress))
        except (ConfigError, LogError, ModelError) as exc:
            _discard_if_empty(run_dir, created)
            return fail(str(exc).splitlines()[0])
        except KeyboardInterrupt:
            print(f"solver: interrupted; continue with: solver solve --resume {run_dir}", file=sys.stderr)
            return 130
        except Exception as exc:  # the run failed (e.g. the engine could not start): one line, exit 1
            _discard_if_empty(run_dir, created)
            return fail(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", EXIT_FAILED)
    print(summary_markdown(problems, results), end="")
    print(f"run directory: {run_dir}")
    return 0


async def _solve(config: Any, problems: Any, run_dir: Path, resume: bool, progress: Any) -> Any:
    from solver.engines.vllm_metrics import engine_usage
    from solver.loop.run import solve_run

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        # SIGTERM ends the run like Ctrl-C: cancellation runs every cleanup (engine shutdown, sandbox kill).
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        # The engine's KV cache peak and preemptions over the run, on stderr (in-process vLLM only).
        async with engine_usage(config.engine.name, lambda line: print(line, file=sys.stderr)):
            return await solve_run(config, problems, run_dir, resume=resume, on_event=progress)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def _discard_if_empty(run_dir: Path, created: bool) -> None:
    """A run that failed before any repetition leaves nothing behind."""
    log = run_dir / "log.jsonl"
    if created and run_dir.exists() and (not log.exists() or b'"repetition"' not in log.read_bytes()):
        shutil.rmtree(run_dir, ignore_errors=True)

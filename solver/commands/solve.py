"""``solver solve DATA --out RUN_DIR``: solve a problem set and write a run directory."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


def _workers(value: str) -> int:
    """``auto`` -> 0 (the config's spelling of adaptive workers), else a positive whole number."""
    if value == "auto":
        return 0
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'auto', got {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError("must be > 0, or 'auto'")
    return number


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by every command that builds a config (solve, sweep, kaggle-local)."""
    parser.add_argument("--preset", default=None, help="config preset: tiny (CPU), t4x2, h100 (default tiny)")
    parser.add_argument("--config", dest="config_file", default=None, help="a YAML file layered on the preset")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config key, e.g. --set sampling.top_p=0.95 (value parsed as YAML)")
    parser.add_argument("--model", default=None, help="model path or hub id (default: the embedded tiny model)")
    parser.add_argument("--engine", default=None, help="engine backend: vllm, openai, replay")
    parser.add_argument("--endpoint", action="append", default=None, help="OpenAI-compatible server base URL")
    parser.add_argument("--from", dest="replay_from", action="append", default=None, metavar="RUN_DIR",
                        help="run directory to replay (with --engine replay)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per problem at most")
    parser.add_argument("--workers", type=_workers, default=None,
                        help="repetitions in flight per problem, or 'auto' to keep the engine's batch full")
    parser.add_argument("--parallel-problems", type=int, default=None,
                        help="problems solved at once (default 1, as on Kaggle; more keeps the engine busier)")
    parser.add_argument("--max-tokens", type=int, default=None, help="max new tokens per engine request")
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--voter", default=None, help="voting policy name")
    parser.add_argument("--stopper", default=None, help="stopping policies, comma separated, e.g. beta,esc:5")


def config_from_args(args: argparse.Namespace) -> Any:
    """The validated config from preset + file + flags; raises ConfigError with a one-line message."""
    from solver.config import ConfigError, load_config

    overrides: dict[str, Any] = {}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            overrides[key] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {key}: cannot parse {value!r}") from exc
    flags = {
        "engine.model": args.model, "engine.name": args.engine, "engine.endpoints": args.endpoint,
        "engine.replay_from": args.replay_from, "solve.reps": args.reps, "solve.workers": args.workers,
        "solve.parallel_problems": args.parallel_problems,
        "sampling.max_tokens": args.max_tokens, "sampling.temperature": args.temperature,
        "sampling.seed": args.seed, "vote.voter": args.voter,
        "stop.stoppers": args.stopper.split(",") if args.stopper else None,
    }
    overrides.update({k: v for k, v in flags.items() if v is not None})
    return load_config(args.preset or "tiny", args.config_file, overrides)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("solve", help="solve a problem set (CSV or JSONL)",
                                   description="Solve every problem in DATA and write RUN_DIR.")
    parser.add_argument("data", nargs="?", help="CSV (id, problem[, answer]) or JSONL; omit with --resume")
    parser.add_argument("--out", type=Path, default=None, help="run directory to create")
    parser.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                        help="continue a stopped run: keep its finished repetitions, complete the rest")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    add_config_arguments(parser)
    parser.set_defaults(func=run)


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"solver: error: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    from solver.config import ConfigError
    from solver.datasets import DatasetError, load_problems
    from solver.runlog import LogError, read_log
    from solver.tiny_model import ModelError

    try:
        if args.resume is not None:
            if args.out is not None:
                return _fail("--resume continues RUN_DIR in place; drop --out")
            records = read_log(args.resume)
            if records.config is None:
                return _fail(f"{args.resume} has no config.yaml to resume with")
            config = records.config
            run_dir = args.resume
            problems = load_problems(args.data, limit=args.limit) if args.data else list(records.problems)
        else:
            if args.out is None:
                return _fail("--out RUN_DIR is required")
            config = config_from_args(args)
            run_dir = args.out
            if (run_dir / "log.jsonl").exists():
                return _fail(f"{run_dir} already holds a run; use --resume {run_dir} or another --out")
            if args.data:
                problems = load_problems(args.data, limit=args.limit)
            elif config.engine.name == "replay" and config.engine.replay_from:
                from solver.engines.replay import problems_from_log

                problems = problems_from_log(Path(config.engine.replay_from[0]))[: args.limit]
            else:
                return _fail("DATA is required (a CSV or JSONL problem file)")
        if not problems:
            return _fail("no problems to solve")
        from solver.run import check_runnable

        check_runnable(config)  # before RUN_DIR exists: a bad name or path writes nothing
    except (ConfigError, DatasetError, LogError, ModelError) as exc:
        return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    from solver.progress import LiveProgress
    from solver.run import summary_markdown

    created = not run_dir.exists()
    with LiveProgress(len(problems)) as progress:
        try:
            results = asyncio.run(_solve(config, problems, run_dir, args.resume is not None, progress))
        except (ConfigError, LogError, ModelError) as exc:
            _discard_if_empty(run_dir, created)
            return _fail(str(exc).splitlines()[0])
        except KeyboardInterrupt:
            print(f"solver: interrupted; continue with: solver solve --resume {run_dir}", file=sys.stderr)
            return 130
        except Exception as exc:  # the run failed (e.g. the engine could not start): one line, exit 1
            _discard_if_empty(run_dir, created)
            return _fail(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", EXIT_FAILED)
    print(summary_markdown(problems, results), end="")
    print(f"run directory: {run_dir}")
    return 0


async def _solve(config: Any, problems: Any, run_dir: Path, resume: bool, progress: Any) -> Any:
    from solver.run import solve_run

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        # SIGTERM ends the run like Ctrl-C: cancellation runs every cleanup (engine shutdown, sandbox kill).
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await solve_run(config, problems, run_dir, resume=resume, on_event=progress)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def _discard_if_empty(run_dir: Path, created: bool) -> None:
    """A run that failed before any repetition leaves nothing behind."""
    log = run_dir / "log.jsonl"
    if created and run_dir.exists() and (not log.exists() or b'"repetition"' not in log.read_bytes()):
        shutil.rmtree(run_dir, ignore_errors=True)

"""``solver demo --out DIR``: a first run that shows what the solver does (see solver/demo/__init__.py)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from solver.commands.common import fail, first_line


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "demo", help="a first run: the tiny model live, then recorded real samples replayed and simulated",
        description="Part 1 solves the bundled demo set live with the embedded tiny model (it proves the engine "
                    "path); part 2 replays 2,640 recorded programs of a real maths model through the same loop "
                    "with early stopping, then simulates leaderboard runs of a few policies on them and writes "
                    "an HTML report. About 2.5 minutes on 2 CPU cores, most of it the live part.")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for the runs and the report (default runs/demo-TIME; must be new or empty)")
    parser.add_argument("--skip-live", action="store_true", help="leave out the live part (no vLLM needed)")
    parser.add_argument("--questions", type=int, default=None, metavar="K",
                        help="replay only the first K recorded questions (default all 88)")
    parser.add_argument("--trials", type=int, default=None, metavar="N",
                        help="simulated leaderboard runs per policy (default 100)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from solver.config import ConfigError
    from solver.demo.run import TRIALS, DemoError, run_demo
    from solver.models import ModelError

    if args.questions is not None and args.questions < 1:
        return fail("--questions must be >= 1")
    if args.trials is not None and args.trials < 2:
        return fail("--trials must be >= 2")
    out = args.out or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    console = Console()
    if not console.is_terminal:  # a log or a pipe: whole lines (rich would cut them at 80 columns)
        console = Console(width=120, soft_wrap=True)
    try:
        return run_demo(out, console, live=not args.skip_live, questions=args.questions,
                        trials=args.trials or TRIALS)
    except (DemoError, ConfigError, ModelError) as exc:
        return fail(first_line(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)

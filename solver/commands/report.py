"""``solver report RUN_DIR [--out FILE]``: the accuracy report of a run, as markdown."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "report", help="accuracy report of a run directory",
        description="Accuracy overall, per metadata group (e.g. MATH level) and per problem, with the answer "
                    "distribution of every wrong problem.")
    parser.add_argument("run_dir", type=Path, help="a run directory (or its log.jsonl)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here instead of stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.config import ConfigError
    from solver.report import write_report
    from solver.runlog import LogError

    try:
        text = write_report(args.run_dir, args.out)
    except (LogError, ConfigError) as exc:
        print(f"solver: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"solver: error: cannot write {args.out}: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.out is None:
        print(text, end="")
    else:
        print(f"report written to {args.out}")
    return 0

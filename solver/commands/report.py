"""``solver report RUN_DIR [--out FILE]``: the accuracy report of a run, as markdown."""

from __future__ import annotations

import argparse
from pathlib import Path

from solver.commands.common import fail


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "report", help="accuracy report of a run directory",
        description="Accuracy overall, per metadata group (e.g. MATH level) and per problem, with the answer "
                    "distribution of every wrong problem.")
    parser.add_argument("run_dir", type=Path, help="a run directory (or its log.jsonl)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here instead of stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.runlog import write_report

    try:
        text = write_report(args.run_dir, args.out)
    except OSError as exc:  # the run read fine: writing --out failed
        return fail(f"cannot write {args.out}: {exc.strerror}")
    if args.out is None:
        print(text, end="")
    else:
        print(f"report written to {args.out}")
    return 0

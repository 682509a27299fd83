"""The ``solver`` command: subcommands live in ``solver/commands/<name>.py``, each exposing ``register``.

Exit codes: 0 success, 1 the run failed, 2 bad input (usage, data, config, model path), 130 interrupted; the
errors a command raises become them in one place (``solver.commands.common.run_command``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from solver import __version__

COMMANDS = ("solve", "simulate", "tune", "import_samples", "report", "sweep", "kaggle_local", "serve", "demo",
            "compile_cache", "day")


class CliParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(prog="solver", description="Self-consistency maths solver on vLLM.")
    parser.add_argument("--version", action="version", version=f"solver {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    # Not required to argparse: ``solver`` alone gets a line that says where to start (``main``).
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CliParser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"solver.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"solver.commands.{name}":
                raise
            continue  # a command this installation does not ship
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        print("solver: error: a command is required: `solver --help` lists them; `make demo` (the README's first "
              "command) sets up and runs one", file=sys.stderr)
        return 2
    # vLLM logs every engine step at INFO; a run's own progress display is what a person wants to see.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if args.verbose else "ERROR")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    if not args.verbose:
        # Some vLLM modules warn while vLLM is still being imported, before its own logging honours the level.
        logging.getLogger("vllm").setLevel(logging.ERROR)
    from solver.commands.common import run_command

    return run_command(args.func, args)


if __name__ == "__main__":
    raise SystemExit(main())

"""The simulator held to a day slice: ``solver day``'s JSON played through the simulator's own day
(``solver/measure/day/held_out.py`` says how, and what the targets are).

    python benchmarks/day_check.py benchmarks/results/h100_day-slice.json [--time-model NAME] [--json OUT]
    python benchmarks/day_check.py FILE --add-answers EXTRACT    # once, for a file day.py wrote without answers
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the solver package, run from a checkout

from solver.errors import BadInput  # noqa: E402 - after the path set-up above
from solver.measure.day import add_day_answers, check_day  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("day", type=Path, help="benchmarks/day.py --json output")
    parser.add_argument("--time-model", default=None, help="a name or .yaml (default: the preset's)")
    parser.add_argument("--json", type=Path, default=None, help="write the rows and the verdict here")
    parser.add_argument("--add-answers", type=Path, default=None, metavar="EXTRACT",
                        help="write each attempt's answer into the file's plan from the extract it was run from")
    args = parser.parse_args(argv)
    try:
        if args.add_answers is not None:
            print(f"{args.day}: {add_day_answers(args.day, args.add_answers)} attempts given their answers")
            return 0
        return check_day(args.day, args.time_model, args.json)
    except (BadInput, OSError, ValueError, KeyError) as exc:  # ConfigError is a BadInput
        print(f"day_check: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

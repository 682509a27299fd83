"""What ``solver simulate`` and ``solver tune`` share: the grid of settings and the time policy they play on recorded
runs, read from the same flags into one ``SimulationRequest``, and the run on this machine or on a Ray cluster."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from solver.commands.common import add_cluster_arguments, cluster_spec
from solver.config import parse_overrides, stopper_set

T = TypeVar("T")


def int_list(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` -> (8, 16, 32), for argparse.

    >>> int_list("8, 16,32")
    (8, 16, 32)
    """
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def budget_value(text: str) -> float | None:
    """``--budget`` values: seconds, or ``none`` for no budget.

    >>> budget_value("18000"), budget_value("none")
    (18000.0, None)
    """
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or none, got {text!r}") from None


def clamp_value(text: str) -> tuple[float, float]:
    """``--clamp MIN:MAX`` seconds, e.g. ``300:900``.

    >>> clamp_value("300:900")
    (300.0, 900.0)
    """
    low, sep, high = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return float(low), float(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN:MAX seconds, e.g. 300:900, got {text!r}") from None


def pair_value(text: str) -> tuple[int, int]:
    """``--compare A,B``: two row numbers of the grid.

    >>> pair_value("1, 3")
    (1, 3)
    """
    values = int_list(text)
    if len(values) != 2:
        raise argparse.ArgumentTypeError(f"expected two row numbers A,B, got {text!r}")
    return values[0], values[1]


def switch_value(text: str) -> bool:
    """``on`` / ``off``."""
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")
    return text == "on"


def stopper_sets(items: list[str]) -> tuple[tuple[str, ...], ...]:
    """Repeated ``--stopper`` values: each a comma-separated set, ``none`` for the empty one.

    >>> stopper_sets(["none", "beta, esc:5"])
    ((), ('beta', 'esc:5'))
    """
    return tuple(stopper_set(s) for s in items)


def default_jobs() -> int:
    """Parallel processes without --jobs or --cluster: the usable cores, at most 4."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


def add_grid_arguments(parser: argparse.ArgumentParser, *, trials: int, defaults: dict[str, str]) -> None:
    """The runs, the output folder, the grid (``--reps``, ``--voter``, ``--stopper``, ``--workers``), the time
    policy, the draws, the engine model, the scoring rule and its line, the machine-speed stress test and the comparisons:
    the flags simulate and tune share. ``defaults`` says, per grid flag,
    what the command takes when the flag is left out (the two differ there)."""
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories to pool")
    parser.add_argument("--out", type=Path, required=True, help="directory for the outputs")
    parser.add_argument("--reps", type=int_list, default=(), help=f"repetitions per problem{defaults['reps']}")
    parser.add_argument("--voter", action="append", default=[],
                        help=f"voter name (repeat for several{defaults['voter']})")
    parser.add_argument("--stopper", action="append", default=[],
                        help="a stopper set, comma separated, e.g. beta,esc:5; 'none' = run every repetition "
                             f"(repeat for several{defaults['stopper']})")
    parser.add_argument("--workers", type=int_list, default=(),
                        help=f"repetitions in flight, e.g. 8,16{defaults['workers']} (auto, the engine's batch up "
                             "to N: --set solve.workers=0)")
    parser.add_argument("--budget", type=budget_value, action="append", default=[], metavar="SECONDS",
                        help="total time for the K problems, or none (repeat for several; default: the runs' "
                             "budget.total_s)")
    parser.add_argument("--retry", type=int_list, default=(), metavar="R,...",
                        help="a second round of R repetitions when a problem's round ends with no answer agreed "
                             "by solve.retry_below (0 = none; default: the runs' solve.retry_reps)")
    parser.add_argument("--clamp", type=clamp_value, action="append", default=[], metavar="MIN:MAX",
                        help="the budget's per-problem floor and cap in seconds (repeat; default: the runs' "
                             "budget.min_s and max_s)")
    parser.add_argument("--banking", type=switch_value, action="append", default=[], metavar="on|off",
                        help="time banking: a problem may go past the cap by what earlier ones left (repeat for "
                             "both; default: the runs' budget.banking)")
    parser.add_argument("--time-model", default=None, metavar="NAME|FILE|none",
                        help="the engine time model attempts are timed with (solver/timing/data, e.g. "
                             "h100-gptoss, or a .yaml); none = recorded durations (default: the runs' "
                             "engine.time_model)")
    parser.add_argument("--problems", type=int, default=None, metavar="K",
                        help="problems per leaderboard run (default: budget.problems under a budget, else every "
                             "recorded problem)")
    parser.add_argument("--trials", type=int, default=trials, help="simulated leaderboard runs per setting")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated runs' draws (default 0)")
    parser.add_argument("--draw", choices=("auto", "bootstrap", "subset"), default="auto",
                        help="repetitions drawn without replacement where a problem has enough (auto), always with "
                             "replacement (bootstrap) or always without (subset)")
    parser.add_argument("--tokens-per-s", type=float, default=None,
                        help="time repetitions as tokens / rate plus code time instead of recorded durations")
    parser.add_argument("--scoring", default=None, metavar="aimo3-public|aimo3-private|count",
                        help="how a day is scored: AIMO3's public leaderboard (one run, the default), its private "
                             "one (the same problems run twice with fresh draws, a problem scoring 1 when both "
                             "answers are right, 0.5 when one is, 0 when neither), or problems right in one run")
    parser.add_argument("--line", type=float, default=None, metavar="L",
                        help="report P(score >= L) for every setting (default: AIMO3's prize line, 47 of 50, scaled "
                             "to the day's K problems)")
    parser.add_argument("--order", default=None, metavar="random|hard-first|hard-last|hard-middle",
                        help="the order a run serves its problems in: random (the gateway's; AIMO3's private set "
                             "keeps one order for both runs), or, as a stress setting, the hard problems (the "
                             "recordings' accuracy) first, last or in the middle (default random)")
    parser.add_argument("--machine-speed", type=float, default=None, metavar="F",
                        help="stress test, off by default: each run's seconds multiplied by a factor drawn in 1 ± F, "
                             "the same for every setting, as on a slower or faster machine (no rule of AIMO3 varies "
                             "it; Kaggle's notice that reported run times vary by up to 30 minutes is about the time "
                             "reported); the report shows how cuts and score move with it")
    parser.add_argument("--speed-jitter", type=float, default=None, metavar="F", help=argparse.SUPPRESS)
    parser.add_argument("--compare", type=pair_value, action="append", default=[], metavar="A,B",
                        help="set setting A against setting B (row numbers of the grid, from 1, as the tables "
                             "number them): the difference, its interval from the recordings, and whether the data "
                             "separates them (repeat for several; every setting is set against the best anyway)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the runs' config, e.g. --set budget.reserve_s=0 (value parsed as "
                             "YAML)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="parallel processes (default: usable cores, at most 4; with --cluster, its CPUs)")
    add_cluster_arguments(parser, engines=False)


def grid_request(args: argparse.Namespace, **fields: Any) -> Any:
    """The ``SimulationRequest`` the shared flags give (``fields``: the command's own, e.g. thresholds)."""
    from solver.offline.sim import SimulationRequest

    none = args.time_model is not None and args.time_model.strip().lower() == "none"
    given = {name: value for name, value in (("scoring", args.scoring), ("line", args.line), ("order", args.order),
                                             ("machine_speed", machine_speed(args))) if value is not None}
    return SimulationRequest(
        run_dirs=tuple(args.runs), reps=args.reps, voters=tuple(args.voter), stoppers=stopper_sets(args.stopper),
        workers=args.workers, problems=args.problems, trials=args.trials, seed=args.seed, draw=args.draw,
        tokens_per_s=args.tokens_per_s, jobs=default_jobs() if args.jobs is None else args.jobs,
        overrides=tuple(parse_overrides(args.overrides).items()), budgets=tuple(args.budget), retries=args.retry,
        clamps=tuple(args.clamp) or (None,), banking=tuple(args.banking), time_model=None if none else args.time_model,
        recorded_time=none, compare=tuple(args.compare), **given, **fields)


def machine_speed(args: argparse.Namespace) -> float | None:
    """``--machine-speed``, or the old ``--speed-jitter`` it replaces (with a one-line note: it was presented as an
    AIMO3 rule and on by default; it is now a stress test, off unless asked for)."""
    if args.speed_jitter is None:
        return args.machine_speed
    print("note: --speed-jitter is deprecated: it is --machine-speed now, a stress test off by default (no rule of "
          "AIMO3 varies the machine)", file=sys.stderr)
    return args.speed_jitter if args.machine_speed is None else args.machine_speed


def play_grid(args: argparse.Namespace, request: Any, play: Callable[[Any, Any], T]) -> T:
    """``play(request, loaded)`` here, or on the ``--cluster`` with its CPUs as the jobs; the request is checked
    and the runs are loaded first, so a bad flag or a missing run fails before a cluster starts."""
    from solver.commands.cluster import offline_on_cluster
    from solver.offline.sim import load, validate

    validate(request)
    cluster = cluster_spec(args)
    loaded = load(request)
    if cluster is None:
        return play(request, loaded)
    return offline_on_cluster(cluster, lambda jobs: play(replace(request, jobs=jobs), loaded), args.jobs)

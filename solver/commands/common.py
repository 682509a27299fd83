"""What the subcommands share: exit codes and the one place errors become them, the one-line error, and the flags
that choose a config (their dotted keys; ``solver.config.Choices`` layers them over the preset, file and --set)."""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from solver.errors import BadInput, RunFailed, describe, first_line

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "fail", "first_line", "print_report", "run_command"]

EXIT_FAILED = 1  # the run failed
EXIT_BAD_INPUT = 2  # usage, data, config or model path
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM, as a shell reports SIGINT

log = logging.getLogger(__name__)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"solver: error: {message}", file=sys.stderr)
    return code


def run_command(command: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Run a subcommand; what it raises becomes an exit code here, once: bad input (``solver.errors.BadInput``:
    config, data, log, model path, cluster spec, ...) 2, a run that could not finish (``RunFailed``) 1, an
    interrupt 130, any other failure 1 with its type and first line (the traceback with ``--verbose``)."""
    try:
        return int(command(args) or 0)
    except BadInput as exc:
        return fail(first_line(exc))
    except RunFailed as exc:
        return fail(first_line(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
    except Exception as exc:  # a failure no error class names (an engine that cannot start, say)
        log.info("the command failed", exc_info=True)
        return fail(describe(exc), EXIT_FAILED)


def print_report(run_dir: Path) -> None:
    """A run's report as written to RUN_DIR (rendered once, from its records), then where the run is."""
    from solver.loop.rundir import REPORT_NAME

    sys.stdout.write((run_dir / REPORT_NAME).read_text())
    print(f"run directory: {run_dir}")


def workers_value(value: str) -> int:
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


@functools.lru_cache(maxsize=1)  # every subcommand's parser asks; the preset files are read once a process
def preset_list() -> str:
    """The presets for a help text, as ``--preset`` finds them (``solver.config.loading.presets``), the one whose
    engine is vLLM's CPU build marked (``solver.engines.engine_args.cpu_engine``)."""
    from solver.config import load_preset, presets
    from solver.config import cpu_engine

    def cpu(name: str) -> bool:
        return cpu_engine((load_preset(name).get("engine") or {}).get("env") or {})

    return ", ".join(f"{name} (CPU)" if cpu(name) else name for name in presets())


def add_base_config_arguments(parser: argparse.ArgumentParser, *, engines: bool = True) -> None:
    """--preset, --config, --set and --model; with ``engines`` also --engine, --endpoint and --from."""
    parser.add_argument("--preset", default=None, help=f"config preset: {preset_list()} (default tiny)")
    parser.add_argument("--config", dest="config_file", default=None, help="a YAML file layered on the preset")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config key, e.g. --set sampling.top_p=0.95 (value parsed as YAML)")
    parser.add_argument("--model", default=None, help="model path or hub id (default: the embedded tiny model)")
    if engines:
        parser.add_argument("--engine", default=None, help="engine backend: vllm, openai, replay")
        parser.add_argument("--endpoint", action="append", default=None, help="OpenAI-compatible server base URL")
        parser.add_argument("--from", dest="replay_from", action="append", default=None, metavar="RUN_DIR",
                            help="run directory to replay (with --engine replay)")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The base flags plus the single-setting ones (solve, kaggle-local)."""
    add_base_config_arguments(parser)
    parser.add_argument("--reps", type=int, default=None, help="repetitions per problem at most")
    parser.add_argument("--workers", type=workers_value, default=None,
                        help="repetitions in flight per problem, or 'auto' to keep the engine's batch full")
    parser.add_argument("--parallel-problems", type=int, default=None,
                        help="problems solved at once (default 1, as on Kaggle; more keeps the engine busier)")
    parser.add_argument("--max-tokens", type=int, default=None, help="max new tokens per engine request")
    parser.add_argument("--temperature", type=float, default=None, help="sampling temperature (sampling.temperature)")
    parser.add_argument("--seed", type=int, default=None,
                        help="the seed each repetition's own is derived from (sampling.seed)")
    parser.add_argument("--voter", default=None, help="voting policy name")
    parser.add_argument("--stopper", default=None,
                        help="stopping policies, comma separated, e.g. beta,esc:5; 'none' = run every repetition")


def dry_run_args(args: argparse.Namespace, dry: Any) -> argparse.Namespace:
    """``args`` for a dry run (``dry``: its ``solver.measure.DryRun``): a ``--config`` file that only the machine the
    command is written for has (written there, e.g. by ``solver tune``; outside the checkout's committed files) is
    named as skipped and left out, and the rest is checked; one missing from the checkout is a one-line error."""
    from solver.config import ConfigError

    path = getattr(args, "config_file", None)
    if path is None or dry.present(path, "--config", ConfigError):
        return args
    return argparse.Namespace(**{**vars(args), "config_file": None})


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The dotted config keys the flags present on ``args`` set (absent or unset flags set nothing)."""
    from solver.config import stopper_set

    stopper = getattr(args, "stopper", None)
    flags = {
        "engine.model": getattr(args, "model", None), "engine.name": getattr(args, "engine", None),
        "engine.endpoints": getattr(args, "endpoint", None), "engine.replay_from": getattr(args, "replay_from", None),
        "solve.reps": getattr(args, "reps", None), "solve.workers": getattr(args, "workers", None),
        "solve.parallel_problems": getattr(args, "parallel_problems", None),
        "sampling.max_tokens": getattr(args, "max_tokens", None),
        "sampling.temperature": getattr(args, "temperature", None), "sampling.seed": getattr(args, "seed", None),
        "vote.voter": getattr(args, "voter", None), "stop.stoppers": list(stopper_set(stopper)) if stopper else None,
    }
    return {k: v for k, v in flags.items() if v is not None}


def read_choices(args: argparse.Namespace) -> Any:
    """The user's choices on the command line (``solver.config.Choices``: the preset, the ``--config`` file read
    once, ``--set`` and this command's flags as dotted keys); a one-line ConfigError when the file or a --set is
    bad."""
    from solver.config import read_choices as choices

    return choices(getattr(args, "preset", None), getattr(args, "config_file", None),
                   getattr(args, "overrides", []) or [], flag_overrides(args))


def config_from_args(args: argparse.Namespace) -> Any:
    """The validated config from the command line (:func:`read_choices`); ConfigError with a one-line message."""
    return read_choices(args).config()


def add_cluster_arguments(parser: argparse.ArgumentParser, *, engines: bool = True) -> None:
    """--cluster, and with ``engines`` --actors (solve, sweep): run on Ray, see docs/cluster.md. Without
    ``engines`` (simulate, tune) only the offline work goes to Ray, as joblib tasks."""
    joins = "auto (join the cluster this machine belongs to) or ray://HOST:PORT (join through Ray Client)"
    parser.add_argument("--cluster", default=None, metavar="SPEC",
                        help=f"run on Ray: local:N (start a local Ray with N engine actors), {joins}" if engines else
                        f"run the offline work as Ray tasks: local:N (start a local Ray here), {joins}; --jobs then "
                        "defaults to the cluster's CPUs")
    if not engines:
        return
    parser.add_argument("--actors", type=int, default=None,
                        help="engine actors on a joined cluster (default: as many engines as its GPUs hold)")


def cluster_spec(args: argparse.Namespace) -> Any:
    """The parsed --cluster spec, or None without --cluster; ClusterError (one line) on a bad value or without
    Ray, before the command starts any work."""
    from solver.cluster.connect import import_ray
    from solver.cluster.spec import ClusterError, parse_cluster

    actors = getattr(args, "actors", None)  # simulate and tune have no --actors
    if args.cluster is None:
        if actors is not None:
            raise ClusterError("--actors needs --cluster")
        return None
    spec = parse_cluster(args.cluster, actors)
    import_ray()
    return spec

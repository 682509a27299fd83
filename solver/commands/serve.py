"""``solver serve [--model PATH] [--gpus N] [--port 8000] [-- extra vllm args]``: start vLLM OpenAI-compatible
servers (one per engine's GPUs, as the layout of the engine arguments and the extra flags says, ``Layout.of``; one
on a CPU-only machine), print their endpoints, and stop them all on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from solver.commands.common import EXIT_FAILED, add_base_config_arguments, config_from_args, fail, first_line


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "serve", help="start vLLM OpenAI-compatible servers for --engine openai",
        description="Start one vLLM OpenAI-compatible server per visible GPU (one on a CPU-only machine) with "
                    "the config's engine arguments; arguments after -- go to every server unchanged.")
    parser.add_argument("vllm_args", nargs="*", metavar="-- VLLM_ARGS", help="extra vLLM server flags, after --")
    add_base_config_arguments(parser, engines=False)
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs to use, from the visible ones (default: all; ignored on a CPU-only machine)")
    parser.add_argument("--servers", type=int, default=None,
                        help="servers to start (default: one per GPU or GPU group; 1 on CPU)")
    parser.add_argument("--port", type=int, default=8000, help="port of the first server; the others follow")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    parser.add_argument("--log-dir", type=Path, default=None, help="server logs (default: a new temp dir)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the servers to start")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check (solver/dryrun/plan.py); start no server (before a --)")
    parser.set_defaults(func=run)


class _Stop(Exception):
    """SIGTERM arrived: leave the wait loop and stop the servers."""


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def run(args: argparse.Namespace) -> int:
    import tempfile

    from solver.config import ConfigError
    from solver.engines.engine_args import installed_args
    from solver.engines.launch import LaunchError, ServerGroup, plan_servers, visible_gpus
    from solver.models import resolve_model

    if not 0 < args.port < 65536:
        return fail(f"--port {args.port} is not a port number")
    try:
        config = config_from_args(args)
        served = with_server_flags(config, args.vllm_args, installed_args() if not args.dry_run else None)
        if args.dry_run:
            from solver.dryrun import DryRun

            dry = DryRun("solver serve")
            dry.engine_args(served, ConfigError)
            checked = len(dry.skipped)
            dry.model(config.engine.model, ConfigError)  # a path only the other machine has: skipped, kept as named
            model = config.engine.model if len(dry.skipped) > checked else resolve_model(config.engine.model)
        else:
            model = resolve_model(config.engine.model)
        gpus = visible_gpus()
        if args.gpus is not None:
            if args.gpus < 1 or (gpus and args.gpus > len(gpus)):
                return fail(f"--gpus {args.gpus}: {len(gpus)} GPU(s) visible")
            gpus = gpus[: args.gpus]
        if args.port + (args.servers or max(1, len(gpus))) > 65536:
            return fail(f"--port {args.port} leaves no room for the servers' ports")
        specs = plan_servers(config, model, servers=args.servers, gpus=gpus, base_port=args.port,
                             host=args.host, extra_args=args.vllm_args)
    except LaunchError as exc:  # a plan that cannot be served (ConfigError and ModelError: the CLI's exit 2)
        return fail(first_line(exc))
    if args.dry_run:
        for spec in specs:
            dry.add(f"server on port {spec.port}, " + (f"GPUs {spec.devices}" if spec.devices else "CPU")
                    + f": {' '.join(spec.command[2:])}")
        return dry.print()

    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="solver-serve-"))
    group = ServerGroup(specs, log_dir)
    previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        where = ", ".join(f"port {s.port}" + (f" on GPU {s.devices}" if s.devices else " on CPU") for s in specs)
        print(f"starting {len(specs)} server(s) for {model}: {where}; logs in {log_dir}", file=sys.stderr)
        group.start()
        group.wait_ready(args.timeout)
        print("ready; endpoints:")
        for url in group.urls:
            print(url)
        flags = " ".join(f"--endpoint {u}" for u in group.urls)
        print(f"use: solver solve DATA --engine openai {flags} --out RUN_DIR   (Ctrl-C stops the servers)",
              file=sys.stderr, flush=True)
        return _watch(group)
    except LaunchError as exc:
        return fail(first_line(exc), EXIT_FAILED)
    except (KeyboardInterrupt, _Stop):
        print("stopping the servers", file=sys.stderr)
        return 0
    finally:
        # A second Ctrl-C or SIGTERM must not interrupt the shutdown half-way and leave servers behind.
        previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            group.stop()
        finally:
            signal.signal(signal.SIGINT, previous_int)
            signal.signal(signal.SIGTERM, previous)


def with_server_flags(config: Any, flags: list[str], known: Any = None) -> Any:
    """``config`` as the servers would run it: the engine arguments that the flags after ``--`` set laid over its
    own (the servers get both, theirs last), so that the config's rules (``speculative_config`` with
    ``sampling.extra.min_p``, ``check_model_named``) and a dry run's checks of names and values see them. The flags
    are read against ``known`` (a vLLM's ``KnownArgs``; default the one the engine is written for,
    ``known_for``): one the server would not take is a one-line ConfigError, with the nearest it would."""
    from solver.config import ConfigError
    from solver.config import check_model_named
    from solver.engines.engine_args import known_for

    known = known or known_for(config.engine.env)
    if flags and known is not None:
        parsed, message = known.server_args(flags)
        if message is not None:
            raise ConfigError(message)
        config = config.replace({"engine.args": parsed})
    check_model_named(config)
    return config


def _watch(group: Any, poll_s: float = 2.0) -> int:
    """Serve until interrupted; a server that dies is reported, and the command ends when none is left."""
    reported: set[int] = set()
    while True:
        alive = {s.port for s in group.alive()}
        for spec in group.specs:
            if spec.port not in alive and spec.port not in reported:
                reported.add(spec.port)
                print(f"solver: server on port {spec.port} exited (log in {group.log_dir})", file=sys.stderr)
        if not alive:
            return fail("every server has exited", EXIT_FAILED)
        time.sleep(poll_s)

"""Load on served endpoints: a fixed number of streamed requests against local ``solver serve`` servers.

Starts ``--servers`` vLLM OpenAI servers on loopback (``solver.engines.launch.launch_servers``, the tiny preset
unless ``--preset`` says otherwise), or uses the loopback ``--endpoint`` URLs given, and sends ``--requests``
requests spread round-robin over the endpoints, ``--concurrency`` in flight per endpoint, each through the
solver's own client (``solver.engines.openai.OpenAIServerEngine``, one per endpoint so every request is
attributed to the server that answered it). Every request generates exactly ``--max-tokens`` tokens
(``ignore_eos``), so each endpoint gets the same work. The run stops by itself when all requests are done or
after ``--duration`` seconds, whichever comes first (requests still running then are cancelled and counted as
cut), then stops the servers it started.

Per endpoint it prints requests done / failed / cut, end-to-end latency p50/p95/p99 (ms), time to the first
token p50 (ms) and generated tokens per second over the endpoint's busy span. Numbers, not assertions: the
machine may be shared, so compare endpoints of one run rather than absolute speeds across runs.

    python benchmarks/load.py                               # 2 servers, 64 requests x 64 tokens, 4 in flight each
    python benchmarks/load.py --endpoint http://127.0.0.1:8000 --endpoint http://127.0.0.1:8001
    python benchmarks/load.py --quick                       # 1 server, 8 requests x 16 tokens
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.config import ConfigError, load_config  # noqa: E402 - after the path set-up above
from solver.engines.openai import check_loopback, free_ports, report, run_load  # noqa: E402


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", action="append", default=[], help="a running loopback server (repeatable); "
                        "default: start --servers local servers")
    parser.add_argument("--servers", type=int, default=2, help="servers to start when no --endpoint is given")
    parser.add_argument("--preset", default="tiny", help="config preset of the servers started (default tiny)")
    parser.add_argument("--requests", type=int, default=64, help="requests in all, spread round-robin")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight per endpoint")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens generated per request")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds at most for the requests")
    parser.add_argument("--quick", action="store_true", help="1 server, 8 requests x 16 tokens (CI)")
    args = parser.parse_args(argv)
    if args.quick:
        args.servers, args.requests, args.max_tokens = 1, 8, 16
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        for name in ("servers", "requests", "concurrency", "max_tokens"):
            if getattr(args, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
        if args.duration <= 0:
            raise ConfigError(f"--duration must be > 0, got {args.duration}")
        urls = [check_loopback(u) for u in args.endpoint]
        config = load_config(args.preset, overrides={"engine.name": "openai"})
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from solver.engines.launch import launch_servers

    async def measure(endpoints: Sequence[str]) -> None:
        t0 = time.monotonic()
        stats = await run_load(config, endpoints, args.requests, args.concurrency, args.max_tokens, args.duration)
        print(report(stats, time.monotonic() - t0, args.requests, args.max_tokens, args.concurrency))

    if urls:
        asyncio.run(measure(urls))
        return 0
    logs = Path(tempfile.mkdtemp(prefix="load-servers-"))
    print(f"starting {args.servers} server(s) ({args.preset}), logs in {logs}", file=sys.stderr)
    with launch_servers(config, args.servers, free_ports(args.servers), host="127.0.0.1", log_dir=logs) as started:
        asyncio.run(measure(started))
    return 0


if __name__ == "__main__":
    sys.exit(main())

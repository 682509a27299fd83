"""Write an extract of recorded attempts (N problems x K attempts) for a machine without them.

The real attempts may be used but not redistributed, so the extract never goes where it could be committed: a
path outside this repository, or one git ignores (the GPU kit's ``.gpu/`` folder, which a ``device`` call can
carry); any other path inside the repository is refused. On the GPU machine, point the benchmark at it with
``--attempts-file``. The attempts chosen are the ones ``engine.py --workload real`` replays with the same
``--problems`` and ``--attempts`` (``solver.measure.choose``: the first N problems with at least K attempts, their
first K), each line copied unchanged; the suffix picks the compression (``.xz``, ``.gz``, ``.bz2`` or plain).

``--measure-tools`` also runs every recorded call's code again here, once, in the preset's sandbox (the measuring
``solver import-samples --measure-tools`` does: ``solver.recordings.measure_calls``, a stateful session per attempt,
the harness's starter cell first, each call cut at ``sandbox.timeout_s``) and writes the seconds into each line
(``tool_seconds``: one per request, 0 where nothing ran; ``tool_seconds_source``: where and how), so a GPU call
replays them without measuring again (``solver.replay.Attempt.tool_seconds``).

    python benchmarks/extract_attempts.py /tmp/attempts-2x8.jsonl.xz --problems 2 --attempts 8
    python benchmarks/extract_attempts.py .gpu/6-attempts/attempts.jsonl.xz --problems 2   # a carry of its own
    python benchmarks/extract_attempts.py .gpu/day/attempts.jsonl.xz --problems 6 --measure-tools
"""

from __future__ import annotations

import argparse
import asyncio
import bz2
import datetime
import gzip
import json
import lzma
import os
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from solver.dryrun import ignored, inside
from solver.config import ConfigError
from solver.files import atomic_write
from solver.measure.workload import choose, HarmonyEndings, PlanError, recorded_code, STARTER_CELL
from solver.replay import TraceError, json_lines, read_attempts

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "replay" / "gptoss120b_aimo3_dev.jsonl.xz"
_COMPRESSORS = {".xz": lzma.compress, ".gz": gzip.compress, ".bz2": bz2.compress}


def measure_tools(attempts: Sequence[Any], preset: str, workers: int | None) -> tuple[list[list[float]], str]:
    """Per attempt, the seconds each recorded request's call runs in the preset's sandbox (0 where nothing ran),
    and a line saying where and how they were measured."""
    from solver.config import load_config
    from solver.recordings import measure_calls
    from solver.sandbox.pool import create_sandbox, default_workers

    sandbox_config = replace(load_config(preset).sandbox, code_mode="stateful")
    concurrency = workers or default_workers()
    script = HarmonyEndings()
    calls = [recorded_code(a, script) for a in attempts]
    done = [0]

    def progress(_: int) -> None:
        done[0] += 1
        print(f"\r  measured {done[0]}/{len(calls)} attempts", end="", file=sys.stderr, flush=True)

    async def run() -> list[list[float]]:
        sandbox = create_sandbox(sandbox_config, busy=concurrency)
        try:
            await sandbox.start()
            return await measure_calls(calls, sandbox, sandbox_config.timeout_s, starter=STARTER_CELL,
                                       concurrency=concurrency, on_attempt=progress)
        finally:
            await sandbox.close()

    t0 = time.perf_counter()
    seconds = asyncio.run(run())
    print(file=sys.stderr)
    source = (f"measure_calls on {socket.gethostname()} ({os.cpu_count()} cores, {concurrency} attempts at once), "
              f"preset {preset}'s sandbox (timeout {sandbox_config.timeout_s} s, starter cell of the recording "
              f"harness), {datetime.date.today().isoformat()}, {time.perf_counter() - t0:.0f} s")
    return seconds, source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the extract to write, outside this repository")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the recorded attempts (default: the "
                        "recorded gpt-oss-120b attempts beside the checkout, not shipped)")
    parser.add_argument("--problems", type=int, default=1)
    parser.add_argument("--attempts", type=int, default=8, help="per problem")
    parser.add_argument("--problem-ids", default="", help="these problems, comma-separated (instead of the first "
                        "--problems)")
    parser.add_argument("--measure-tools", action="store_true", help="run every recorded call again here, once, "
                        "and write its seconds into the extract (tool_seconds)")
    parser.add_argument("--preset", default="h100-gptoss", help="whose sandbox measures the calls (default "
                        "h100-gptoss)")
    parser.add_argument("--tool-workers", type=int, default=None, help="attempts measured at once (default: the "
                        "sandbox pool's, usable cores minus one)")
    args = parser.parse_args(argv)
    out = args.out.expanduser().resolve()
    try:
        if inside(out, ROOT) and not ignored(out):
            raise PlanError(f"{args.out} is inside the repository and not ignored by git: the recorded attempts may "
                            "not be redistributed, write the extract elsewhere (e.g. /tmp or .gpu/)")
        if args.problems < 1 or args.attempts < 1 or (args.tool_workers is not None and args.tool_workers < 1):
            raise PlanError("--problems, --attempts and --tool-workers must be >= 1")
        if args.measure_tools:
            from solver.config import load_config

            load_config(args.preset)  # an unknown preset fails here, before the file is read
        attempts = read_attempts(args.source)  # validates every line as a replayable trace
        only = [p.strip() for p in args.problem_ids.split(",") if p.strip()]
        chosen = choose([a.problem_id for a in attempts], len(only) or args.problems, args.attempts, only)
    except (TraceError, PlanError, ConfigError) as exc:
        print(f"extract_attempts.py: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    records = [record for _, record in json_lines(args.source)]
    picked = [p for positions in chosen.values() for p in positions]
    chosen_records = [dict(records[p]) for p in picked]
    if args.measure_tools:
        print(f"measuring the tool calls of {len(picked)} attempts in the {args.preset} sandbox ...", file=sys.stderr)
        seconds, source = measure_tools([attempts[p] for p in picked], args.preset, args.tool_workers)
        for record, times in zip(chosen_records, seconds, strict=True):
            record["tool_seconds"] = [round(x, 4) for x in times]
            record["tool_seconds_source"] = source
        print(f"tool seconds: {sum(map(sum, seconds)):.1f} s in all over {sum(len(t) for t in seconds)} requests; "
              f"{source}", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(record) + "\n" for record in chosen_records]
    data = "".join(lines).encode("utf-8")
    atomic_write(out, _COMPRESSORS.get(out.suffix, bytes)(data))  # never half-written
    print(f"{out}: {len(lines)} attempts of {len(chosen)} problems ({', '.join(chosen)}), "
          f"{out.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

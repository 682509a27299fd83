"""Start-up: process start -> engine ready -> first token, and where the time goes.

Each trial is a fresh Python process (imports included) that opens the preset's in-process engine
(``solver.engines.vllm_async.open_vllm_engine``) and streams one token; the phases come from vLLM's own log
lines (``solver.engines.startup_log``: weights, torch.compile / dynamo, profiling, CUDA graph capture, KV cache).

Trials (``--trials a,b,...``, each in its own process, in order; ``--compare`` = defaults,cold,warm):
  preset    the preset as configured, with the compile cache of the environment (``VLLM_CACHE_ROOT``)
  defaults  the preset without its start-up settings (vLLM's capture sizes) and an empty compile cache
  cold      the preset with an empty compile cache (``--cache-dir``, default a new temp folder)
  warm      the preset again on that cache (after cold, or in a later call with the same ``--cache-dir``)
With defaults among them it prints the first-token ratios defaults/each other trial.

    python benchmarks/startup.py --preset tiny                    # CPU, eager: imports + load + KV cache
    python benchmarks/startup.py --preset tiny --compare --set engine.args.enforce_eager=false
    python benchmarks/startup.py --preset h100-gptoss --model $GPU_MODELS/dummy-gptoss-120b \\
        --set engine.args.load_format=dummy --compare --json startup.json
    # the same split over two calls (each under 10 minutes) on one warm machine:
    python benchmarks/startup.py ... --trials defaults,cold --cache-dir /root/vllm-cache
    python benchmarks/startup.py ... --trials warm --cache-dir /root/vllm-cache
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from solver.engines.startup_log import StartupLog, parse_startup_log

# The preset engine arguments that shape start-up only; the "defaults" trial sets them to None (vLLM's default).
STARTUP_ARGS = ("max_cudagraph_capture_size", "cudagraph_capture_sizes")
RESULT_TAG = "STARTUP_RESULT "
TRIALS = ("preset", "defaults", "cold", "warm")


@dataclass(frozen=True)
class Trial:
    name: str
    ready_s: float  # process start -> engine ready to take requests
    first_token_s: float  # process start -> first generated token
    log: StartupLog


async def child(args: argparse.Namespace) -> int:
    """One trial in this process: times from ``STARTUP_T0`` (the parent's clock just before it spawned us)."""
    t0 = float(os.environ["STARTUP_T0"])
    from solver.config import parse_overrides
    from solver.config import load_config
    from solver.engines.vllm_async import open_vllm_engine
    from solver.types import GenerationRequest

    overrides = parse_overrides(args.set)
    if args.model:
        overrides["engine.model"] = args.model
    engine = await open_vllm_engine(load_config(args.preset, overrides=overrides))
    try:
        ready = time.time() - t0
        # Fixed token ids: no tokenizer or chat template needed, any vocabulary of more than 200 ids.
        request = GenerationRequest(request_id="startup", prompt="", prompt_token_ids=tuple(range(100, 164)),
                                    max_tokens=1, temperature=0.0, top_p=1.0, seed=0, stop=(),
                                    extra={"ignore_eos": True})
        first = None
        async for delta in engine.stream(request):
            if delta.error:
                print(f"error: first request failed: {delta.error}", file=sys.stderr)
                return 1
            if delta.token_ids and first is None:
                first = time.time() - t0
    finally:
        await engine.close()
    if first is None:
        print("error: the engine generated no token", file=sys.stderr)
        return 1
    print(RESULT_TAG + json.dumps({"ready_s": ready, "first_token_s": first}), flush=True)
    return 0


def run_trial(name: str, args: argparse.Namespace, extra_sets: list[str], cache_dir: str | None,
              log_dir: Path) -> Trial:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--preset", args.preset]
    if args.model:
        cmd += ["--model", args.model]
    for item in [*args.set, *extra_sets]:
        cmd += ["--set", item]
    env = dict(os.environ)
    # The phases are read from vLLM's INFO lines: a quieter level inherited from the caller would hide them.
    env["VLLM_LOGGING_LEVEL"] = "INFO"
    if cache_dir is not None:
        env["VLLM_CACHE_ROOT"] = cache_dir
    log_path = log_dir / f"startup-{name}.log"
    env["STARTUP_T0"] = repr(time.time())
    with open(log_path, "w") as log:
        # Own session: a timeout ends the trial and the engine processes it started, not only its first process.
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise SystemExit(f"error: trial {name} ran past {args.timeout} s; log in {log_path}") from None
    text = log_path.read_text(errors="replace")
    results = [line[len(RESULT_TAG):] for line in text.splitlines() if line.startswith(RESULT_TAG)]
    if rc != 0 or not results:
        tail = "\n".join(text.splitlines()[-15:])
        raise SystemExit(f"error: trial {name} failed (exit {rc}); log in {log_path}:\n{tail}")
    result = json.loads(results[-1])
    return Trial(name, result["ready_s"], result["first_token_s"], parse_startup_log(text))


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(trials: list[Trial]) -> str:
    head = (f"{'trial':<9} {'first tok':>9} {'ready':>7} {'weights':>8} {'dynamo':>7} {'compile':>8} "
            f"{'capture':>8} {'init eng':>8} {'KV tokens':>10}  compile cache")
    rows = [head]
    for t in trials:
        lg = t.log
        kv = "-" if lg.kv_cache_tokens is None else f"{lg.kv_cache_tokens:,}"
        rows.append(f"{t.name:<9} {t.first_token_s:>9.1f} {t.ready_s:>7.1f} {_s(lg.weights_s):>8} "
                    f"{_s(lg.dynamo_s):>7} {_s(lg.compile_s):>8} {_s(lg.graph_capture_s):>8} "
                    f"{_s(lg.init_engine_s):>8} {kv:>10}  {'hit' if lg.compile_cache_hit else 'miss'}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--model", default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--compare", action="store_true", help="the trials defaults,cold,warm")
    p.add_argument("--trials", default="preset", help="comma-separated, run in order: " + ", ".join(TRIALS))
    p.add_argument("--cache-dir", default=None, help="VLLM_CACHE_ROOT of the cold / warm trials (cold needs it "
                   "empty or absent; default a new temp folder) and of the preset trial (default: the environment's)")
    p.add_argument("--log-dir", default=None, help="where each trial's full log goes (default a temp folder)")
    p.add_argument("--timeout", type=float, default=550.0, help="seconds per trial")
    p.add_argument("--json", default=None, help="write the trials here too")
    p.add_argument("--dry-run", action="store_true", help="parse, plan and check (solver/dryrun/plan.py); "
                   "start nothing")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return asyncio.run(child(args))

    from solver.config import parse_overrides
    from solver.config import ConfigError, load_config

    try:  # bad input fails here, in one line, before any engine starts
        overrides = parse_overrides(args.set)
        if args.model:
            overrides["engine.model"] = args.model
        config = load_config(args.preset, overrides=overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    names = ["defaults", "cold", "warm"] if args.compare else args.trials.split(",")
    unknown = sorted(set(names) - set(TRIALS))
    if unknown:
        print(f"error: unknown trial {unknown[0]!r} (choose from {', '.join(TRIALS)})", file=sys.stderr)
        return 2
    if "warm" in names and "cold" not in names[: names.index("warm")] and args.cache_dir is None:
        print("error: the warm trial needs --cache-dir, or the cold trial before it", file=sys.stderr)
        return 2
    if "cold" in names and args.cache_dir and Path(args.cache_dir).exists() and any(Path(args.cache_dir).iterdir()):
        print(f"error: the cold trial needs an empty --cache-dir; {args.cache_dir} holds files", file=sys.stderr)
        return 2
    if args.dry_run:
        from solver.dryrun import DryRun

        dry = DryRun("startup.py")
        try:
            dry.engine(config, ConfigError)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        dry.add(f"trials {', '.join(names)}, each a fresh process; compile cache "
                f"{args.cache_dir or 'a new temp folder'}; logs {args.log_dir or 'a temp folder'}")
        return dry.print()
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="startup-logs-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="startup-cache-"))
    cache = args.cache_dir or str(scratch / "preset")
    trials: list[Trial] = []
    try:
        for name in names:
            if name == "defaults":
                nulls = [f"engine.args.{arg}=null" for arg in STARTUP_ARGS]
                trials.append(run_trial(name, args, nulls, str(scratch / "defaults"), log_dir))
            elif name in ("cold", "warm"):
                trials.append(run_trial(name, args, [], cache, log_dir))
            else:
                trials.append(run_trial(name, args, [], args.cache_dir, log_dir))
    except SystemExit as failed:  # a trial failed: the ones before it were measured, keep them
        if trials:
            print(table(trials))
        print(failed.code, file=sys.stderr)
        return 1
    print(table(trials))
    by_name = {t.name: t for t in trials}
    if "defaults" in by_name:
        base = by_name["defaults"].first_token_s
        ratios = [f"defaults/{t.name} = {base / t.first_token_s:.2f}x" for t in trials if t.name != "defaults"]
        if ratios:
            print("ratio first token " + ", ".join(ratios))
    print(f"logs: {log_dir}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(t) for t in trials], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Engine layouts on one machine's GPUs, on the same work: one GPU, N replicas (one engine actor per GPU on a local
Ray: ``--cluster local:N``'s path), one engine over N GPUs (tensor parallel), vLLM's in-process data parallel.

  scaling  recorded gpt-oss-120b attempts (``engine.py --workload real``'s plan, replay engine and recorded tool
           outputs: ``solver.measure.shape``, ``workload``) solved by the solver's own run driver on each layout,
           one layout per process, in order: one GPU (``one``: in process, problems one after another, as on Kaggle),
           ``replicas:N`` (N engine actors, problems from one queue, one run log), ``tpN`` (one engine,
           ``tensor_parallel_size=N``, problems one after another), ``dpN`` (one engine, ``data_parallel_size=N``,
           N problems at once). Prints per layout the engine start, decoded tokens/s, seconds per problem (wall ÷
           problems, and the mean problem's own time), the ratio to one GPU, and the time model's prediction of
           the same run (``solver.offline.sweep.check_run``). ``--fault N``: after a replicas layout's measured
           run, N more problems on the same actors, the engine of ``engine-1`` killed from outside (its engine
           core process and that one's children, SIGKILL) after its first logged repetition: its problem must be
           re-queued on the other actor, nothing lost, the run finished.
  seed     per tensor-parallel size (``--tp 1,2``, each in its own process): the engine's start, its KV cache
           tokens, and decode tokens/s at 1, 8 and 64 sequences (prompts sent once, then re-sent decoding:
           ``solver.measure.vllm_probes``' ``resent``).
  load     the load test (load.py's statistics): ``solver serve``'s servers, one per GPU, against the same number of
           engine actors (the in-process replicas), the same requests each (random-id prompts, exact lengths).
  table    the scaling rows of several result files (calls) in one table, ratios to the one-GPU row.

Every subcommand prints its table and, with ``--json PATH``, writes it with the commands' arguments.

    python benchmarks/layouts.py scaling --layouts one,replicas:2 --problems 2 --attempts 2 \\
        --attempt-tokens 300 --tool-time 0.05 --fault 2                          # CPU, the tiny harmony model
    python benchmarks/layouts.py seed --tp 1 --seqs 1,4 --prompt-tokens 128 --decode 32    # CPU
    python benchmarks/layouts.py load --replicas 2 --requests 16 --max-tokens 16          # CPU
    python benchmarks/layouts.py table a.json b.json
    # on two GPUs: benchmarks/README.md, "Two GPUs: layouts"

Ratios, not absolute speeds, are the result: compare layouts measured on one machine (one call, or one warm machine).
What runs is ``solver.measure``'s: each layout's run, the fault run and the probes in ``scaling``, the engine
actors, servers and each process's GPUs in ``fleet``; this script parses, starts a process per layout and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from solver.config import Config, ConfigError, Layout, add_gpu_arguments, gpu_config, gpu_time_model, parse_layout
from solver.errors import BadInput
from solver.files import atomic_write
from solver.measure.fleet import child_env, gpus_here, load_requests, on_actors, seed_env, served, with_package
from solver.measure.scaling import (layout_config, layouts_of, planned_tokens, prediction, probe_rows,
                                    probe_settings, run_layout, scaling_rows, seed_engine, whole_numbers)
from solver.measure.shape import (add_shape_arguments, read_tool_times, SHAPE_DESCRIPTION, shape_options_of,
                                  SHAPE_PROG, shape_tool_times, shape_workload, ShapeWorkload)
from solver.measure.tool_seconds import fixed_tool_times, with_tool_times
from solver.measure.workload import plan_summary
from solver.dryrun import DryRun
from solver.processes import run_group


def run_child(argv: list[str], env: dict[str, str], timeout_s: float) -> int:
    """This script again in its own process group; killed with its children at ``timeout_s``."""
    code = run_group([sys.executable, str(Path(__file__).resolve()), *argv], env, timeout_s)
    if code is None:
        print(f"layouts: {' '.join(argv[:2])} ran past {timeout_s:.0f} s: killed", file=sys.stderr)
        return 124
    return code


# -- scaling --


def scaling_parser() -> argparse.ArgumentParser:
    # allow_abbrev off: engine.py's own flags (--tool-time, ...) pass through whole, never read as one of these
    parser = argparse.ArgumentParser(prog="layouts.py scaling", add_help=False, allow_abbrev=False,
                                     description="The real shape on each layout; every other flag is "
                                                 "engine.py --workload real's (attempts, caps, tool time, --gpu, "
                                                 "--preset, --model, --set)")
    parser.add_argument("--layouts", default="one,replicas:2", help="comma-separated: one, replicas:N, tpN, dpN")
    parser.add_argument("--fault", type=int, default=0, metavar="N",
                        help="after a replicas layout's run: N more problems with engine-1's engine killed")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="run directories (default: a temp folder, kept)")
    parser.add_argument("--time-model", default=None, help="for the prediction (default h100-gptoss with --gpu, "
                                                           "else tiny)")
    parser.add_argument("--timeout", type=float, default=580.0, help="seconds per layout's process")
    parser.add_argument("--probes", default=None, metavar="SEQS",
                        help="after an in-process layout's run: its KV cache tokens and decode tok/s at these "
                             "sequence counts, e.g. 1,8,64 (the seed's table, with no engine start of its own)")
    parser.add_argument("--probe-tokens", default="512,512", metavar="PROMPT,DECODE",
                        help="the probes' prompt and decoded tokens per sequence (default 512,512)")
    parser.add_argument("--tool-times-from", type=Path, default=None,
                        help="seconds per replayed call from an earlier scaling --json file (the same work as that "
                             "call, and no time spent measuring them)")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check (each layout's process too, with its GPUs); start nothing")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--plan-from", type=Path, default=None, help=argparse.SUPPRESS)
    return parser


def shape_of(rest: list[str], dry: DryRun | None, plan_from: Path | None = None) -> ShapeWorkload:
    """The flags that are not scaling's own: engine.py --workload real's, checked once (``shape_options``; every
    layout runs the pipeline, so the contender is (b1)'s), and their plan: made here, or a layout's process reads
    its parent's (``plan_from``, written by ``save_plan``), so every layout replays the same plan and the attempts
    file is read once (about 8 s on 2 cores)."""
    parser = argparse.ArgumentParser(prog=SHAPE_PROG, description=SHAPE_DESCRIPTION)
    add_shape_arguments(parser)
    args = parser.parse_args([*rest, "--contenders", "b1"])
    options = shape_options_of(vars(args), dry)
    if plan_from is None:
        return shape_workload(options)
    with plan_from.open("rb") as handle:
        tool_time, problems = pickle.load(handle)  # noqa: S301 - written by this script's parent (save_plan)
    return ShapeWorkload(options, options.caps, tool_time, problems)


def save_plan(work: ShapeWorkload, folder: Path) -> list[str]:
    """The plan for the layouts' processes (``shape_of``'s ``plan_from``), as the flags that pass it."""
    path = folder / "plan.pickle"
    with path.open("wb") as handle:
        pickle.dump((work.tool_time, work.plan), handle)
    return ["--plan-from", str(path)]


def scaling_child(opts: argparse.Namespace, work: ShapeWorkload, dry: DryRun | None) -> int:
    """One layout in this process: its run, its result file."""
    name = opts.child
    layout = parse_layout(name)
    times = read_tool_times(opts.tool_times_from)
    if dry is not None:
        config = layout_config(work.options, layout)
        each = "one GPU" if layout.engine_gpus == 1 else f"{layout.engine_gpus} GPUs"
        where = (f"{layout.replicas} engine actors on a local Ray, {each} each" if layout.replicas > 1 else
                 "one in-process engine")
        dry.engine_args(config, BadInput)
        dry.gpus(config.engine.args, BadInput)  # the layout's engine, on the GPUs its process gets
        dry.add(f"layout {name}: {where}; GPUs visible to its process: "
                f"{','.join(gpus_here()) or 'none (CPU)'}; engine args "
                f"{json.dumps(config.engine.args, sort_keys=True)}")
        if work.plan is not None:
            dry.add(f"layout {name}: {planned_tokens(with_tool_times(work.plan, times))} planned tokens, "
                    f"{len(times)} call times")
        return dry.print()
    row = run_layout(work, name, layout, times, opts.out, opts.fault, probe_settings(opts.probes, opts.probe_tokens))
    atomic_write(opts.result, json.dumps(row, indent=1, default=str))
    return 0


def scaling(argv: list[str]) -> int:
    opts, rest = scaling_parser().parse_known_args(argv)
    dry = DryRun("layouts.py scaling" + (f" (layout {opts.child}'s process)" if opts.child else "")) \
        if opts.dry_run else None
    try:
        layouts = layouts_of(opts.layouts)
        if not layouts:
            raise BadInput("--layouts: name at least one layout")
        if opts.fault and (opts.fault < 2 or not any(x.replicas >= 2 for x in layouts.values())):
            raise BadInput("--fault N needs N >= 2 problems (one for each of two actors) and a replicas:N layout "
                           "with N >= 2")
        if opts.json is not None and not opts.json.parent.is_dir():
            raise BadInput(f"--json: no folder {opts.json.parent}")
        probe_settings(opts.probes, opts.probe_tokens)  # bad --probes or --probe-tokens fail here
        work = shape_of(rest, dry, opts.plan_from)
        if work.plan is not None and opts.fault > len(work.plan):
            raise BadInput(f"--fault {opts.fault}: the workload has {len(work.plan)} problems")
        if opts.child is not None:
            return scaling_child(opts, work, dry)
        envs = {name: child_env(name, x) for name, x in layouts.items()}  # too few GPUs visible fails now
        taken = [name for name in layouts if opts.out is not None and (opts.out / name.replace(":", "")).exists()]
        if taken:
            raise BadInput(f"--out {opts.out} already holds a run of {taken[0]}: choose another --out")
        time_model = opts.time_model or gpu_time_model(work.options.gpu)
        try:
            from solver.timing.model import load_time_model

            load_time_model(time_model)  # an unknown --time-model fails now, not after the layouts ran
        except ConfigError as exc:
            raise BadInput(f"--time-model: {str(exc).splitlines()[0]}") from exc
        if dry is not None:
            return scaling_dry_run(opts, argv, work, layouts, envs, time_model, dry)
    except BadInput as exc:
        print(f"layouts.py scaling: error: {exc}", file=sys.stderr)
        return 2
    out = opts.out or Path(tempfile.mkdtemp(prefix="layouts-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        times = shape_tool_times(work, opts.tool_times_from)
    except BadInput as exc:
        print(f"layouts.py scaling: error: {exc}", file=sys.stderr)
        return 2
    summary = plan_summary(with_tool_times(work.plan, times))
    print(f"workload: {work.caps.line()}: {summary['requests']} requests ({summary['calls']} calls), "
          f"{summary['tokens']} decoded tokens, contexts up to {summary['context_max']}, tool time "
          f"{summary['tool_s']:.1f} s; engine "
          f"{work.config.engine.model}, {json.dumps(work.config.engine.args, sort_keys=True)}; runs in {out}")
    rows: list[dict[str, Any]] = []

    def save() -> None:  # after each layout: a call cut off at its limit still returns what it measured
        if opts.json is not None:
            atomic_write(opts.json, json.dumps({"argv": argv, "workload": summary, "caps": asdict(work.caps),
                                                "time_model": time_model, "layouts": rows, "tool_times": times},
                                               indent=1, default=str))

    with tempfile.TemporaryDirectory() as tmp:
        times_file = Path(tmp) / "tool_times.json"
        times_file.write_text(json.dumps(times))
        plan_flags = save_plan(work, Path(tmp))
        for name, layout in layouts.items():
            result = Path(tmp) / f"{name.replace(':', '')}.json"
            child = [*argv, "--child", name, "--tool-times-from", str(times_file), "--result", str(result),
                     "--out", str(out), *plan_flags]
            print(f"layout {name}: starting", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            code = run_child(["scaling", *child], envs[name], opts.timeout)
            row = json.loads(result.read_text()) if code == 0 and result.is_file() else {
                "layout": name, "error": f"its process exited {code}"}
            row["wall_s"] = time.perf_counter() - t0
            if row.get("seconds"):
                row["prediction"] = prediction(row["run_dir"], layout, time_model)
            rows.append(row)
            save()
            print(f"layout {name}: done in {row['wall_s']:.0f} s", file=sys.stderr, flush=True)
    for line in scaling_rows(rows):
        print(line)
    for row in rows:
        for key in ("actors", "placement"):
            if row.get(key):
                print(f"{row['layout']} {key}: {json.dumps(row[key])}")
        if row.get("decoded") is not None and row.get("decoded") != row.get("planned"):
            print(f"{row['layout']}: decoded {row['decoded']} tokens, the plan {row['planned']}: NOT identical work")
        if (row.get("prediction") or {}).get("line"):
            print(row["prediction"]["line"])
        if row.get("fault"):
            fault = row["fault"]
            print(f"fault ({row['layout']}, {fault.get('problems')} problems, {fault.get('seconds', 0):.1f} s): "
                  + ("PASSED" if fault.get("passed") else "FAILED") + "; "
                  + "; ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in (fault.get("checks") or {}).items()))
            for death in fault.get("deaths", []):
                print(f"  death: {death}")
    probed = [r for r in rows if r.get("probes")]
    if probed:
        print(probe_rows(probed))
    save()
    return 0 if all(r.get("seconds") for r in rows) and all((r.get("fault") or {"passed": True}).get("passed")
                                                            for r in rows) else 1


def scaling_dry_run(opts: argparse.Namespace, argv: list[str], work: ShapeWorkload, layouts: dict[str, Layout],
                    envs: dict[str, dict[str, str]], time_model: str, dry: DryRun) -> int:
    """``scaling --dry-run``: the tool times' source and the prediction's layout per layout, then each layout's
    process started as the run starts it (its environment, so its GPUs; the same arguments) with ``--dry-run``: it
    parses and plans what it would run. No engine, no sandbox, nothing measured."""
    from solver.timing.model import load_time_model

    dry.engine_args(work.config, BadInput)
    dry.model(work.config.engine.model, BadInput)
    given = opts.tool_times_from
    if given is not None and not dry.present(given, "--tool-times-from", BadInput):
        given = None
    if work.plan is None:
        times: dict[str, float] = read_tool_times(given) if given is not None else {}
        dry.add(f"workload: {work.caps.line()} (the attempts file is not here: not planned)")
    elif given is None and work.tool_time == "measure":
        times = fixed_tool_times(work.plan, 0.0)
        dry.add(f"tool times: {len(times)} recorded calls would be re-executed here first (not in a dry run)")
    else:
        times = shape_tool_times(work, given)
        dry.add(f"tool times: {len(times)} calls, {sum(times.values()):.1f} s in all")
    model = load_time_model(time_model)
    for name, layout in layouts.items():
        engine = Layout.of(layout_config(work.options, layout).engine.args)
        try:
            model.figures(engine)
            dry.add(f"layout {name}: predicted on time model {model.name}, layout {engine.name}")
        except ConfigError as exc:
            dry.add(f"layout {name}: no prediction ({str(exc).splitlines()[0]})")
    dry.print()
    codes = []
    with tempfile.TemporaryDirectory() as tmp:
        times_file = Path(tmp) / "tool_times.json"
        times_file.write_text(json.dumps(times))
        plan_flags = save_plan(work, Path(tmp))
        out = opts.out or Path(tmp) / "runs"
        for name in layouts:
            child = [*argv, "--child", name, "--tool-times-from", str(times_file), "--result",
                     str(Path(tmp) / "result.json"), "--out", str(out), *plan_flags]
            codes.append(run_child(["scaling", *child], envs[name], 120.0))
    return max(codes, default=0)


def table(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="layouts.py table")
    parser.add_argument("files", nargs="+", type=Path, help="scaling --json files")
    args = parser.parse_args(argv)
    rows = []
    for path in args.files:
        try:
            rows += json.loads(path.read_text())["layouts"]
        except (OSError, ValueError, KeyError) as exc:
            print(f"layouts.py table: error: {path}: {exc}", file=sys.stderr)
            return 2
    for line in scaling_rows(rows):
        print(line)
    return 0


# -- seed: start, KV cache and decode per tensor-parallel size --


def engine_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog)
    add_gpu_arguments(parser)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=560.0, help="seconds per engine's process")
    parser.add_argument("--dry-run", action="store_true", help="parse, plan and check; start nothing")
    return parser


def engine_config(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> Config:
    return gpu_config(args, extra)


def seed(argv: list[str]) -> int:
    parser = engine_parser("layouts.py seed")
    parser.add_argument("--tp", default="1,2", help="tensor-parallel sizes, each its own engine and process")
    parser.add_argument("--seqs", default="1,8,64", help="sequences decoding at once")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--decode", type=int, default=512, help="tokens each sequence decodes")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import psutil

    born = psutil.Process().create_time()  # this process's start (imports included), unix time
    try:
        sizes, seqs = whole_numbers(args.tp, "--tp"), whole_numbers(args.seqs, "--seqs")
        if min(args.prompt_tokens, args.decode) < 1:
            raise BadInput("--prompt-tokens and --decode must be >= 1")
        config = engine_config(args)
        if args.json is not None and not args.json.parent.is_dir():
            raise BadInput(f"--json: no folder {args.json.parent}")
        gpus = gpus_here()
        # The parent sees the machine's GPUs and checks every size; a child sees only its own size's GPUs
        # (seed_env), so it checks its own size alone.
        wanted = sizes if args.child is None else [args.child]
        if gpus and max(wanted) > len(gpus):
            raise BadInput(f"--tp {max(wanted)} needs {max(wanted)} GPUs; {len(gpus)} visible")
        if args.dry_run:
            dry = DryRun("layouts.py seed" + (f" (tp{args.child}'s process)" if args.child is not None else ""))
            dry.engine_args(config, BadInput)
            dry.model(config.engine.model, BadInput)
    except (BadInput, ConfigError, ValueError) as exc:
        print(f"layouts.py seed: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    if args.dry_run and args.child is not None:
        dry.add(f"tp{args.child}: one engine, tensor_parallel_size {args.child}, on GPUs "
                f"{','.join(gpus) or 'none (CPU)'}; decode at {seqs} sequences, {args.prompt_tokens}-token prompts, "
                f"{args.decode} decoded")
        return dry.print()
    if args.dry_run:  # the parent's report, then each size's process as the run starts it, with its GPUs
        dry.add(f"tensor-parallel sizes {sizes}, each its own process")
        dry.print()
        with tempfile.TemporaryDirectory() as tmp:
            codes = [run_child(["seed", *argv, "--child", str(size), "--result", str(Path(tmp) / "r.json")],
                               seed_env(gpus, size), 120.0) for size in sizes]
        return max(codes)
    if args.child is not None:
        config = config.replace({"engine.args.tensor_parallel_size": args.child})
        if not args.gpu:
            for key, value in config.engine.env.items():
                os.environ.setdefault(key, str(value))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        out = asyncio.run(seed_engine(config, seqs, args.prompt_tokens, args.decode, born))
        out.update(tp=args.child, model=config.engine.model, engine_args=config.engine.args)
        atomic_write(args.result, json.dumps(out, indent=1, default=str))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            result = Path(tmp) / f"tp{size}.json"
            print(f"tp{size}: starting", file=sys.stderr, flush=True)
            code = run_child(["seed", *argv, "--child", str(size), "--result", str(result)], seed_env(gpus, size),
                             args.timeout)
            rows.append(json.loads(result.read_text()) if code == 0 and result.is_file()
                        else {"tp": size, "error": f"its process exited {code}"})
    print(f"engine {config.engine.model or 'tiny'}, prompts {args.prompt_tokens} tokens, {args.decode} decoded each; "
          f"start = process start to engine ready")
    print(probe_rows([r for r in rows if "error" not in r]))
    for row in rows:
        if "error" in row:
            print(f"tp{row['tp']} failed: {row['error']}")
    if args.json is not None:
        atomic_write(args.json, json.dumps({"argv": argv, "rows": rows}, indent=1, default=str))
    return 0 if all("error" not in r for r in rows) else 1


# -- load: served endpoints against engine actors --


def load_main(argv: list[str]) -> int:
    parser = engine_parser("layouts.py load")
    parser.add_argument("--replicas", type=int, default=2, help="servers, and engine actors (one per GPU)")
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight per server or actor")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens generated per request (exactly)")
    parser.add_argument("--sides", default="serve,actors", help="serve, actors or both (in that order)")
    args = parser.parse_args(argv)
    try:
        sides = [s.strip() for s in args.sides.split(",") if s.strip()]
        if not sides or not set(sides) <= {"serve", "actors"}:
            raise BadInput(f"--sides: serve, actors or both, not {args.sides!r}")
        if min(args.replicas, args.requests, args.concurrency, args.prompt_tokens, args.max_tokens) < 1:
            raise BadInput("--replicas, --requests, --concurrency, --prompt-tokens, --max-tokens must be >= 1")
        config = engine_config(args)
        gpus = gpus_here()
        if gpus and len(gpus) < args.replicas:
            raise BadInput(f"--replicas {args.replicas} needs {args.replicas} GPUs; {len(gpus)} visible")
        if args.json is not None and not args.json.parent.is_dir():
            raise BadInput(f"--json: no folder {args.json.parent}")
        if args.dry_run:
            from solver.engines.launch import LaunchError, plan_servers

            dry = DryRun("layouts.py load")
            dry.engine_args(config, BadInput)
            dry.model(config.engine.model, BadInput)
            try:
                specs = plan_servers(config, config.engine.model or "tiny", servers=args.replicas, gpus=gpus)
            except LaunchError as exc:
                raise BadInput(str(exc)) from exc
            for side in sides:
                dry.add(f"{side}: {args.replicas} engines" + (
                    f" (servers on GPUs {', '.join(s.devices or 'none' for s in specs)})" if side == "serve" else
                    " (engine actors on a local Ray, one GPU each)"))
            dry.add(f"{args.requests} requests of {args.prompt_tokens} prompt + {args.max_tokens} tokens, "
                    f"{args.concurrency} in flight per engine")
            return dry.print()
    except (BadInput, ConfigError, ValueError) as exc:
        print(f"layouts.py load: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    from solver.engines.openai import EndpointStats, report

    if not args.gpu:
        for key, value in config.engine.env.items():
            os.environ.setdefault(key, str(value))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    with_package(os.environ)  # Ray's workers import the actor classes from this checkout's package
    requests = load_requests(config, args.requests, args.prompt_tokens, args.max_tokens)
    out: dict[str, Any] = {"argv": argv, "sides": {}}
    for side in sides:
        print(f"{side}: starting {args.replicas} engines", file=sys.stderr, flush=True)
        run = served if side == "serve" else on_actors
        samples, seconds, start_s = run(config, args.replicas, requests, args.concurrency)
        by: dict[str, Any] = {}
        for s in samples:
            by.setdefault(s.endpoint, EndpointStats(s.endpoint)).samples.append(s)
        stats = [by[k] for k in sorted(by)]
        tokens = sum(s.tokens for s in samples)
        print(f"{side}: {args.replicas} engines started in {start_s:.1f} s; {len(samples)} requests, {tokens} tokens "
              f"in {seconds:.1f} s = {tokens / seconds:.1f} tok/s")
        print(report(stats, seconds, args.requests, args.max_tokens, args.concurrency))
        out["sides"][side] = {"start_s": start_s, "seconds": seconds, "tokens": tokens,
                              "tokens_per_s": tokens / seconds,
                              "samples": [asdict(s) for s in samples]}
    if len(out["sides"]) == 2:
        ratio = out["sides"]["actors"]["tokens_per_s"] / out["sides"]["serve"]["tokens_per_s"]
        out["actors_over_serve"] = ratio
        print(f"ratio actors / served = {ratio:.3f}")
    if args.json is not None:
        atomic_write(args.json, json.dumps(out, indent=1, default=str))
    return 0


COMMANDS = {"scaling": scaling, "seed": seed, "load": load_main, "table": table}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: layouts.py {{{','.join(COMMANDS)}}} ...\n\n{__doc__}", file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())

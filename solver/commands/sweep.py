"""``solver sweep DATA --reps 4,8,16 --workers 2,4,8 --out DIR``: a validation sweep (see solver/offline/sweep/run.py)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from solver.commands.common import (EXIT_INTERRUPTED, add_base_config_arguments, add_cluster_arguments,
                                    cluster_spec, flag_overrides)
from solver.config import parse_overrides


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "sweep", help="accuracy and runtime over a grid of repetitions, workers, temperatures, stoppers",
        description="Generate one run per temperature, prompt and worker count at the largest repetition count, "
                    "resample smaller counts, voters and stopping rules offline, and write sweep.csv, sweep.md "
                    "and PNG plots to OUT. Lists are comma separated.")
    parser.add_argument("data", nargs="?", help="problem set: CSV, JSONL or a bundled name (e.g. demo)")
    parser.add_argument("--spec", type=Path, default=None,
                        help="a sweep YAML (e.g. evaluation/sweeps/demo.yaml); flags override its keys")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="sweep directory (runs/ and results); required unless --check")
    parser.add_argument("--reps", default=None, help="repetition counts, e.g. 4,8,16")
    parser.add_argument("--workers", default=None, help="repetitions in flight, e.g. 2,4,8")
    parser.add_argument("--temperature", default=None, help="sampling temperatures, e.g. 0.6,0.8")
    parser.add_argument("--prompt", default=None, help="prompt templates, e.g. tir,cot")
    parser.add_argument("--voter", default=None, help="voters, e.g. majority,code_first")
    parser.add_argument("--stopper", default=None,
                        help="stopping rules; 'none', a name, or names joined by '+', e.g. none,beta,agree:4+esc:5")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    parser.add_argument("--draws", type=int, default=None, help="random orders per problem (default 100)")
    parser.add_argument("--draw-seed", dest="draw_seed", type=int, default=None, help="seed of the draws")
    parser.add_argument("--jobs", type=int, default=None, help="processes for the offline replay (default 1)")
    parser.add_argument("--offline", action="store_true",
                        help="generate nothing: analyse the runs already in OUT/runs")
    plan = parser.add_argument_group("plan", "how long the sweep's generation takes on G GPUs, before it runs "
                                             "(solver/offline/sweep/estimate.py)")
    plan.add_argument("--plan", action="store_true",
                      help="print the estimate and exit: nothing runs, nothing is written")
    plan.add_argument("--plan-from", dest="plan_from", type=Path, action="append", default=[], metavar="RUN_DIR",
                      help="recorded attempts of this kind of problem (repeatable; default: the runs in OUT/runs)")
    plan.add_argument("--gpus", type=int, default=None,
                      help="GPUs to plan for (default: --cluster local:N's engines x the layout's GPUs, else one "
                           "engine's)")
    plan.add_argument("--layout", default=None,
                      help="the time model's layout, e.g. tp1, tp2, tp1-dp2, replicas:2 (default: from the engine "
                           "arguments)")
    plan.add_argument("--time-model", dest="time_model", default=None,
                      help="solver/timing/data name or .yaml (default: engine.time_model, else h100-gptoss)")
    plan.add_argument("--check", type=Path, nargs="+", default=None, metavar="RUN_DIR",
                      help="instead of a sweep: play measured runs' own attempts as --plan does and compare with their "
                           "measured time (exit 1 when one is off by more than 10 %%); runs without a stopping rule")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check the sweep as written (spec, config, problems, runs, model, the "
                             "cluster's engines against the GPUs visible), then exit: nothing starts, nothing is "
                             "written (solver/dryrun/plan.py)")
    add_base_config_arguments(parser)
    add_cluster_arguments(parser)
    parser.set_defaults(func=run)


def spec_data(args: argparse.Namespace) -> dict[str, Any]:
    """The spec file's mapping with the command-line flags layered on top."""
    from solver.offline.sweep import load_spec

    data: dict[str, Any] = load_spec(args.spec) if args.spec is not None else {}
    flags = {"data": args.data, "reps": args.reps, "workers": args.workers, "temperature": args.temperature,
             "prompt": args.prompt, "voter": args.voter, "stopper": args.stopper, "limit": args.limit,
             "draws": args.draws, "seed": args.draw_seed, "jobs": args.jobs, "preset": args.preset,
             "config": args.config_file}
    data.update({k: v for k, v in flags.items() if v is not None})
    overrides = dict(data.get("set") or {})
    overrides.update(parse_overrides(args.overrides))
    # Only the engine flags: the grid's own flags (--reps 4,8 ...) are lists, read by the spec above.
    overrides.update({k: v for k, v in flag_overrides(args).items() if k.startswith("engine.")})
    data["set"] = overrides
    return data


def plan(args: argparse.Namespace, spec: Any, base: Any, problems: Any) -> int:
    """``--plan``: the estimate of the sweep's generation on the GPUs asked for, printed, with the layout it runs on
    and why; nothing runs. With ``--gpus G`` and neither ``--layout``, ``--cluster`` nor a parallel layout in the
    engine arguments, every layout of the time model that fits G GPUs is estimated and the one that ends soonest
    is picked (``pick_layout``)."""
    from solver.cluster.spec import parse_cluster
    from solver.config import ConfigError, Layout, parse_layout
    from solver.offline.sweep import (Hardware, SweepError, estimate_sweep, fitting_layouts, pick_layout, run_dirs,
                                      shapes_from_runs, time_model_of)

    sources = args.plan_from or run_dirs(args.out)
    if not sources:
        raise SweepError("--plan needs recorded attempts: --plan-from RUN_DIR (e.g. an earlier sweep's runs, or "
                         "real attempts imported with solver import-samples --measure-tools)")
    if args.gpus is not None and args.gpus < 1:
        raise SweepError(f"--gpus must be >= 1, got {args.gpus}")
    model = time_model_of(base, args.time_model)
    configured = Layout.of(base.engine.args)
    asked = parse_layout(args.layout) if args.layout else None
    gpus = args.gpus
    cluster = parse_cluster(args.cluster, args.actors) if args.cluster else None
    shapes = shapes_from_runs(sources, base)

    def on(layout: Layout) -> Any:
        if cluster is not None and cluster.actors is not None:
            layout = layout.with_replicas(cluster.actors)  # with no --gpus, the GPUs its engines span
        try:
            hardware = Hardware.of(model, layout, gpus)
        except ConfigError as exc:
            raise SweepError(str(exc)) from exc
        return estimate_sweep(spec, base, problems, shapes, hardware,
                              cluster=cluster is not None or hardware.engines > 1)

    if asked is None and configured.engine_gpus == 1 and cluster is None and gpus is not None:
        candidates = [on(x) for x in fitting_layouts(model, gpus)]
        estimate, why = pick_layout(candidates)
        print(f"plan: layout {estimate.hardware.layout.name} on {gpus} GPU{'s' if gpus > 1 else ''}, picked among "
              f"time model {model.name}'s layouts that fit: {why}")
    else:
        estimate = on(asked or configured)
        why = (f"--layout {args.layout}" if args.layout else
               f"--cluster {args.cluster}: its engines in the engine arguments' layout" if cluster is not None else
               "the engine arguments" if configured.engine_gpus > 1 else
               "one engine (no --gpus, --cluster or --layout)")
        print(f"plan: layout {estimate.hardware.layout.name}: {why}")
    for line in estimate.lines():
        print(line)
    hardware = estimate.hardware
    sets = " ".join(f"--set engine.args.{k}={v}" for k, v in hardware.layout.engine_args().items()
                    if base.engine.args.get(k) != v)
    if hardware.engines > 1 and cluster is None:
        print(f"plan: {hardware.engines} engines: run it with --cluster local:{hardware.engines}"
              + (f" {sets}" if sets else ""))
    elif sets:
        print(f"plan: run it with {sets}")
    return 0


def dry_run(args: argparse.Namespace, spec: Any, base: Any, problems: Any) -> int:
    """``--dry-run``: the sweep's runs planned (and each run folder already there checked for reuse), the model
    found, the cluster's engines counted against the GPUs this machine shows (``--cluster``'s rule,
    ``actor_count``); with ``--plan``, the estimate too. Nothing starts, nothing is written."""
    from solver.cluster.spec import actor_count, parse_cluster
    from solver.dryrun import DryRun
    from solver.config import ConfigError, Layout
    from solver.engines.launch import visible_gpus
    from solver.offline.sweep import SweepError, plan_runs, reusable_config

    dry = DryRun("solver sweep")
    runs = plan_runs(spec, base, args.out)
    for planned in runs:
        reusable_config(planned)  # a folder holding other settings is the same error as in a real run
    dry.add(f"{len(runs)} generation runs ({', '.join(r.run_dir.name for r in runs)}): {len(problems)} problems x "
            f"{spec.max_reps} repetitions each, into {args.out}")
    if not args.offline and base.engine.name == "vllm":
        dry.engine_args(base, ConfigError)
        dry.model(base.engine.model, ConfigError)
    if args.cluster:
        cluster = parse_cluster(args.cluster, args.actors)
        gpus, engine = visible_gpus(), Layout.of(base.engine.args)
        each = engine.engine_gpus
        if gpus:
            count = actor_count(cluster, float(len(gpus)), engine)
            dry.add(f"--cluster {args.cluster}: {count} engine actors of {each} GPU{'s' if each > 1 else ''} on the "
                    f"{len(gpus)} GPUs visible ({','.join(gpus)})")
        else:
            dry.add(f"--cluster {args.cluster}: no GPU visible here, so the engines are not counted against GPUs")
    elif not args.offline:
        dry.gpus(base.engine.args, ConfigError)  # one engine in this process
    if args.plan:
        missing = [d for d in args.plan_from if not dry.present(d, "--plan-from", SweepError)]
        if missing:  # runs an earlier command of the same call makes there: the estimate waits for them
            dry.add("--plan: not estimated here (its recorded runs are not on this machine)")
        else:
            plan(args, spec, base, problems)
    return dry.print()


def check(args: argparse.Namespace) -> int:
    """``--check RUN_DIR...``: each run's estimate against its measured solve time."""
    from solver.config import parse_layout
    from solver.offline.sweep import check_run

    layout = parse_layout(args.layout) if args.layout else None
    missed = 0
    for run_dir in args.check:
        result = check_run(run_dir, time_model=args.time_model, layout=layout, gpus=args.gpus)
        print(result.line())
        missed += not result.within
    return 1 if missed else 0


def run(args: argparse.Namespace) -> int:
    if args.check:
        return check(args)
    if args.out is None:
        from solver.commands.common import fail

        return fail("--out DIR is required")
    from solver.config import load_config
    from solver.datasets import load_problems
    from solver.models import resolve_model
    from solver.offline.sweep import check_spec, plan_runs, reusable_config, run_sweep, spec_from_dict

    spec = spec_from_dict(spec_data(args), str(args.spec) if args.spec else "sweep")
    base = load_config(spec.preset, spec.config_file, spec.overrides)
    problems = load_problems(spec.data, limit=spec.limit)
    check_spec(spec, base)
    if args.dry_run:
        return dry_run(args, spec, base, problems)
    if args.plan:
        return plan(args, spec, base, problems)
    runs = plan_runs(spec, base, args.out)
    for planned in runs:
        reusable_config(planned)  # a directory holding other settings fails now, not after a long run
    if not args.offline and base.engine.name == "vllm":
        resolve_model(base.engine.model)  # a missing model fails here, before anything is written
    cluster = cluster_spec(args)

    from solver.commands.progress import LiveProgress

    def announce(planned: Any) -> None:
        print(f"sweep: run {planned.run_dir.name}: {len(problems)} problems x {spec.max_reps} repetitions, "
              f"{planned.workers} in flight", file=sys.stderr)

    try:
        with LiveProgress(len(problems)) as progress:
            if cluster is None:
                from solver.loop.run import solve_run

                df = run_sweep(spec, base, problems, args.out, solve=None if args.offline else solve_run,
                               on_event=progress, on_run=announce)
            else:
                from solver.commands.cluster import sweep_on_cluster

                df = sweep_on_cluster(cluster, spec, base, problems, args.out, generate_runs=not args.offline,
                                      on_event=progress, on_run=announce, jobs_given=args.jobs is not None)
    except KeyboardInterrupt:
        print(f"solver: interrupted; run the same sweep again to continue ({len(runs)} runs in {args.out}/runs)",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    best = df.sort_values(["accuracy", "runtime_s"], ascending=[False, True]).iloc[0]
    if math.isnan(best["accuracy"]):
        print(f"{len(df)} settings; no reference answers, so no accuracy")
    else:
        print(f"{len(df)} settings; best majority accuracy {100 * best['accuracy']:.1f} % (T={best['temperature']}, "
              f"prompt {best['prompt']}, voter {best['voter']}, stopper {best['stopper']}, W={best['workers']}, "
              f"N={best['reps']})")
    print(f"results: {args.out / 'sweep.md'}")
    return 0

"""Does the pipeline keep the engine saturated? Three ways to generate the same repetitions, in one run:

  (a) raw      vLLM's offline ``LLM.generate`` over the same sequences and token volume (each sequence made to
               generate as many tokens as its repetition did in (b)), with no turns and no code; all problems in
               one call (a), or a call per problem (a1), the raw engine's side of (b1);
  (b) pipeline ``ProblemSolver``: W repetitions in flight per problem, code runs while others generate,
               the problems solved together (b) or one after another as on Kaggle (b1);
  (c) rounds   synchronous rounds: generate every repetition's turn, then run all code, then continue all.

Prints generated tokens/s for each, the ratios (b)/(a) and (b)/(c), the main process's CPU milliseconds per
repetition (orchestration plus vLLM's own front end, which lives in this process), and the share of the
pipeline's wall time during which the engine had no request running, the requests it held on average (running
or waiting) and the share of continued turns' prompts served from the prefix cache. Ratios, not absolute speeds, are the
result: the machine is shared and noisy, which is why all three run side by side here.

Two workloads. ``trace`` (default): every repetition follows a plan (``solver.measure.traced``) of 1-4 turns of uneven
length, each but the last ending in a program that runs for a log-normal time, as a maths model's repetitions
do; the real engine decodes exactly the planned tokens, so all contenders do identical work. ``model``: the tiny
model writes what it writes (rarely code, and code that runs in a millisecond).

    python benchmarks/engine.py                    # trace: 2 problems x 16 repetitions
    python benchmarks/engine.py --code-median 0    # programs that take no time: only uneven turns remain
    python benchmarks/engine.py --workload model   # the model's own text: 2 turns of at most 96 tokens
    python benchmarks/engine.py --quick            # a smaller run for CI
    python benchmarks/engine.py --contenders b,b1  # only (a) vs (b) and (a1) vs (b1)
    python benchmarks/engine.py --workload real    # recorded attempts, their real shape (solver/measure/shape.py)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict, replace
from pathlib import Path

from solver.config import add_gpu_arguments, gpu_overrides, gpu_preset, load_config
from solver.datasets import load_problems
from solver.errors import BadInput
from solver.files import atomic_write
from solver.measure.saturation import PIPELINE_CONTENDERS, run_pipelines, run_raw
from solver.measure.shape import add_shape_arguments, real_shape, SHAPE_DESCRIPTION, shape_options_of, SHAPE_PROG
from solver.measure.traced import code_floor, make_plans, Profile
from solver.dryrun import DryRun

# A nudge so the tiny model writes code often enough to exercise the sandbox path.
CODE_HINT = " Write a short Python program that prints the answer."
# --gpu's preset for the synthetic pipelines (solver.config.loading.gpu_preset): h100 runs their own GPU shape;
# h100-gptoss (every other script's --gpu) with --preset
PIPELINES_GPU_PRESET = "h100"


def real_workload(argv: list[str]) -> int:
    """``--workload real``: the real shape's own flags (``solver.measure.shape``), checked once, then its run."""
    parser = argparse.ArgumentParser(prog=SHAPE_PROG, description=SHAPE_DESCRIPTION)
    add_shape_arguments(parser)
    args = parser.parse_args(argv)
    dry = DryRun(SHAPE_PROG) if args.dry_run else None
    try:  # before anything heavy starts
        options = shape_options_of(vars(args), dry)
    except BadInput as exc:
        print(f"{SHAPE_PROG}: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    return real_shape(options, dry, argv)


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if "--workload=real" in given or any(a == "--workload" and b == "real" for a, b in zip(given, given[1:])):
        return real_workload(given)  # recorded attempts: the real shape's own contenders and options
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_gpu_arguments(parser, gpu_help="GPU-shaped run: preset h100 (unless --preset), 4 problems x 16 repetitions, "
                                       "up to 4 turns of at most 1024 tokens, programs a median 2 s, 8 sandbox workers",
                      preset_help="default tiny (--gpu: h100; h100-gptoss speaks harmony)",
                      model_help="engine.model: a local path or hub id",
                      set_help="config override for every contender, e.g. --set engine.args.stream_interval=8")
    parser.add_argument("--workload", choices=("trace", "model", "real"), default="trace",
                        help="real: recorded gpt-oss-120b attempts (solver/measure/shape.py; --workload real --help)")
    parser.add_argument("--problems", type=int, default=None, help="default 2 (--gpu: 4)")
    parser.add_argument("--reps", type=int, default=16)
    parser.add_argument("--workers", type=int, default=None, help="default: --reps")
    parser.add_argument("--max-tokens", type=int, default=None, help="per request (default 96, --gpu: 1024)")
    parser.add_argument("--total-tokens", type=int, default=None, help="per repetition (default: turns x max-tokens)")
    parser.add_argument("--turns", type=int, default=None, help="at most (default: trace 4, model 2)")
    parser.add_argument("--code-median", type=float, default=None,
                        help="trace: median program seconds (default 0.5, --gpu: 2)")
    parser.add_argument("--code-sigma", type=float, default=1.0, help="trace: log-normal spread of program time")
    parser.add_argument("--code-kind", choices=("sleep", "spin"), default="sleep",
                        help="trace: programs wait (code on other cores, as beside a GPU) or compute here")
    parser.add_argument("--sandbox-workers", type=int, default=None,
                        help="trace: snippets at once (default 3 = the pool a 4-core Kaggle GPU machine gets; "
                             "--gpu: 8)")
    parser.add_argument("--quick", action="store_true", help="1 problem x 8 repetitions, 48 tokens per turn")
    parser.add_argument("--contenders", default=",".join(sorted(PIPELINE_CONTENDERS)),
                        help="pipeline contenders to run, comma-separated among b, bs, b1, c (default all); the raw "
                             "engine runs as (a) for b/bs/c and as (a1), one problem at a time, for b1")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers to this JSON file")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check (solver/dryrun/plan.py); start nothing")
    args = parser.parse_args(argv)
    problems_n = args.problems or (4 if args.gpu else 2)
    max_tokens = args.max_tokens or (1024 if args.gpu else 96)
    code_median = args.code_median if args.code_median is not None else (2.0 if args.gpu else 0.5)
    sandbox_workers = args.sandbox_workers or (8 if args.gpu else 3)
    preset = gpu_preset(args.preset, args.gpu, PIPELINES_GPU_PRESET)
    if args.quick:
        problems_n, args.reps, max_tokens = 1, 8, 48
    turns = args.turns or (4 if args.workload == "trace" else 2)
    total = args.total_tokens or turns * max_tokens
    contenders = frozenset(x.strip() for x in args.contenders.split(",") if x.strip())
    if not contenders or not contenders <= PIPELINE_CONTENDERS:
        parser.error(f"--contenders: choose among {', '.join(sorted(PIPELINE_CONTENDERS))}, not {args.contenders!r}")
    if args.json is not None and not args.json.parent.is_dir():
        parser.error(f"--json: no folder {args.json.parent}")
    if not args.gpu and not args.dry_run:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    if not args.dry_run:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    overrides = {"solve.reps": args.reps, "solve.workers": args.workers or args.reps,
                 "sampling.max_tokens": max_tokens, "sampling.max_total_tokens": total,
                 "sampling.max_turns": turns}
    try:
        if args.workload == "trace":
            # Each program runs alone (accumulated programs would repeat earlier waits), shown as its repr: the
            # ipython display (h100-gptoss) needs stateful sessions, and the trace's programs print nothing else.
            overrides.update({"sandbox.code_mode": "newest", "sandbox.display": "repr", "stop.stoppers": [],
                              "stop.first_answer": False})
            if args.code_kind == "sleep":  # waiting programs use no core: size the pool as beside a GPU
                overrides["sandbox.workers"] = sandbox_workers
        config = load_config(preset, overrides=gpu_overrides(args.model, args.overrides, overrides))
    except ValueError as exc:
        parser.error(str(exc))
    if args.workload == "trace" and config.prompt.dialect not in ("fences", "harmony"):
        parser.error(f"the trace workload speaks fences or harmony, not {config.prompt.dialect}")
    profile = None
    if args.workload == "trace":
        profile = Profile(max_turns=turns, max_tokens=max_tokens, total_tokens=total,
                          code_median_s=code_median, code_sigma=args.code_sigma, kind=args.code_kind)
        print(f"workload: trace ({config.prompt.dialect}), {problems_n} problems x {args.reps} repetitions, up to "
              f"{turns} turns of at most {max_tokens} tokens ({total} per repetition), programs {args.code_kind} "
              f"a median {code_median} s (sigma {args.code_sigma}, killed at {config.sandbox.timeout_s} s, "
              f"{config.sandbox.workers or 'auto'} at once), logprobs {config.sampling.logprobs}")
    else:
        print(f"workload: model, {problems_n} problems x {args.reps} repetitions, up to {turns} turns of at most "
              f"{max_tokens} tokens ({total} per repetition), logprobs {config.sampling.logprobs}")
    problems = [replace(p, text=p.text + CODE_HINT) for p in load_problems("demo", limit=problems_n)]
    if args.dry_run:
        from solver.dryrun import engine_dry_run

        plan = (f"contenders {', '.join(sorted(contenders))} and the raw engine on {len(problems)} problems; engine "
                f"args {json.dumps(config.engine.args, sort_keys=True)}")
        return engine_dry_run("engine.py", config, plan, parser.error)
    from solver.models import resolve_model

    model = resolve_model(config.engine.model)
    plans = (make_plans([p.id for p in problems], config.solve.reps, profile, seed=config.sampling.seed)
             if profile is not None else None)
    measures = asyncio.run(run_pipelines(config, problems, plans, args.code_kind, contenders))
    b = measures[0]
    # Every pipeline contender decodes the same planned lengths (trace), so the first one's stand for all.
    measures = [*run_raw(config, problems, model, b.lengths or {}, traced=profile is not None,
                     together=bool(contenders - {"b1"}), one_by_one="b1" in contenders), *measures]
    print(f"{'contender':<16}{'seqs':>6}{'tokens':>8}{'seconds':>9}{'tok/s':>9}{'execs':>7}{'cpu ms/rep':>11}"
          f"{'cpu ms/1k':>10}{'ours/1k':>9}{'engine idle':>12}{'held':>6}{'cached':>8}{'streamed':>9}")

    def cell(value, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    for m in measures:
        idle = f"{100 * m.idle_share:.1f} %" if m.idle_share is not None else "-"
        cached = f"{100 * m.cached_share:.0f} %" if m.cached_share is not None else "-"
        print(f"{m.name:<16}{m.sequences:>6}{m.tokens:>8}{m.seconds:>9.2f}{m.tps:>9.1f}{m.executions:>7}"
              f"{cell(m.cpu_ms_per_rep, '.1f'):>11}{cell(m.cpu_ms_per_1k, '.1f'):>10}"
              f"{cell(m.ours_ms_per_1k, '.1f'):>9}"
              f"{idle:>12}{cell(m.mean_held, '.1f'):>6}{cached:>8}{cell(m.streamed_turns, 'd'):>9}")
    by = {m.name.split()[0]: m for m in measures}
    ratios = {f"{x}/{y}": by[x].tps / by[y].tps for x, y in (("(b)", "(a)"), ("(bs)", "(a)"), ("(b1)", "(a1)"),
                                                               ("(bs)", "(b)"), ("(b)", "(c)"), ("(b1)", "(c)"))
              if x in by and y in by and by[y].tps}
    notes = {"(b)/(a)": "target >= 0.95", "(bs)/(a)": "target >= 0.95", "(b1)/(a1)": "target >= 0.95",
             "(b)/(c)": "target >= 1.5",
             "(b1)/(c)": "one problem at a time, as on Kaggle"}
    for key, value in ratios.items():
        print(f"ratio {key} = {value:.3f}" + (f"   ({notes[key]})" if key in notes else ""))
    floors = None
    if plans is not None:
        together_s, one_by_one_s, total_s = code_floor(plans, config.sandbox.timeout_s)
        from solver.sandbox.pool import default_workers

        workers = config.sandbox.workers or default_workers()  # as run_pipelines's create_sandbox sizes the pool
        floors = {"together_s": together_s, "one_by_one_s": one_by_one_s, "pool_s": total_s / workers}
        print(f"code floor (no pipeline ends sooner; the raw contenders run no programs): the slowest repetition's "
              f"programs {together_s:.1f} s with the problems together, {one_by_one_s:.1f} s summed over the "
              f"problems one by one; all programs {total_s:.1f} s over {workers} sandbox workers = "
              f"{total_s / workers:.1f} s")
    if "(bs)" in by and "(b)" in by:
        b, bs = by["(b)"], by["(bs)"]
        print(f"main-process CPU per 1k tokens, per turn / streaming = {b.cpu_ms_per_1k / bs.cpu_ms_per_1k:.2f}"
              f"; ours {b.ours_ms_per_1k / max(1e-9, bs.ours_ms_per_1k):.2f}")
    if args.json is not None:
        record = {"argv": sys.argv[1:] if argv is None else argv, "preset": preset, "model": model,
                  "dialect": config.prompt.dialect, "logprobs": config.sampling.logprobs,
                  "contenders": [{k: v for k, v in asdict(m).items() if k != "lengths"} | {"tokens_per_s": m.tps}
                                 for m in measures], "ratios": ratios, "code_floor": floors}
        atomic_write(args.json, json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

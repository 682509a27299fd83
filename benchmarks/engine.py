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
    python benchmarks/engine.py --workload real    # recorded attempts, their real shape (real_shape.py)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace

from solver.config import Config, load_config, parse_overrides
from solver.datasets import load_problems
from solver.dialects import TurnOutput, make_dialect
from solver.measure import Profile, RepetitionPlan, TracedEngine, code_floor, make_plans, make_script
from solver.files import atomic_write
from solver.loop.repetition import repetition_seed
from solver.types import GenerationRequest, Problem

# The pipeline contenders (--contenders): per turn, streaming input, one problem at a time, synchronous rounds.
CONTENDERS = frozenset({"b", "bs", "b1", "c"})

# A nudge so the tiny model writes code often enough to exercise the sandbox path.
CODE_HINT = " Write a short Python program that prints the answer."


@dataclass
class ContenderMeasure:
    name: str
    seconds: float
    tokens: int
    sequences: int
    executions: int = 0
    cpu_ms_per_rep: float | None = None
    idle_share: float | None = None
    mean_held: float | None = None  # requests the engine held (running or waiting), time-averaged
    cached_share: float | None = None  # of continued turns' prompt tokens, the share the prefix cache served
    lengths: dict[tuple[str, int], int] | None = None  # generated tokens per (problem, repetition)
    cpu_ms_per_1k: float | None = None  # main-process CPU per 1,000 generated tokens (all its threads)
    ours_ms_per_1k: float | None = None  # of which the solver's own streaming code (Meter)
    streamed_turns: int | None = None  # turns served by a streaming-input request (continued, not re-admitted)

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


class Meter:
    """CPU the solver's own streaming code spends per delta, apart from vLLM's front end in the same thread.

    Two hooks, measuring only stretches that never suspend (so no other task's CPU is counted): the adapter
    (``vllm_async`` turning a ``RequestOutput`` into a ``Delta``, plus the trace's pass-through) runs from the
    moment vLLM's ``generate`` yields an output to the moment the repetition receives the delta; the consumer
    (``repetition._generate``: joins, confidence window, answer watch) runs from there until it asks for the next
    delta. ``time.thread_time`` is the clock (the event loop is one thread)."""

    marks: dict[object, float] = {}  # per task: when vLLM's generate last yielded (shared by every Meter)

    def __init__(self) -> None:
        self.ours = 0.0  # seconds

    @staticmethod
    def hook_engine(vllm_engine) -> None:
        """Wrap the in-process engine's ``AsyncLLM.generate`` (an instance attribute shadows the method)."""
        llm, marks = vllm_engine._llm, Meter.marks
        inner = llm.generate

        async def generate(*args, **kwargs):
            async with contextlib.aclosing(inner(*args, **kwargs)) as outputs:
                async for out in outputs:
                    marks[asyncio.current_task()] = time.thread_time()
                    yield out

        llm.generate = generate

    def wrap(self, stream):
        """Wrap the stream the repetition consumes."""
        meter = self

        async def metered(request):
            task = asyncio.current_task()
            async with contextlib.aclosing(stream(request)) as deltas:
                async for delta in deltas:
                    now = time.thread_time()
                    mark = meter.marks.pop(task, None)
                    if mark is not None:
                        meter.ours += now - mark
                    yield delta
                    meter.ours += time.thread_time() - now  # the consumer's work on this delta

        return metered


class MeteredEngine:
    """The engine as the repetition sees it, each stream (and each session's stream) through a ``Meter``."""

    def __init__(self, inner, meter: Meter, streaming: bool) -> None:
        self.inner, self.meter, self.streaming = inner, meter, streaming
        self.name, self.tokenizer = inner.name, inner.tokenizer
        self.stream = meter.wrap(inner.stream)
        self.sessions: list = []

    def running_requests(self) -> int:
        return self.inner.running_requests()

    def session(self):
        make = getattr(self.inner, "session", None)
        session = make() if self.streaming and callable(make) else None
        if session is None:
            return None
        self.sessions.append(session)
        meter = self.meter

        return SimpleNamespace(stream=meter.wrap(session.stream), close=session.close)


class IdleSampler:
    """Samples ``engine.running_requests()`` every ``period_s`` seconds; idle share = samples with none running."""

    def __init__(self, engine, period_s: float = 0.01) -> None:
        self.engine, self.period_s = engine, period_s
        self.samples = self.idle = self.held = 0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            held = self.engine.running_requests()
            self.samples += 1
            self.idle += held == 0
            self.held += held
            await asyncio.sleep(self.period_s)

    def __enter__(self) -> IdleSampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()

    @property
    def share(self) -> float:
        return self.idle / self.samples if self.samples else 0.0

    @property
    def mean_held(self) -> float:
        return self.held / self.samples if self.samples else 0.0


def cached_share(reps) -> float | None:
    """Prefix-cache hits over the prompts of every turn after the first (the turns that continue a context)."""
    later = [t for r in reps for t in r.turns[1:] if t.cached_tokens is not None]
    prompt = sum(t.prompt_tokens for t in later)
    return sum(t.cached_tokens for t in later) / prompt if prompt else None


def decoded_tokens(engine, reps) -> dict[tuple[str, int], int]:
    """Tokens the engine really decoded per (problem, repetition): the trace's count (its scripted endings are
    reported as generated but never decoded), else what the repetitions record."""
    traced = getattr(engine, "decoded", None)
    if traced is not None:
        return {(r.problem_id, r.index): traced.get((r.problem_id, r.index), 0) for r in reps}
    return {(r.problem_id, r.index): r.generated_tokens for r in reps}


async def pipeline(config: Config, problems: list[Problem], engine, sandbox, *, together: bool = True,
                   streaming: bool = False, name: str | None = None) -> ContenderMeasure:
    """The solver's own loop; ``together`` solves the problems at once (``solve.parallel_problems``), else one
    after another as the Kaggle gateway serves them; ``streaming`` continues each repetition in one
    streaming-input request (``engine.streaming_input``)."""
    from solver.loop.problem import ProblemSolver

    config = replace(config, engine=replace(config.engine, streaming_input=streaming))
    reps = []
    meter = Meter()
    metered = MeteredEngine(engine, meter, streaming)
    if hasattr(engine, "decoded"):
        engine.decoded.clear()
    solver = ProblemSolver(config, metered, sandbox, on_repetition=reps.append)
    cpu0, t0 = time.process_time(), time.perf_counter()
    with IdleSampler(engine) as sampler:
        if together:
            await asyncio.gather(*(solver.solve(p) for p in problems))
        else:
            for problem in problems:
                await solver.solve(problem)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    name = name or ("(b) pipeline" if together else "(b1) one by one")
    lengths = decoded_tokens(engine, reps)
    tokens = sum(lengths.values())
    return ContenderMeasure(name, seconds, tokens, len(reps),
                            sum(len(r.executions) for r in reps), 1000 * cpu / max(1, len(reps)), sampler.share,
                            sampler.mean_held, cached_share(reps), lengths=lengths,
                            cpu_ms_per_1k=1e6 * cpu / max(1, tokens), ours_ms_per_1k=1e6 * meter.ours / max(1, tokens),
                            streamed_turns=sum(getattr(x, "turns", 0) for x in metered.sessions) if streaming else None)


async def rounds(config: Config, problems: list[Problem], engine, sandbox) -> ContenderMeasure:
    """The synchronous-rounds baseline over every repetition of every problem at once: each round waits for
    the slowest generation, then all code runs while the engine idles, then every repetition continues."""
    s = config.sampling
    dialect = make_dialect(config, engine.tokenizer)
    live = []
    for problem in problems:
        live += [{"problem": problem, "index": i, "dialogue": dialect.start(problem), "used": 0}
                 for i in range(config.solve.reps)]
    tokens = executions = 0
    sequences = len(live)
    if hasattr(engine, "decoded"):
        engine.decoded.clear()

    async def one(state: dict, turn: int) -> TurnOutput:
        problem = state["problem"]
        prompt = state["dialogue"].prompt()
        req = GenerationRequest(
            f"rounds-{problem.id}-{state['index']}-{turn}", prompt.text, prompt.token_ids,
            max_tokens=min(s.max_tokens, s.max_total_tokens - state["used"]), temperature=s.temperature,
            top_p=s.top_p, seed=repetition_seed(s.seed, problem.id, state["index"]) + turn,
            stop=dialect.stops.strings, stop_token_ids=dialect.stops.token_ids,
            extra=s.extra, problem_id=problem.id, repetition=state["index"], turn=turn)
        parts, ids, last = [], [], None
        async with contextlib.aclosing(engine.stream(req)) as deltas:
            async for d in deltas:
                parts.append(d.text)
                ids.extend(d.token_ids)
                if d.finish_reason:
                    last = d
        return TurnOutput("".join(parts), tuple(ids), last.finish_reason if last else "error",
                          last.stop_reason if last else None, last.stop_token if last else None)

    t0 = time.perf_counter()
    with IdleSampler(engine) as sampler:
        for turn in range(s.max_turns):
            outs = await asyncio.gather(*(one(st, turn) for st in live))  # generate all ...
            readings = []
            for st, out in zip(live, outs):
                st["used"] += len(out.token_ids)
                tokens += len(out.token_ids)
                readings.append(st["dialogue"].read(out))
            runs = iter(await asyncio.gather(*(sandbox.run(r.call) for r in readings if r.call)))  # ... execute all ...
            nxt = []
            for st, out, reading in zip(live, outs, readings):
                if reading.call is None:
                    continue
                executions += 1
                execution = next(runs)
                if st["used"] >= s.max_total_tokens:
                    continue
                st["dialogue"].reply(out, reading, execution)
                nxt.append(st)
            live = nxt  # ... then continue all
            if not live:
                break
    if hasattr(engine, "decoded"):
        tokens = sum(engine.decoded.values())
    return ContenderMeasure("(c) rounds", time.perf_counter() - t0, tokens, sequences, executions,
                            idle_share=sampler.share, mean_held=sampler.mean_held)


def raw(config: Config, problems: list[Problem], model: str, lengths: dict[tuple[str, int], int],
        traced: bool, *, together: bool = True, one_by_one: bool = False) -> list[ContenderMeasure]:
    """Offline ``LLM.generate`` over the same first prompts and seeds, one request per repetition, each made to
    generate exactly as many tokens as that repetition generated in the pipeline (same sequences, same token
    volume: what the engine alone needs for the work the pipeline did), drawn among the trace's words when the
    pipeline's were. ``together``: (a), every problem's sequences in one call; ``one_by_one``: (a1), a call per
    problem, the raw engine's best for (b1), which never has more than one problem's repetitions to batch."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=model, **{"seed": config.sampling.seed, **config.engine.args})
    try:
        tokenizer = None if config.engine.args.get("skip_tokenizer_init") else llm.get_tokenizer()
        dialect = make_dialect(config, tokenizer)
        words = list(make_script(config.prompt.dialect, tokenizer).words) if traced else None
        s = config.sampling
        batches = []  # per problem: its prompts and sampling parameters
        for problem in problems:
            ids = list(dialect.start(problem).prompt().token_ids or ())
            prompts, params = [], []
            for index in range(config.solve.reps):
                n = lengths.get((problem.id, index), 0)
                if n <= 0:
                    continue
                prompts.append(TokensPrompt(prompt_token_ids=ids))
                params.append(SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True, allowed_token_ids=words,
                                             temperature=s.temperature, top_p=s.top_p, logprobs=s.logprobs,
                                             seed=repetition_seed(s.seed, problem.id, index)))
            batches.append((prompts, params))
        out = []
        if together:
            t0 = time.perf_counter()
            outs = llm.generate([x for b in batches for x in b[0]], [x for b in batches for x in b[1]],
                                use_tqdm=False)
            out.append(ContenderMeasure("(a) raw", time.perf_counter() - t0,
                                        sum(len(o.outputs[0].token_ids) for o in outs),
                                        len(outs)))
        if one_by_one:
            t0, tokens, sequences = time.perf_counter(), 0, 0
            for prompts, params in batches:
                outs = llm.generate(prompts, params, use_tqdm=False) if prompts else []
                tokens += sum(len(o.outputs[0].token_ids) for o in outs)
                sequences += len(outs)
            out.append(ContenderMeasure("(a1) raw 1 by 1", time.perf_counter() - t0, tokens, sequences))
        return out
    finally:
        with contextlib.suppress(Exception):
            llm.llm_engine.engine_core.shutdown()
        del llm


async def in_process(config: Config, problems: list[Problem], plans: dict[tuple[str, int], RepetitionPlan] | None,
                     kind: str, contenders: frozenset[str] = CONTENDERS) -> list[ContenderMeasure]:
    """Those of ``contenders`` asked for, in this order: (b) a request per turn, (bs) one streaming-input request
    per repetition (when the installed vLLM has exact ones), (b1) one problem at a time (the config's
    ``engine.streaming_input``), (c) synchronous rounds."""
    from solver.engines import open_engine
    from solver.engines.vllm_compat import streaming_input_class
    from solver.sandbox.pool import create_sandbox

    sandbox = create_sandbox(config.sandbox)
    await sandbox.start()
    engine = await open_engine(config)
    meterable = hasattr(engine, "_llm")
    if meterable:
        Meter.hook_engine(engine)
    if plans is not None:
        engine = TracedEngine(engine, plans, kind, make_script(config.prompt.dialect, engine.tokenizer))
    try:
        # Warm-up: the first requests pay one-off costs that neither contender should carry.
        warm = replace(config, solve=replace(config.solve, reps=2, workers=2))
        await pipeline(warm, problems[:1], engine, sandbox)
        out = []
        if "b" in contenders:
            out.append(await pipeline(config, problems, engine, sandbox, name="(b) pipeline"))
        if "bs" in contenders and streaming_input_class() is not None:
            await pipeline(warm, problems[:1], engine, sandbox, streaming=True)
            out.append(await pipeline(config, problems, engine, sandbox, streaming=True, name="(bs) streaming"))
        if "b1" in contenders:
            out.append(await pipeline(config, problems, engine, sandbox, together=False,
                                      streaming=config.engine.streaming_input))
        if "c" in contenders:
            out.append(await rounds(config, problems, engine, sandbox))
        return out
    finally:
        await engine.close()
        await sandbox.close()


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if "--workload=real" in given or any(a == "--workload" and b == "real" for a, b in zip(given, given[1:])):
        import runpy  # recorded attempts: real_shape.py's own contenders and options, run as that script

        return runpy.run_path(str(Path(__file__).with_name("real_shape.py")), run_name="real_shape")["main"](given)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true",
                        help="GPU-shaped run: preset h100 (unless --preset), 4 problems x 16 repetitions, up to 4 "
                             "turns of at most 1024 tokens, programs a median 2 s, 8 sandbox workers")
    parser.add_argument("--workload", choices=("trace", "model", "real"), default="trace",
                        help="real: recorded gpt-oss-120b attempts (real_shape.py; --workload real --help)")
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
    parser.add_argument("--preset", default=None, help="default tiny (--gpu: h100; h100-gptoss speaks harmony)")
    parser.add_argument("--model", default=None, help="engine.model: a local path or hub id")
    parser.add_argument("--quick", action="store_true", help="1 problem x 8 repetitions, 48 tokens per turn")
    parser.add_argument("--contenders", default=",".join(sorted(CONTENDERS)),
                        help="pipeline contenders to run, comma-separated among b, bs, b1, c (default all); the raw "
                             "engine runs as (a) for b/bs/c and as (a1), one problem at a time, for b1")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers to this JSON file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every contender, e.g. --set engine.args.stream_interval=8")
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check (solver/measure/dryrun.py); start nothing")
    args = parser.parse_args(argv)
    problems_n = args.problems or (4 if args.gpu else 2)
    max_tokens = args.max_tokens or (1024 if args.gpu else 96)
    code_median = args.code_median if args.code_median is not None else (2.0 if args.gpu else 0.5)
    sandbox_workers = args.sandbox_workers or (8 if args.gpu else 3)
    preset = args.preset or ("h100" if args.gpu else "tiny")
    if args.quick:
        problems_n, args.reps, max_tokens = 1, 8, 48
    turns = args.turns or (4 if args.workload == "trace" else 2)
    total = args.total_tokens or turns * max_tokens
    contenders = frozenset(x.strip() for x in args.contenders.split(",") if x.strip())
    if not contenders or not contenders <= CONTENDERS:
        parser.error(f"--contenders: choose among {', '.join(sorted(CONTENDERS))}, not {args.contenders!r}")
    if args.json is not None and not args.json.parent.is_dir():
        parser.error(f"--json: no folder {args.json.parent}")
    if not args.gpu and not args.dry_run:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    if not args.dry_run:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    overrides = {"solve.reps": args.reps, "solve.workers": args.workers or args.reps,
                 "sampling.max_tokens": max_tokens, "sampling.max_total_tokens": total,
                 "sampling.max_turns": turns}
    if args.model:
        overrides["engine.model"] = args.model
    try:
        given = parse_overrides(args.overrides)
        if args.workload == "trace":
            # Each program runs alone (accumulated programs would repeat earlier waits), shown as its repr: the
            # ipython display (h100-gptoss) needs stateful sessions, and the trace's programs print nothing else.
            overrides.update({"sandbox.code_mode": "newest", "sandbox.display": "repr", "stop.stoppers": [],
                              "stop.first_answer": False})
            if args.code_kind == "sleep":  # waiting programs use no core: size the pool as beside a GPU
                overrides["sandbox.workers"] = sandbox_workers
        config = load_config(preset, overrides={**given, **overrides})
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
        from solver.measure import engine_dry_run

        plan = (f"contenders {', '.join(sorted(contenders))} and the raw engine on {len(problems)} problems; engine "
                f"args {json.dumps(config.engine.args, sort_keys=True)}")
        return engine_dry_run("engine.py", config, plan, parser.error)
    from solver.models import resolve_model

    model = resolve_model(config.engine.model)
    plans = (make_plans([p.id for p in problems], config.solve.reps, profile, seed=config.sampling.seed)
             if profile is not None else None)
    measures = asyncio.run(in_process(config, problems, plans, args.code_kind, contenders))
    b = measures[0]
    # Every pipeline contender decodes the same planned lengths (trace), so the first one's stand for all.
    measures = [*raw(config, problems, model, b.lengths or {}, traced=profile is not None,
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

        workers = config.sandbox.workers or default_workers()  # as in_process's create_sandbox sizes the pool
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

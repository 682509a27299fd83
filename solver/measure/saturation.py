"""Does the pipeline keep the engine saturated (``benchmarks/engine.py``)? The same repetitions generated three
ways: (a) the raw engine (``run_raw``: vLLM's offline ``LLM.generate``, the same sequences and token volume), (b)
the solver's pipeline (``pipeline``: together, streaming, one problem after another) and (c) synchronous rounds
(``rounds``), each measured for tokens/s, the main process's CPU (``Meter``: the solver's own streaming code apart
from vLLM's front end), the engine's idle share and the requests it held (``IdleSampler``), and the prefix cache's
share of continued turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from solver.config import Config
from solver.dialects import TurnOutput, make_dialect
from solver.loop.repetition import repetition_seed
from solver.measure.traced import RepetitionPlan, TracedEngine, make_script
from solver.types import GenerationRequest, Problem

# The pipeline contenders (--contenders): per turn, streaming input, one problem at a time, synchronous rounds.
PIPELINE_CONTENDERS = frozenset({"b", "bs", "b1", "c"})

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


@dataclass(frozen=True)
class MeteredSession:
    """An engine session as the repetition sees it: its stream through a ``Meter``, its close as it is."""

    stream: Callable[..., Any]  # request -> async iterator of deltas
    close: Callable[[], Any]  # -> awaitable


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

        return MeteredSession(meter.wrap(session.stream), session.close)


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


def run_raw(config: Config, problems: list[Problem], model: str, lengths: dict[tuple[str, int], int],
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


async def run_pipelines(config: Config, problems: list[Problem], plans: dict[tuple[str, int], RepetitionPlan] | None,
                     kind: str, contenders: frozenset[str] = PIPELINE_CONTENDERS) -> list[ContenderMeasure]:
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

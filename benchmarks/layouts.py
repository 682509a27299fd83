"""Engine layouts on one machine's GPUs, on the same work: one GPU, N replicas (one engine actor per GPU on a local
Ray: ``--cluster local:N``'s path), one engine over N GPUs (tensor parallel), vLLM's in-process data parallel.

  scaling  recorded gpt-oss-120b attempts (``engine.py --workload real``'s plan, replay engine and recorded tool
           outputs: real_shape.py, attempts.py) solved by the solver's own run driver on each layout, one layout
           per process, in order: one GPU (``one``: in process, problems one after another, as on Kaggle),
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
           probes.py's ``resent``).
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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

from solver.cluster.actor import EngineActor
from solver.measure import DryRun
from solver.config import Config, ConfigError, Layout, load_config, parse_overrides
from solver.config import parse_layout as solver_layout  # this script's own parse_layout speaks of --layouts
from solver.errors import BadInput
from solver.files import atomic_write
from solver.processes import run_group

ENGINE_CORE = "VLLM::EngineCore"  # vLLM's engine core process title (setproctitle), DP ranks add "_DPn"


def script(name: str) -> Any:
    """A sibling benchmark loaded as the script it is (``runpy``; scripts do not import each other), its names as
    attributes."""
    import runpy
    from types import SimpleNamespace

    return SimpleNamespace(**runpy.run_path(str(HERE / f"{name}.py"), run_name=name))


# -- layouts --


def parse_layout(text: str) -> Layout:
    """One layout of ``--layouts``, in the solver's own spelling (``solver.config.parse_layout``): ``one``,
    ``replicas:N``, ``tpN``, ``dpN`` (and their combinations, e.g. ``tp2-replicas:2``); BadInput otherwise.

    >>> parse_layout("one"), parse_layout("replicas:2").gpus, parse_layout("tp2").overrides()
    (Layout(tensor=1, pipeline=1, data=1, replicas=1, seqs=64), 2, {'engine.args.tensor_parallel_size': 2})
    >>> parse_layout("tp")
    Traceback (most recent call last):
    ...
    solver.errors.BadInput: --layouts: one, replicas:N, tpN or dpN, not 'tp'
    """
    try:
        return solver_layout(text)
    except ConfigError:
        raise BadInput(f"--layouts: one, replicas:N, tpN or dpN, not {text.strip()!r}") from None


def layouts_of(text: str) -> dict[str, Layout]:
    """``--layouts``: each layout under its name as given (the name its row, run and process go by).

    >>> [(name, x.gpus) for name, x in layouts_of("one, replicas:2,dp2").items()]
    [('one', 1), ('replicas:2', 2), ('dp2', 2)]
    """
    return {x.strip(): parse_layout(x) for x in text.split(",") if x.strip()}


def overrides(layout: Layout) -> dict[str, Any]:
    """Config keys the layout sets on top of the workload's: its engine arguments, and with data-parallel ranks
    as many problems at once as ranks (each needs work).

    >>> overrides(parse_layout("dp2")), overrides(parse_layout("replicas:2"))
    ({'engine.args.data_parallel_size': 2, 'solve.parallel_problems': 2}, {})
    """
    return {**layout.overrides(), **({"solve.parallel_problems": layout.data} if layout.data > 1 else {})}


# -- processes and GPUs --


def engine_processes(pid: int) -> list[Any]:
    """The engine core processes under ``pid`` (vLLM's title ``VLLM::EngineCore``), each with its descendants (its
    workers): what dies when an engine crashes. The sandbox's processes under the same actor are not among them."""
    import psutil

    found = []
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.name().startswith(ENGINE_CORE) or " ".join(child.cmdline()).startswith(ENGINE_CORE):
                found.append(child)
    out = []
    for core in found:
        with contextlib.suppress(psutil.Error):
            out += [core, *core.children(recursive=True)]
    return out


def kill_engine(pid: int) -> list[str]:
    """SIGKILL the engine of the process ``pid`` from outside, children included; what was killed."""
    import psutil

    procs = engine_processes(pid)
    if not procs:
        raise RuntimeError(f"no {ENGINE_CORE} process under pid {pid}")
    killed = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            name = proc.name()
            proc.send_signal(signal.SIGKILL)
            killed.append(f"{name} (pid {proc.pid})")
    return killed


def gpu_placement(pids: dict[str, int]) -> dict[str, list[str]]:
    """Per name, the GPUs (indices) where a process under its pid holds memory (``nvidia-smi``); empty without
    GPUs. The proof that each replica's engine sits on its own GPU."""
    import psutil

    try:
        uuids = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30).stdout
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    index = {u.strip(): i.strip() for i, u in (line.split(",") for line in uuids.splitlines() if "," in line)}
    holders = {int(p): index.get(u.strip(), u.strip()) for p, u in (line.split(",") for line in apps.splitlines()
                                                                    if "," in line)}
    out: dict[str, list[str]] = {}
    for name, pid in pids.items():
        try:
            tree = [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        except psutil.Error:
            continue
        out[name] = sorted({holders[p] for p in tree if p in holders})
    return out


def gpus_here() -> list[str]:
    from solver.engines.launch import visible_gpus

    return visible_gpus()


def child_env(name: str, layout: Layout) -> dict[str, str]:
    """The environment of layout ``name``'s process: one GPU for ``one``, N for an engine over N, all for replicas
    (Ray gives each actor its own). The machine's own variables (its NCCL settings) stay."""
    env = dict(os.environ)
    gpus = gpus_here()
    if gpus and len(gpus) < layout.gpus:
        raise BadInput(f"layout {name} needs {layout.gpus} GPUs; {len(gpus)} visible")
    if gpus and layout.replicas == 1:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[:layout.gpus])
    # Ray's workers import this module (the actor classes below) and its neighbours by name.
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(HERE), str(HERE.parent), env.get("PYTHONPATH", "")) if x)
    return env


def run_child(argv: list[str], env: dict[str, str], timeout_s: float) -> int:
    """This script again in its own process group; killed with its children at ``timeout_s``."""
    code = run_group([sys.executable, str(Path(__file__).resolve()), *argv], env, timeout_s)
    if code is None:
        print(f"layouts: {' '.join(argv[:2])} ran past {timeout_s:.0f} s: killed", file=sys.stderr)
        return 124
    return code


# -- the engine actors of the benchmark --


def actor_class(name: str) -> type[EngineActor]:
    """An actor class below, from this module imported by its name (``layouts``), not as ``__main__``: Ray's
    workers then import it by that name (``child_env`` puts this folder on their path)."""
    import layouts

    return getattr(layouts, name)


class ReplayActor(EngineActor):
    """An engine actor whose solvers run the replay: its own engine made to follow the recorded attempts
    (``ReplayEngine``), its own sandbox answering with the recorded outputs after the measured seconds
    (``RecordedOutputs``). It warms its engine up once started, as the in-process layouts do."""

    def __init__(self, name: str, omp_threads: str | None, env: dict[str, str] | None, cache_base: str | None,
                 problems: list[list[Any]]) -> None:
        super().__init__(name, omp_threads, env, cache_base)
        self.problems = problems
        self.replay: Any = None

    async def start(self, config: Config) -> Any:
        from solver.measure import HarmonyEndings, warm_up

        info = await super().start(config)
        assert self._session is not None and self._session.engine is not None
        await warm_up(self._session.engine, HarmonyEndings())
        return info

    def wrap(self, engine: Any, sandbox: Any) -> tuple[Any, Any]:
        from solver.dialects import OutputStyle
        from solver.measure import HarmonyEndings, RecordedCalls, replay_on_engine

        assert self._session is not None
        config = self._session.config
        self.replay = replay_on_engine(engine, self.problems, HarmonyEndings())
        return self.replay, RecordedCalls(sandbox, self.problems, OutputStyle.from_config(config.prompt),
                                            config.sandbox.timeout_s)

    async def decoded(self) -> int:
        return sum(self.replay.decoded.values()) if self.replay is not None else 0


class LoadActor(EngineActor):
    """An engine actor that runs the load test's requests on its own engine (``load``)."""

    async def load(self, requests: list[Any], concurrency: int) -> tuple[list[Any], float]:
        assert self._session is not None and self._session.engine is not None
        samples, seconds = await run_requests(self._session.engine, self.name, requests, concurrency)
        return samples, seconds


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
    return parser


def workload(rest: list[str], dry: DryRun | None = None) -> argparse.Namespace:
    """engine.py --workload real's own options (real_shape.parse), its config and its plan; ``tool_time`` resolved
    as engine.py resolves it (``attempts.tool_time_mode``: ``auto`` is the extract's carried seconds when it has
    them, else measure), and the plan made with the carried seconds when those are the ones used. ``dry``: a dry
    run; an attempts file only on the GPU machine leaves ``plan`` None."""
    from solver.measure import Caps, PlanError, plan, read_tool_seconds, tool_time_mode
    from solver.replay import TraceError, read_attempts

    real_shape = script("real_shape")

    try:
        args = real_shape.parse([*rest, "--contenders", "b1"], dry)
        only = tuple(p.strip() for p in args.problem_ids.split(",") if p.strip())
        args.caps = Caps(len(only) or args.problems, args.attempts, args.attempt_tokens, args.attempt_requests, only)
        args.plan = None
        if not args.attempts_here:
            return args
        carried = read_tool_seconds(args.attempts_file)
        args.tool_time = tool_time_mode(args.tool_time, carried, args.attempts_file, BadInput)
        args.plan = plan(read_attempts(args.attempts_file), args.caps, args.config,
                         carried if args.tool_time == "carried" else None)
    except (BadInput, TraceError) as exc:  # PlanError and ConfigError are BadInputs
        raise BadInput(str(exc).splitlines()[0]) from exc
    return args


def read_tool_times(path: Path) -> dict[str, float]:
    """Seconds per call from a scaling --json file (its ``tool_times``) or a plain mapping; BadInput otherwise."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"--tool-times-from: cannot read {path}: {str(exc).splitlines()[0]}") from exc
    times = data.get("tool_times", data) if isinstance(data, dict) else None
    if not isinstance(times, dict) or not all(isinstance(v, (int, float)) for v in times.values()):
        raise BadInput(f"--tool-times-from: {path} holds no seconds per call")
    return {str(k): float(v) for k, v in times.items()}


def tool_times(args: argparse.Namespace, given: Path | None) -> dict[str, float]:
    """Seconds per replayed call: from ``given`` (an earlier call's), carried with the extract, measured once here
    (re-executed in our sandbox) or fixed (``args.tool_time`` as ``workload`` resolved it); every layout's process
    then waits the same."""
    from solver.measure import carried_tool_times, fixed_tool_times, key_of, measure_tool_times

    if given is not None:
        times = read_tool_times(given)
        calls = [key_of(r.problem.id, r.index, t) for rs in args.plan for r in rs for t, step in enumerate(r.steps)
                 if step.call]
        missing = [k for k in calls if k not in times]
        if missing:
            raise BadInput(f"--tool-times-from: {given} has no time for {len(missing)} of the {len(calls)} calls "
                           f"(e.g. {missing[0]}): another workload")
        return times
    if args.tool_time == "carried":
        return carried_tool_times(args.plan)
    if args.tool_time != "measure":
        return fixed_tool_times(args.plan, args.tool_s)
    from solver.sandbox.pool import create_sandbox

    async def measure() -> dict[str, float]:
        sandbox = create_sandbox(args.config.sandbox)
        await sandbox.start()
        try:
            return await measure_tool_times(args.plan, sandbox, args.config.sandbox.timeout_s)
        finally:
            await sandbox.close()

    t0 = time.perf_counter()
    times = asyncio.run(measure())
    print(f"tool times: re-executed {len(times)} recorded calls in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return times


def layout_config(args: argparse.Namespace, layout: Layout) -> Config:
    """The workload's config in the layout, with no time budget for any layout (a cluster run has none, and a
    budget refuses several problems at once)."""
    from solver.core.budget import without_budget

    workers = args.sandbox_workers or args.attempts
    return without_budget(args.config).replace({"sandbox.workers": workers, **overrides(layout)})


def planned_tokens(problems: list[list[Any]]) -> int:
    return sum(r.tokens for rs in problems for r in rs)


async def in_process_layout(config: Config, problems: list[list[Any]], run_dir: Path,
                            probes: dict[str, Any] | None = None) -> dict[str, Any]:
    """``one``, ``tpN``, ``dpN``: the in-process engine, the replay, the solver's run driver (``solve_run``); then,
    with ``probes`` (``seqs``, ``prompt``, ``decode``), the same engine's decode probes (``decode_probes``)."""
    from solver.measure import HarmonyEndings, RecordedCalls, replay_on_engine, warm_up

    from solver.dialects import OutputStyle
    from solver.engines import open_engine
    from solver.loop.run import solve_run
    from solver.sandbox.pool import create_sandbox

    t0 = time.perf_counter()
    sandbox = create_sandbox(config.sandbox)
    await sandbox.start()
    engine = await open_engine(config)
    start_s = time.perf_counter() - t0
    try:
        script = HarmonyEndings()
        await warm_up(engine, script)
        replay = replay_on_engine(engine, problems, script)
        outputs = RecordedCalls(sandbox, problems, OutputStyle.from_config(config.prompt), config.sandbox.timeout_s)
        placement = gpu_placement({"engine": os.getpid()})
        t = time.perf_counter()
        results = await solve_run(config, [rs[0].problem for rs in problems], run_dir, engine=replay,
                                  sandbox=outputs)
        seconds = time.perf_counter() - t
        out = {"start_s": start_s, "seconds": seconds, "decoded": sum(replay.decoded.values()),
               "problem_s": [r.duration_s for r in results], "decided": len(results), "engines": 1,
               "placement": placement}
        if probes:
            out["probes"] = await decode_probes(engine._llm, **probes)
        return out
    finally:
        await engine.close()
        await sandbox.close()


async def replicas_layout(config: Config, problems: list[list[Any]], run_dir: Path, count: int,
                          fault: int) -> dict[str, Any]:
    """``replicas:N``: N engine actors on a local Ray (``--cluster local:N``'s driver), then the fault run."""
    from solver.cluster.connect import RayConnection
    from solver.cluster.driver import Cluster
    from solver.cluster.spec import ClusterSpec

    with RayConnection(ClusterSpec("local", count)) as connection:
        cluster = Cluster(connection, actor_class=actor_class("ReplayActor"), actor_args=(problems,))
        try:
            t0 = time.perf_counter()
            actors = await cluster.start(config)
            start_s = time.perf_counter() - t0
            infos = [asdict(a.info) for a in actors if a.info is not None]
            placement = gpu_placement({a.name: a.info.pid for a in actors if a.info is not None})
            t = time.perf_counter()
            outcome = await cluster.run(config, [rs[0].problem for rs in problems], run_dir)
            seconds = time.perf_counter() - t
            decoded = sum(await asyncio.gather(*(a.handle.decoded.remote() for a in cluster.actors if a.alive)))
            out = {"start_s": start_s, "seconds": seconds, "decoded": decoded, "engines": len(actors),
                   "problem_s": [r.duration_s for r in outcome.results], "decided": len(outcome.results),
                   "deaths": [asdict(d) for d in outcome.deaths], "unsolved": outcome.unsolved, "actors": infos,
                   "placement": placement}
            if fault:
                half = min(out["problem_s"], default=2.0) / 2  # the quickest problem's half: all still running
                out["fault"] = await fault_run(cluster, config, problems[:fault],
                                               run_dir.with_name(run_dir.name + "-fault"), half)
            return out
        finally:
            await cluster.close()


async def fault_run(cluster: Any, config: Config, problems: list[list[Any]], run_dir: Path,
                    delay_s: float) -> dict[str, Any]:
    """The same actors on ``problems``; ``delay_s`` into the run (half the quickest problem's measured time: every
    actor is mid-problem then), ``engine-1``'s engine is killed from outside. What must hold: that actor lost, its problem
    re-queued to another actor and decided, every problem decided once, no (problem, repetition) logged twice, and
    the repetitions logged before the kill kept."""
    from collections import Counter

    from solver.runlog import read_log

    victim = next((a for a in cluster.actors if a.alive and a.name == "engine-1"), None)
    if victim is None or victim.info is None:
        return {"error": "no live engine-1 to kill", "passed": False}
    logged: list[tuple[float, str, str, int]] = []  # (time, actor, problem, index)
    killed: list[str] = []
    kill_time: list[float] = []

    async def kill_later() -> None:
        await asyncio.sleep(delay_s)
        killed.extend(kill_engine(victim.info.pid))
        kill_time.append(time.perf_counter())
        print(f"fault: killed {', '.join(killed)} of {victim.name} {delay_s:.1f} s into the run", file=sys.stderr)

    cluster.on_repetition = lambda actor, rep: logged.append((time.perf_counter(), actor, rep.problem_id, rep.index))
    t = time.perf_counter()
    killer = asyncio.create_task(kill_later())
    try:
        outcome = await cluster.run(config, [rs[0].problem for rs in problems], run_dir)
    finally:
        if not killer.done():
            killer.cancel()
        await asyncio.gather(killer, return_exceptions=True)
        cluster.on_repetition = lambda actor, rep: None
    seconds = time.perf_counter() - t
    records = read_log(run_dir)
    decided = Counter(r.problem_id for r in records.results)
    counts = Counter((r.problem_id, r.index) for r in records.repetitions if r.status != "cancelled")
    death = next((d for d in outcome.deaths if d.actor == victim.name), None)
    lost = death.problem_id if death is not None else None
    before = {(p, i) for when, actor, p, i in logged if actor == victim.name and kill_time and when < kill_time[0]}
    after = {(r.problem_id, r.index) for rs in records.finished().values() for r in rs}
    checks = {
        "engine killed mid-run": bool(killed) and not killer.cancelled(),
        "its actor lost while solving a problem": lost is not None,
        "that problem re-queued and decided": lost in decided and not outcome.unsolved,
        "every problem decided once": sorted(decided) == sorted(rs[0].problem.id for rs in problems)
                                      and set(decided.values()) == {1},
        "no repetition logged twice": max(counts.values(), default=1) == 1,
        f"its {len(before)} repetitions logged before the kill kept": before <= after,
    }
    return {"problems": len(problems), "seconds": seconds, "delay_s": delay_s, "killed": killed,
            "lost_problem": lost, "kept": death.kept if death is not None else None,
            "deaths": [asdict(d) for d in outcome.deaths], "unsolved": outcome.unsolved, "checks": checks,
            "passed": all(checks.values()), "run_dir": str(run_dir)}


def probe_settings(opts: argparse.Namespace) -> dict[str, Any] | None:
    """``--probes`` and ``--probe-tokens`` as ``decode_probes``'s arguments; None without ``--probes``."""
    if opts.probes is None:
        return None
    tokens = ints(opts.probe_tokens, "--probe-tokens")
    if len(tokens) != 2:
        raise BadInput(f"--probe-tokens: PROMPT,DECODE, not {opts.probe_tokens!r}")
    return {"seqs": ints(opts.probes, "--probes"), "prompt": tokens[0], "decode": tokens[1]}


def scaling_child(opts: argparse.Namespace, args: argparse.Namespace) -> int:
    """One layout in this process: its run, its result file."""
    from solver.measure import with_tool_times

    name = opts.child
    layout = parse_layout(name)
    times = read_tool_times(opts.tool_times_from)
    config = layout_config(args, layout)
    if args.dry is not None:
        each = "one GPU" if layout.engine_gpus == 1 else f"{layout.engine_gpus} GPUs"
        where = (f"{layout.replicas} engine actors on a local Ray, {each} each" if layout.replicas > 1 else
                 "one in-process engine")
        args.dry.engine_args(config, BadInput)
        args.dry.gpus(config.engine.args, BadInput)  # the layout's engine, on the GPUs its process gets
        args.dry.add(f"layout {name}: {where}; GPUs visible to its process: "
                     f"{','.join(gpus_here()) or 'none (CPU)'}; engine args "
                     f"{json.dumps(config.engine.args, sort_keys=True)}")
        if args.plan is not None:
            args.dry.add(f"layout {name}: {planned_tokens(with_tool_times(args.plan, times))} planned tokens, "
                         f"{len(times)} call times")
        return args.dry.print()
    problems = with_tool_times(args.plan, times)
    run_dir = opts.out / name.replace(":", "")
    if not args.gpu:
        for key, value in config.engine.env.items():
            os.environ.setdefault(key, str(value))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    if layout.replicas > 1:
        out = asyncio.run(replicas_layout(config, problems, run_dir, layout.replicas, opts.fault))
    else:
        out = asyncio.run(in_process_layout(config, problems, run_dir, probe_settings(opts)))
    out.update(layout=name, sizes=asdict(layout), gpus=layout.gpus, run_dir=str(run_dir),
               planned=planned_tokens(problems), problems=len(problems), attempts=args.attempts,
               engine_args=config.engine.args)
    atomic_write(opts.result, json.dumps(out, indent=1, default=str))
    return 0


def prediction(run_dir: str, layout: Layout, time_model: str) -> dict[str, Any]:
    """The sweep estimate's check of this run (``solver.offline.sweep.check_run``), or why there is none."""
    from solver.offline.sweep import check_run

    try:
        check = check_run(Path(run_dir), time_model=time_model, gpus=layout.gpus)
    except BadInput as exc:  # a ConfigError or SweepError: one line
        return {"error": str(exc)}
    return {"predicted_s": check.predicted_s, "measured_s": check.measured_s, "error": check.error,
            "within": check.within, "line": check.line()}


def scaling_rows(layouts: list[dict[str, Any]]) -> list[str]:
    """The table: one row per layout, the ratio to the first ``one`` row.

    >>> rows = scaling_rows([{"layout": "one", "gpus": 1, "engines": 1, "start_s": 100.0, "seconds": 200.0,
    ...                       "decoded": 200000, "planned": 200000, "problems": 8, "problem_s": [25.0] * 8},
    ...                      {"layout": "replicas:2", "gpus": 2, "engines": 2, "start_s": 110.0, "seconds": 104.0,
    ...                       "decoded": 200000, "planned": 200000, "problems": 8, "problem_s": [26.0] * 8}])
    >>> print("\\n".join(rows))
    layout        GPUs engines  start s  solve s    tok/s s/problem mean prob  ratio per GPU predicted
    one              1       1    100.0    200.0   1000.0     25.00     25.00  1.000   1.000         -
    replicas:2       2       2    110.0    104.0   1923.1     13.00     26.00  1.923   0.962         -
    """
    base = next((x for x in layouts if x.get("layout") == "one" and x.get("seconds")), None)
    lines = [f"{'layout':<12}{'GPUs':>6}{'engines':>8}{'start s':>9}{'solve s':>9}{'tok/s':>9}{'s/problem':>10}"
             f"{'mean prob':>10}{'ratio':>7}{'per GPU':>8}{'predicted':>10}"]
    for x in layouts:
        if not x.get("seconds"):
            lines.append(f"{x.get('layout', '?'):<12} failed: {x.get('error', 'no result')}")
            continue
        tps = x["decoded"] / x["seconds"]
        ratio = tps / (base["decoded"] / base["seconds"]) if base else float("nan")
        mean = sum(x["problem_s"]) / max(1, len(x["problem_s"]))
        pred = x.get("prediction") or {}
        predicted = f"{pred['error']:+.1%}" if isinstance(pred.get("error"), float) else "-"
        lines.append(f"{x['layout']:<12}{x['gpus']:>6}{x['engines']:>8}{x['start_s']:>9.1f}{x['seconds']:>9.1f}"
                     f"{tps:>9.1f}{x['seconds'] / max(1, x['problems']):>10.2f}{mean:>10.2f}{ratio:>7.3f}"
                     f"{ratio / x['gpus']:>8.3f}{predicted:>10}")
    return lines


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
        probe_settings(opts)  # bad --probes or --probe-tokens fail here
        args = workload(rest, dry)
        if args.plan is not None and opts.fault > len(args.plan):
            raise BadInput(f"--fault {opts.fault}: the workload has {len(args.plan)} problems")
        if opts.child is not None:
            return scaling_child(opts, args)
        envs = {name: child_env(name, x) for name, x in layouts.items()}  # too few GPUs visible fails now
        taken = [name for name in layouts if opts.out is not None and (opts.out / name.replace(":", "")).exists()]
        if taken:
            raise BadInput(f"--out {opts.out} already holds a run of {taken[0]}: choose another --out")
        time_model = opts.time_model or ("h100-gptoss" if args.gpu else "tiny")
        try:
            from solver.timing.model import load_time_model

            load_time_model(time_model)  # an unknown --time-model fails now, not after the layouts ran
        except ConfigError as exc:
            raise BadInput(f"--time-model: {str(exc).splitlines()[0]}") from exc
        if dry is not None:
            return scaling_dry_run(opts, argv, args, layouts, envs, time_model, dry)
    except BadInput as exc:
        print(f"layouts.py scaling: error: {exc}", file=sys.stderr)
        return 2
    from solver.measure import with_tool_times

    from solver.measure import plan_summary

    out = opts.out or Path(tempfile.mkdtemp(prefix="layouts-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        times = tool_times(args, opts.tool_times_from)
    except BadInput as exc:
        print(f"layouts.py scaling: error: {exc}", file=sys.stderr)
        return 2
    work = plan_summary(with_tool_times(args.plan, times))
    print(f"workload: {args.caps.line()}: {work['requests']} requests ({work['calls']} calls), {work['tokens']} "
          f"decoded tokens, contexts up to {work['context_max']}, tool time {work['tool_s']:.1f} s; engine "
          f"{args.config.engine.model}, {json.dumps(args.config.engine.args, sort_keys=True)}; runs in {out}")
    rows: list[dict[str, Any]] = []

    def save() -> None:  # after each layout: a call cut off at its limit still returns what it measured
        if opts.json is not None:
            atomic_write(opts.json, json.dumps({"argv": argv, "workload": work, "caps": asdict(args.caps),
                                                "time_model": time_model, "layouts": rows, "tool_times": times},
                                               indent=1, default=str))

    with tempfile.TemporaryDirectory() as tmp:
        times_file = Path(tmp) / "tool_times.json"
        times_file.write_text(json.dumps(times))
        for name, layout in layouts.items():
            result = Path(tmp) / f"{name.replace(':', '')}.json"
            child = [*argv, "--child", name, "--tool-times-from", str(times_file), "--result", str(result),
                     "--out", str(out)]
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


def scaling_dry_run(opts: argparse.Namespace, argv: list[str], args: argparse.Namespace, layouts: dict[str, Layout],
                    envs: dict[str, dict[str, str]], time_model: str, dry: DryRun) -> int:
    """``scaling --dry-run``: the tool times' source and the prediction's layout per layout, then each layout's
    process started as the run starts it (its environment, so its GPUs; the same arguments) with ``--dry-run``: it
    parses and plans what it would run. No engine, no sandbox, nothing measured."""
    from solver.measure import fixed_tool_times

    from solver.timing.model import load_time_model

    dry.engine_args(args.config, BadInput)
    dry.model(args.config.engine.model, BadInput)
    given = opts.tool_times_from
    if given is not None and not dry.present(given, "--tool-times-from", BadInput):
        given = None
    if args.plan is None:
        times: dict[str, float] = read_tool_times(given) if given is not None else {}
        dry.add(f"workload: {args.caps.line()} (the attempts file is not here: not planned)")
    elif given is None and args.tool_time == "measure":
        times = fixed_tool_times(args.plan, 0.0)
        dry.add(f"tool times: {len(times)} recorded calls would be re-executed here first (not in a dry run)")
    else:
        times = tool_times(args, given)
        dry.add(f"tool times: {len(times)} calls, {sum(times.values()):.1f} s in all")
    model = load_time_model(time_model)
    for name, layout in layouts.items():
        engine = Layout.of(layout_config(args, layout).engine.args)
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
        out = opts.out or Path(tmp) / "runs"
        for name in layouts:
            child = [*argv, "--child", name, "--tool-times-from", str(times_file), "--result",
                     str(Path(tmp) / "result.json"), "--out", str(out)]
            codes.append(run_child(["scaling", *child], envs[name], 120.0))
    return max(codes, default=0)


def probe_rows(rows: list[dict[str, Any]]) -> str:
    """The seed's table from layouts that ran the probes (or from seed's rows): per layout its start, KV tokens and
    decode tok/s at each number of sequences."""
    sizes = sorted({d["seqs"] for r in rows for d in (r.get("probes") or r)["decode"]})
    lines = [f"{'layout':<12}{'start s':>9}{'KV tokens':>12}" + "".join(f"{f'{n} seqs tok/s':>15}" for n in sizes)]
    for r in rows:
        probes = r.get("probes") or r
        by = {d["seqs"]: d["tps"] for d in probes["decode"]}
        start = r.get("start_s", r.get("ready_s"))
        lines.append(f"{r.get('layout', 'tp' + str(r.get('tp'))):<12}{start:>9.1f}{probes['kv_cache_tokens'] or 0:>12}"
                     + "".join(f"{by[n]:>15.0f}" if n in by else f"{'-':>15}" for n in sizes))
    return "\n".join(lines)


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
    parser.add_argument("--gpu", action="store_true", help="preset h100-gptoss (unless --preset); default tiny")
    parser.add_argument("--preset", default=None)
    parser.add_argument("--model", default=None, help="engine.model: a local path")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=560.0, help="seconds per engine's process")
    parser.add_argument("--dry-run", action="store_true", help="parse, plan and check; start nothing")
    return parser


def engine_config(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> Config:
    overrides = parse_overrides(args.overrides)
    if args.model:
        overrides["engine.model"] = args.model
    return load_config(args.preset or ("h100-gptoss" if args.gpu else "tiny"),
                       overrides={**overrides, **(extra or {})})


def ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"{flag}: comma-separated whole numbers, not {text!r}") from None
    if not values or min(values) < 1:
        raise BadInput(f"{flag}: numbers >= 1, not {text!r}")
    return values


async def decode_probes(llm: Any, seqs: list[int], prompt: int, decode: int) -> dict[str, Any]:
    """The engine's KV cache tokens and its decode tokens/s at each number of sequences: ``prompt``-token prompts
    sent once, then re-sent decoding ``decode`` tokens each (probes.py's ``resent``: the timed call decodes)."""
    from solver.measure import cache_tokens, resent

    out: dict[str, Any] = {"kv_cache_tokens": cache_tokens(llm), "prompt_tokens": prompt, "decode_tokens": decode,
                           "decode": []}
    for n in seqs:
        r = await resent(llm, n, prompt, decode)
        out["decode"].append({"seqs": n, "tps": r["tps"], "per_seq_tps": r["tps"] / n, "seconds": r["seconds"],
                              "cached_share": r["cached_share"], "preemptions": r["preemptions"]})
        print(f"  {n} x {decode} tokens from {prompt}-token prompts: {r['tps']:.0f} tok/s ({r['tps'] / n:.0f} per "
              f"sequence)", file=sys.stderr, flush=True)
    return out


async def seed_engine(config: Config, seqs: list[int], prompt: int, decode: int, born: float) -> dict[str, Any]:
    """One engine: its start (process start to ready, then the first token), KV tokens, decode at each size."""
    from solver.measure import generate, random_ids

    from solver.engines import open_engine

    engine = await open_engine(config)
    ready = time.time() - born
    llm = engine._llm
    try:
        t = time.perf_counter()
        await generate(llm, random_ids(64, "first"), 1, 0)
        first = ready + time.perf_counter() - t
        await asyncio.gather(*(generate(llm, random_ids(64, ("warm", i)), 8, i) for i in range(4)))
        return {"ready_s": ready, "first_token_s": first, **await decode_probes(llm, seqs, prompt, decode)}
    finally:
        await engine.close()


def seed_env(gpus: list[str], size: int) -> dict[str, str]:
    """The environment of the seed's process for tensor-parallel size ``size``: the first ``size`` of the parent's
    GPUs (all of this machine's on a CPU machine: none), this folder on the path.

    >>> env = seed_env(["0", "1"], 1); env["CUDA_VISIBLE_DEVICES"], str(HERE) in env["PYTHONPATH"]
    ('0', True)
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (str(HERE), str(HERE.parent),
                                                                  os.environ.get("PYTHONPATH", "")) if x))
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[:size])
    return env


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
        sizes, seqs = ints(args.tp, "--tp"), ints(args.seqs, "--seqs")
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


def load_requests(config: Config, count: int, prompt: int, tokens: int) -> list[Any]:
    """The same requests for both sides: random-id prompts (any vocabulary has these ids), exactly ``tokens``
    generated each (``ignore_eos``)."""
    from solver.measure import random_ids

    from solver.types import GenerationRequest

    return [GenerationRequest(f"load-{i}", "", tuple(random_ids(prompt, ("load", i))), tokens,
                              config.sampling.temperature, 1.0, i, (), extra={"ignore_eos": True, "min_tokens": tokens})
            for i in range(count)]


async def run_requests(engine: Any, name: str, requests: list[Any], concurrency: int) -> tuple[list[Any], float]:
    """``requests`` on ``engine``, ``concurrency`` at once; load.py's ``Sample`` per request (times from this
    call's start) and the seconds the whole took."""
    from solver.engines.openai import LoadSample as Sample

    slots = asyncio.Semaphore(concurrency)
    started = time.monotonic()
    samples: list[Any] = []

    async def one(request: Any) -> None:
        async with slots:
            start, first, tokens = time.monotonic() - started, None, 0
            async with contextlib.aclosing(engine.stream(request)) as deltas:
                async for delta in deltas:
                    if first is None and delta.token_ids:
                        first = time.monotonic() - started
                    tokens += len(delta.token_ids)
                    if delta.finish_reason is not None:
                        samples.append(Sample(name, "failed" if delta.finish_reason == "error" else "done", start,
                                              time.monotonic() - started, first, tokens, delta.error))
                        return

    await asyncio.gather(*(one(r) for r in requests))
    return samples, time.monotonic() - started


def spread(requests: list[Any], parts: int) -> list[list[Any]]:
    """Round-robin, as load.py spreads requests over endpoints.

    >>> spread([1, 2, 3, 4, 5], 2)
    [[1, 3, 5], [2, 4]]
    """
    return [requests[i::parts] for i in range(parts)]


def served(config: Config, count: int, requests: list[Any], concurrency: int) -> tuple[list[Any], float, float]:
    """``count`` servers as ``solver serve`` starts them (one per GPU, each its own compile cache folder), the
    requests spread over them through the solver's client; samples, the load's seconds, the servers' start."""
    from solver.engines import open_engine
    from solver.engines.openai import free_ports
    from solver.engines.launch import ServerGroup, plan_servers
    from solver.models import resolve_model

    base = free_ports(count)
    specs = plan_servers(config, resolve_model(config.engine.model), servers=count, gpus=gpus_here(), base_port=base)
    logs = Path(tempfile.mkdtemp(prefix="layouts-serve-"))
    groups = [ServerGroup([spec], logs) for spec in specs]
    cache = os.environ.get("VLLM_CACHE_ROOT")
    t0 = time.perf_counter()
    try:
        from solver.cluster.actor import actor_cache_root, seed_compile_cache

        for i, group in enumerate(groups):  # the group's process inherits this process's environment
            own = actor_cache_root(f"server-{i}", os.environ if cache is None
                                   else {**os.environ, "VLLM_CACHE_ROOT": cache})
            seed_compile_cache(Path(own).parent, Path(own))  # as an engine actor's: warm where it can be
            os.environ["VLLM_CACHE_ROOT"] = own
            group.start()
        for group in groups:
            group.wait_ready(600.0)
        start_s = time.perf_counter() - t0

        async def drive() -> tuple[list[Any], float]:
            engines = [await open_engine(config.replace({"engine.name": "openai", "engine.endpoints": [s.url]}))
                       for s in specs]
            try:
                t = time.monotonic()
                parts = await asyncio.gather(*(run_requests(e, s.url, part, concurrency)
                                               for e, s, part in zip(engines, specs, spread(requests, count))))
                return [x for samples, _ in parts for x in samples], time.monotonic() - t
            finally:
                for engine in engines:
                    await engine.close()

        samples, seconds = asyncio.run(drive())
        return samples, seconds, start_s
    finally:
        if cache is None:
            os.environ.pop("VLLM_CACHE_ROOT", None)
        else:
            os.environ["VLLM_CACHE_ROOT"] = cache
        for group in groups:
            group.stop()


def on_actors(config: Config, count: int, requests: list[Any], concurrency: int) -> tuple[list[Any], float, float]:
    """``count`` engine actors on a local Ray, each its share of the requests on its own in-process engine."""
    from solver.cluster.connect import RayConnection
    from solver.cluster.driver import Cluster
    from solver.cluster.spec import ClusterSpec

    async def main(connection: RayConnection) -> tuple[list[Any], float, float]:
        cluster = Cluster(connection, actor_class=actor_class("LoadActor"))
        try:
            t0 = time.perf_counter()
            actors = await cluster.start(config)
            start_s = time.perf_counter() - t0
            t = time.monotonic()
            parts = await asyncio.gather(*(a.handle.load.remote(part, concurrency)
                                           for a, part in zip(actors, spread(requests, len(actors)))))
            return [x for samples, _ in parts for x in samples], time.monotonic() - t, start_s
        finally:
            await cluster.close()

    with RayConnection(ClusterSpec("local", count)) as connection:
        return asyncio.run(main(connection))


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
    os.environ["PYTHONPATH"] = os.pathsep.join(x for x in (str(HERE), str(HERE.parent),
                                                           os.environ.get("PYTHONPATH", "")) if x)
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
        out["sides"][side] = {"start_s": start_s, "seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
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

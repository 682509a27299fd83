"""Engine layouts on one machine's GPUs, on the same work (``benchmarks/layouts.py``): the layouts by name
(``layouts_of``: ``solver.config.Layout``'s spelling), each layout's run of the real shape (``run_layout``: one GPU or
an engine over several in process, ``replicas:N`` as N engine actors with the fault run after), the time model's
prediction of it, the scaling table, and the seed's engine start, KV cache and decode probes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solver.config import Config, ConfigError, Layout, parse_layout
from solver.errors import BadInput
from solver.measure.fleet import ReplayActor, gpu_placement
from solver.processes import kill_engine
from solver.measure.vllm_probes import cache_tokens, generate, random_ids, resent
from solver.measure.workload import HarmonyEndings, recorded_calls, replay_on_engine, warm_up
from solver.measure.tool_seconds import with_tool_times

if TYPE_CHECKING:
    from solver.measure.shape import ShapeOptions, ShapeWorkload


def layouts_of(text: str) -> dict[str, Layout]:
    """``--layouts``: each layout under its name as given (the name its row, run and process go by).

    >>> [(name, x.gpus) for name, x in layouts_of("one, replicas:2,dp2").items()]
    [('one', 1), ('replicas:2', 2), ('dp2', 2)]
    >>> layouts_of("one,tp")
    Traceback (most recent call last):
    ...
    solver.errors.BadInput: --layouts: one, replicas:N, tpN or dpN, not 'tp'
    """
    out = {}
    for name in (x.strip() for x in text.split(",") if x.strip()):
        try:
            out[name] = parse_layout(name)
        except ConfigError:
            raise BadInput(f"--layouts: one, replicas:N, tpN or dpN, not {name!r}") from None
    return out


def layout_config(options: ShapeOptions, layout: Layout) -> Config:
    """The workload's config in the layout, with no time budget for any layout (a cluster run has none, and a
    budget refuses several problems at once)."""
    from solver.core.budget import without_budget

    return without_budget(options.config).replace({"sandbox.workers": options.workers, **layout.run_overrides()})


def planned_tokens(problems: list[list[Any]]) -> int:
    return sum(r.tokens for rs in problems for r in rs)


async def in_process_layout(config: Config, problems: list[list[Any]], run_dir: Path,
                            probes: dict[str, Any] | None = None) -> dict[str, Any]:
    """``one``, ``tpN``, ``dpN``: the in-process engine, the replay, the solver's run driver (``solve_run``); then,
    with ``probes`` (``seqs``, ``prompt``, ``decode``), the same engine's decode probes (``decode_probes``)."""
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
        outputs = recorded_calls(sandbox, problems, OutputStyle.from_config(config.prompt), config.sandbox.timeout_s)
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
        cluster = Cluster(connection, actor_class=ReplayActor, actor_args=(problems,))
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
    actor is mid-problem then), ``engine-1``'s engine is killed from outside. What must hold: that actor lost, its
    problem re-queued to another actor and decided, every problem decided once, no (problem, repetition) logged twice, and
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
        found = kill_engine(victim.info.pid)
        if not found:
            raise RuntimeError(f"no engine core under pid {victim.info.pid}")
        killed.extend(found)
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


def probe_settings(probes: str | None, probe_tokens: str) -> dict[str, Any] | None:
    """``--probes`` and ``--probe-tokens`` as ``decode_probes``'s arguments; None without ``--probes``.

    >>> probe_settings("1,8", "512,256"), probe_settings(None, "512,512")
    ({'seqs': [1, 8], 'prompt': 512, 'decode': 256}, None)
    """
    if probes is None:
        return None
    tokens = whole_numbers(probe_tokens, "--probe-tokens")
    if len(tokens) != 2:
        raise BadInput(f"--probe-tokens: PROMPT,DECODE, not {probe_tokens!r}")
    return {"seqs": whole_numbers(probes, "--probes"), "prompt": tokens[0], "decode": tokens[1]}


def run_layout(work: ShapeWorkload, name: str, layout: Layout, times: dict[str, float], out: Path,
               fault: int, probes: dict[str, Any] | None) -> dict[str, Any]:
    """One layout's run in this process (``scaling``'s child): the workload ``work`` (``shape_workload``) with the
    tool times ``times``, in ``out``/its name; then the fault run (replicas) or the probes (in process). Its row."""
    if work.plan is None:
        raise BadInput(f"--attempts-file: {work.options.selection.attempts_file} is not here: no plan to run")
    config = layout_config(work.options, layout)
    problems = with_tool_times(work.plan, times)
    run_dir = out / name.replace(":", "")
    if not work.options.gpu:
        for key, value in config.engine.env.items():
            os.environ.setdefault(key, str(value))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    if layout.replicas > 1:
        row = asyncio.run(replicas_layout(config, problems, run_dir, layout.replicas, fault))
    else:
        row = asyncio.run(in_process_layout(config, problems, run_dir, probes))
    row.update(layout=name, sizes=asdict(layout), gpus=layout.gpus, run_dir=str(run_dir),
               planned=planned_tokens(problems), problems=len(problems), attempts=work.options.selection.attempts,
               engine_args=config.engine.args)
    return row


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




def whole_numbers(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"{flag}: comma-separated whole numbers, not {text!r}") from None
    if not values or min(values) < 1:
        raise BadInput(f"{flag}: numbers >= 1, not {text!r}")
    return values


async def decode_probes(llm: Any, seqs: list[int], prompt: int, decode: int) -> dict[str, Any]:
    """The engine's KV cache tokens and its decode tokens/s at each number of sequences: ``prompt``-token prompts
    sent once, then re-sent decoding ``decode`` tokens each (``probes.resent``: the timed call decodes)."""
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

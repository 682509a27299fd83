"""The layout benchmark's engines and processes (``benchmarks/layouts.py``): engine actors that replay recorded
attempts (``ReplayActor``) or run the load test's requests (``LoadActor``), ``solver serve``'s servers against them
(``served``, ``on_actors``), the environment of each layout's process (its GPUs, this checkout's package on the
path: Ray's workers import the actor classes here by name); an engine is killed from outside by
``solver.processes.kill_engine``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from solver.cluster.actor import EngineActor
from solver.config import Config, Layout
from solver.errors import BadInput
from solver.measure.vllm_probes import random_ids
from solver.measure.workload import HarmonyEndings, recorded_calls, replay_on_engine, warm_up

ROOT = Path(__file__).resolve().parents[2]  # the checkout whose package this is


def with_package(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout on ``PYTHONPATH`` first: a layout's process and Ray's workers import this package
    (its actor classes by name), not another installed copy."""
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH", "")) if x)
    return env


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
    return with_package(env)


def seed_env(gpus: list[str], size: int) -> dict[str, str]:
    """The environment of the seed's process for tensor-parallel size ``size``: the first ``size`` of the parent's
    GPUs (all of this machine's on a CPU machine: none), this checkout's package on the path.

    >>> env = seed_env(["0", "1"], 1); env["CUDA_VISIBLE_DEVICES"], str(ROOT) in env["PYTHONPATH"]
    ('0', True)
    """
    env = with_package(dict(os.environ))
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[:size])
    return env



# -- the engine actors of the benchmark --


class ReplayActor(EngineActor):
    """An engine actor whose solvers run the replay: its own engine made to follow the recorded attempts
    (``ReplayEngine``), its own sandbox answering with the recorded outputs after the measured seconds
    (``recorded_calls``). It warms its engine up once started, as the in-process layouts do."""

    def __init__(self, name: str, omp_threads: str | None, env: dict[str, str] | None, cache_base: str | None,
                 problems: list[list[Any]]) -> None:
        super().__init__(name, omp_threads, env, cache_base)
        self.problems = problems
        self.replay: Any = None

    async def start(self, config: Config) -> Any:
        info = await super().start(config)
        assert self._session is not None and self._session.engine is not None
        await warm_up(self._session.engine, HarmonyEndings())
        return info

    def wrap(self, engine: Any, sandbox: Any) -> tuple[Any, Any]:
        from solver.dialects import OutputStyle

        assert self._session is not None
        config = self._session.config
        self.replay = replay_on_engine(engine, self.problems, HarmonyEndings())
        return self.replay, recorded_calls(sandbox, self.problems, OutputStyle.from_config(config.prompt),
                                            config.sandbox.timeout_s)

    async def decoded(self) -> int:
        return sum(self.replay.decoded.values()) if self.replay is not None else 0


class LoadActor(EngineActor):
    """An engine actor that runs the load test's requests on its own engine (``load``)."""

    async def load(self, requests: list[Any], concurrency: int) -> tuple[list[Any], float]:
        assert self._session is not None and self._session.engine is not None
        samples, seconds = await run_requests(self._session.engine, self.name, requests, concurrency)
        return samples, seconds


def load_requests(config: Config, count: int, prompt: int, tokens: int) -> list[Any]:
    """The same requests for both sides: random-id prompts (any vocabulary has these ids), exactly ``tokens``
    generated each (``ignore_eos``)."""
    from solver.types import GenerationRequest

    return [GenerationRequest(f"load-{i}", "", tuple(random_ids(prompt, ("load", i))), tokens,
                              config.sampling.temperature, 1.0, i, (), extra={"ignore_eos": True, "min_tokens": tokens})
            for i in range(count)]


async def run_requests(engine: Any, name: str, requests: list[Any], concurrency: int) -> tuple[list[Any], float]:
    """``requests`` on ``engine``, ``concurrency`` at once; the load test's ``LoadSample`` per request (times from this
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
        cluster = Cluster(connection, actor_class=LoadActor)
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
